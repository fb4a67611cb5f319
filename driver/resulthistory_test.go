package driver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestFirstLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", driver.MaxFirstLine+5)
	tests := []struct {
		name, output, errText, want string
	}{
		{"first line", "error: x\nmore", "exit status 1", "error: x"},
		{"leading blank lines and spaces", "\n \r\n  out of memory  \r\nnext", "", "out of memory"},
		{"blank output takes the error", " \n\t", "exit status 3\ndetail", "exit status 3"},
		{"nothing", "", "", ""},
		{"cut to MaxFirstLine characters", long, "", strings.Repeat("é", driver.MaxFirstLine)},
	}
	for _, tt := range tests {
		if got := driver.FirstLine(tt.output, tt.errText); got != tt.want {
			t.Errorf("%s: FirstLine(%q, %q) = %q; want %q", tt.name, tt.output, tt.errText, got, tt.want)
		}
	}
}

func TestRuntimeBin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 0},
		{99 * time.Millisecond, 0},
		{100 * time.Millisecond, 1},
		{141 * time.Millisecond, 1},
		{142 * time.Millisecond, 2},
		{3 * time.Second, 10},
		{1000 * time.Hour, driver.MaxRuntimeBin},
	}
	for _, tt := range tests {
		got := driver.RuntimeBin(tt.d)
		if got != tt.want {
			t.Errorf("RuntimeBin(%v) = %d; want %d", tt.d, got, tt.want)
		}
		if lo, hi := driver.RuntimeBinBounds(got); got < driver.MaxRuntimeBin && (tt.d < lo || tt.d >= hi) {
			t.Errorf("RuntimeBinBounds(%d) = [%v, %v); it does not hold %v", got, lo, hi, tt.d)
		}
	}
}

func TestCheckHistoryParams(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name string
		p    driver.HistoryParams
		want string // "" for valid
	}{
		{"a day in hours", driver.HistoryParams{Since: now.Add(-24 * time.Hour), Until: now, Bucket: time.Hour}, ""},
		{"empty window", driver.HistoryParams{Since: now, Until: now, Bucket: time.Hour}, "before it starts"},
		{"bucket under a second", driver.HistoryParams{Since: now.Add(-time.Hour), Until: now, Bucket: time.Millisecond}, "shorter than a second"},
		{"too many buckets", driver.HistoryParams{Since: now.Add(-7 * 24 * time.Hour), Until: now, Bucket: time.Minute}, "use wider buckets"},
		{"negative examples", driver.HistoryParams{Since: now.Add(-time.Hour), Until: now, Bucket: time.Minute, Examples: -1}, "negative"},
	}
	for _, tt := range tests {
		err := driver.CheckHistoryParams(tt.p)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v; want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || errcode.Of(err) != errcode.InvalidArgument):
			t.Errorf("%s: %v; want InvalidArgument saying %q", tt.name, err, tt.want)
		}
	}
	p := driver.HistoryParams{Since: now.Add(-90 * time.Minute), Until: now, Bucket: time.Hour}
	if n := p.NumBuckets(); n != 2 {
		t.Errorf("NumBuckets of 90 min in hours = %d; want 2", n)
	}
	for at, want := range map[time.Duration]int{-time.Hour: 0, 0: 0, 61 * time.Minute: 1, 5 * time.Hour: 1} {
		if got := p.BucketOf(p.Since.Add(at)); got != want {
			t.Errorf("BucketOf(since%+v) = %d; want %d", at, got, want)
		}
	}
}
