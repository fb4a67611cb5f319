package servicebus

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jobq/jobq/errcode"
)

// TestParseURLBounds: numbers that the SDK keeps in an int32 are refused
// when they do not fit (retries=4294967296 used to wrap around to 0, that
// is no retries), and durations go through jobq's parser.
func TestParseURLBounds(t *testing.T) {
	t.Parallel()
	tests := []struct{ query, wantErr string }{
		{"retries=4294967296", `retries="4294967296": out of range`},
		{"retries=-1", `retries="-1": out of range`},
		{"max_delivery_count=4294967297", `max_delivery_count="4294967297": out of range`},
		{"lock_duration=NaN", `lock_duration="NaN": not a duration`},
		{"retry_delay=1e10", `retry_delay="1e10": it has no unit`},
		{"lock_duration=2m&dedup_window=1d&retries=5", ""},
	}
	for _, tt := range tests {
		u, err := url.Parse("sb://ns/q?" + tt.query)
		if err != nil {
			t.Fatal(err)
		}
		_, err = parseURL(u)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.query, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("%s: error %v; want InvalidArgument with %q", tt.query, err, tt.wantErr)
		}
	}
}
