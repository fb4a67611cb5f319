package bound

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDurationsParse(t *testing.T) {
	t.Parallel()
	const day = 24 * time.Hour
	cli := NonNegative
	url := Durations{}
	tests := []struct {
		name    string
		r       Durations
		in      string
		want    time.Duration
		wantErr string // a part of the error; "" for success
	}{
		{"go syntax", cli, "1h30m", 90 * time.Minute, ""},
		{"days and weeks", cli, "1w2d", 9 * day, ""},
		{"fraction", cli, "1.5h", 90 * time.Minute, ""},
		{"micro sign", cli, "3µs", 3 * time.Microsecond, ""},
		{"bare seconds", cli, "600", 600 * time.Second, ""},
		{"bare fraction", cli, ".5", 500 * time.Millisecond, ""},
		{"bare exponent", cli, "1e3", 1000 * time.Second, ""},
		{"zero", url, "0", 0, ""},
		{"largest", cli, "2562047h47m16.854775807s", MaxDuration, ""},
		{"bare needs unit in URLs", url, "500", 0, "has no unit"},
		{"empty", cli, " ", 0, "empty"},
		{"NaN", cli, "NaN", 0, "not a duration"},
		{"Inf", cli, "+Inf", 0, "not a duration"},
		{"hex float", cli, "0x1p3", 0, "not a duration"},
		{"negative", cli, "-5s", 0, "negative"},
		{"negative bare", cli, "-1", 0, "negative"},
		{"bare overflow", cli, "1e10", 0, "too long"},
		{"huge exponent", cli, "1e999", 0, "too long"},
		{"unit overflow", cli, "300y", 0, "not a duration"},
		{"week overflow", cli, "15251w", 0, "too long"},
		{"sum overflow", cli, "2562047h47m17s", 0, "too long"},
		{"digits overflow", cli, "99999999999999999999ns", 0, "too long"},
		{"below min", Durations{Min: time.Second}, "10ms", 0, "out of range; use 1s"},
		{"above max", Durations{Max: time.Hour}, "2h", 0, "out of range; use 0s to 1h"},
		{"unknown unit", cli, "10x", 0, "not a duration"},
		{"space inside", cli, "1d 2h", 0, "not a duration"},
		{"dangling number", cli, "1h30", 0, "not a duration"},
		{"too long input", cli, strings.Repeat("1", 200) + "s", 0, "too long to be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.r.Parse("--x", tt.in)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "--x") {
				t.Fatalf("Parse(%q) = %v, %v; want an error naming --x with %q", tt.in, got, err, tt.wantErr)
			}
		})
	}
}

func TestIntsParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		r       Ints
		in      string
		want    int64
		wantErr string
	}{
		{PositiveInt, "8", 8, ""},
		{Int32, "-2147483648", math.MinInt32, ""},
		{PositiveInt, "0", 0, "out of range; use a whole number from 1 to"},
		{Int32, "2147483648", 0, "out of range"},
		{Int, "99999999999999999999", 0, "out of range"},
		{Int, "1.5", 0, "not a whole number"},
		{Int, "0x10", 0, "not a whole number"},
		{Int, "", 0, "not a whole number"},
		{Ints{Min: -1, Max: 10, Hint: "use -1 for no limit"}, "-2", 0, "use -1 for no limit"},
	}
	for _, tt := range tests {
		got, err := tt.r.Parse("query parameter n", tt.in)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "query parameter n") {
			t.Errorf("Parse(%q) = %v, %v; want an error naming the parameter with %q", tt.in, got, err, tt.wantErr)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, time.Nanosecond, 1500 * time.Millisecond, 90 * time.Second, 36 * time.Hour, 14 * 24 * time.Hour, MaxDuration} {
		back, err := NonNegative.Parse("", Format(d))
		if err != nil || back != d {
			t.Errorf("Format(%v) = %q, which parses to %v, %v", d, Format(d), back, err)
		}
	}
}

// FuzzDuration checks that any input parses to a duration in range or to
// an error, never a panic, a wrapped-around value or a NaN, that Format
// reads back as the same duration, and that Go's own syntax reads as
// time.ParseDuration reads it.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"90s", "1h30m", "1.5d", "1e10", "NaN", "-5s", "2562047h47m16.854775807s", "0.000000001s", ".5", "1e-3", "3µs", "9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := Durations{Min: time.Millisecond, Max: 30 * 24 * time.Hour, BareSeconds: true}
		d, err := r.Parse("--x", s)
		if err == nil && (d < r.Min || d > r.Max) {
			t.Fatalf("Parse(%q) = %v, outside %v..%v", s, d, r.Min, r.Max)
		}
		full, err := NonNegative.Parse("--x", s)
		if err == nil && full < 0 {
			t.Fatalf("Parse(%q) = %v, negative", s, full)
		}
		// What Format prints (help text, errors, hints) reads back.
		if back, ferr := NonNegative.Parse("--x", Format(full)); err == nil && (ferr != nil || back != full) {
			t.Fatalf("Parse(%q) = %v, whose Format %q reads back as %v, %v", s, full, Format(full), back, ferr)
		}
		// Where Go's parser takes the input (and the input is not a bare
		// number, which Go refuses), both agree to within the rounding of
		// fractions.
		if g, gerr := time.ParseDuration(s); gerr == nil && g >= 0 && err == nil && !bareNumber.MatchString(strings.TrimSpace(strings.TrimPrefix(s, "+"))) {
			if diff := g - full; diff > 1 || diff < -1 {
				t.Fatalf("Parse(%q) = %v; time.ParseDuration says %v", s, full, g)
			}
		}
	})
}

// FuzzInts checks that a count parses within its range or fails.
func FuzzInts(f *testing.F) {
	for _, s := range []string{"1", "-1", "2147483648", "99999999999999999999", " 7 ", "+3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := PositiveInt32.Parse("--n", s)
		if err == nil && (n < 1 || n > math.MaxInt32) {
			t.Fatalf("Parse(%q) = %d, out of range", s, n)
		}
	})
}
