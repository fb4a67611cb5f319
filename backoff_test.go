package jobq

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/errcode"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Base: 10 * time.Second, Cap: time.Minute}
	tests := []struct {
		failures int
		full     time.Duration // before jitter
	}{
		{1, 10 * time.Second},
		{2, 20 * time.Second},
		{3, 40 * time.Second},
		{4, time.Minute},
		{60, time.Minute},
	}
	for _, tt := range tests {
		for range 50 {
			d := b.Delay(tt.failures)
			if d < tt.full/2 || d > tt.full {
				t.Fatalf("Delay(%d) = %v; want between %v and %v", tt.failures, d, tt.full/2, tt.full)
			}
		}
	}
	// A missing half is the default's.
	if got := (Backoff{Base: time.Hour}).filled(); got != (Backoff{Base: time.Hour, Cap: time.Hour}) {
		t.Errorf("Base alone filled to %v; want the base as cap (longer than the default cap)", got)
	}
	if got := (Backoff{Cap: time.Second}).filled(); got != (Backoff{Base: time.Second, Cap: time.Second}) {
		t.Errorf("Cap alone filled to %v; want the cap as base (shorter than the default base)", got)
	}
}

func TestParseBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Backoff
		err  string
	}{
		{"10s,1h", Backoff{Base: 10 * time.Second, Cap: time.Hour}, ""},
		{"1ms,1ms", Backoff{Base: time.Millisecond, Cap: time.Millisecond}, ""},
		{"30s", Backoff{Base: 30 * time.Second, Cap: 10 * time.Minute}, ""},
		{"1d,1w", Backoff{Base: 24 * time.Hour, Cap: 7 * 24 * time.Hour}, ""},
		{"1h,10s", Backoff{}, "longer than its cap"},
		{"0,1h", Backoff{}, "zero"},
		{"-1s,1h", Backoff{}, "negative"},
		{"ten,1h", Backoff{}, "not a duration"},
		{"1s,", Backoff{}, "empty"},
		{"1s,20000d", Backoff{}, "out of range"},
	}
	for _, tt := range tests {
		got, err := parseBackoff(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseBackoff(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseBackoff(%q) = %v, %v; want an InvalidArgument error containing %q", tt.in, got, err, tt.err)
		}
	}
}

func TestWireRetryBackoffAndTimeLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		task   Task
		member string // what the body must contain
		want   Task   // the decoded fields
	}{
		{"both", Task{Command: "x", RetryBackoff: Backoff{Base: 10 * time.Second, Cap: time.Hour}, TimeLimit: 2 * time.Hour},
			`"retry_backoff": {"base": 10.0, "cap": 3600.0}, "time_limit": 7200.0`,
			Task{RetryBackoff: Backoff{Base: 10 * time.Second, Cap: time.Hour}, TimeLimit: 2 * time.Hour}},
		{"milliseconds", Task{Command: "x", TimeLimit: 1500 * time.Millisecond}, `"time_limit": 1.5`,
			Task{TimeLimit: 1500 * time.Millisecond}},
		{"under a millisecond is one", Task{Command: "x", TimeLimit: time.Microsecond}, `"time_limit": 0.001`,
			Task{TimeLimit: time.Millisecond}},
		{"a missing cap is the default", Task{Command: "x", RetryBackoff: Backoff{Base: time.Second}}, `"retry_backoff": {"base": 1.0, "cap": 600.0}`,
			Task{RetryBackoff: Backoff{Base: time.Second, Cap: 10 * time.Minute}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			task := tt.task
			b, err := encodeTask(&task)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), `{"version": 2`) || !strings.Contains(string(b), tt.member) {
				t.Fatalf("body %s; want schema v2 with %s", b, tt.member)
			}
			got, err := unmarshalTask(b)
			if err != nil {
				t.Fatal(err)
			}
			if got.RetryBackoff != tt.want.RetryBackoff || got.TimeLimit != tt.want.TimeLimit {
				t.Errorf("decoded backoff %v and time limit %v; want %v and %v", got.RetryBackoff, got.TimeLimit, tt.want.RetryBackoff, tt.want.TimeLimit)
			}
			if b2, err := encodeTask(got); err != nil || string(b2) != string(b) {
				t.Errorf("re-encoding is not stable: %v\n%s\n%s", err, b, b2)
			}
		})
	}
	// Without the new fields a task stays v1, byte for byte.
	plain := &Task{Command: "x"}
	b, err := encodeTask(plain)
	if err != nil || !strings.HasPrefix(string(b), `{"version": 1`) {
		t.Errorf("a task without retry backoff or time limit encodes as %s, %v; want schema v1", b, err)
	}
}

func TestWireRejectsBadDurations(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`"retry_backoff": {"base": 10}`,
		`"retry_backoff": {"base": 10, "cap": 5}`,
		`"retry_backoff": [10, 20]`,
		`"retry_backoff": {"base": "10s", "cap": 20}`,
		`"time_limit": -1`,
		`"time_limit": "2h"`,
		`"time_limit": 1e300`,
	} {
		full := `{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 0, ` + body + `}`
		if _, err := unmarshalTask([]byte(full)); errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("decoding %s: %v; want InvalidArgument", body, err)
		}
	}
	for _, task := range []Task{
		{Command: "x", TimeLimit: -time.Second},
		{Command: "x", RetryBackoff: Backoff{Base: time.Hour, Cap: time.Second}},
		{Command: "x", RetryBackoff: Backoff{Base: -time.Second}},
	} {
		if _, err := encodeTask(&task); errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("encodeTask(%+v): %v; want InvalidArgument", task, err)
		}
	}
}
