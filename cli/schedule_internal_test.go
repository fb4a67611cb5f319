package cli

import (
	"testing"
	"time"
)

// TestFormatSlot: slots of a schedule that fires within a minute (@every
// 5s) show their seconds; schedule list printed the next run and the last
// fired slot alike ("2026-11-29 16:48 UTC") although they were seconds
// apart. Whole-minute slots keep the short form.
func TestFormatSlot(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		t    time.Time
		tz   string
		want string
	}{
		{time.Date(2026, 11, 29, 16, 48, 51, 0, time.UTC), "", "2026-11-29 16:48:51 UTC"},
		{time.Date(2026, 11, 29, 16, 48, 0, 0, time.UTC), "", "2026-11-29 16:48 UTC"},
		{time.Date(2026, 11, 29, 2, 0, 0, 0, time.UTC), "Europe/Berlin", "2026-11-29 03:00 CET"},
		{time.Time{}, "", "-"},
	} {
		if got := formatSlot(tt.t, tt.tz); got != tt.want {
			t.Errorf("formatSlot(%v, %q) = %q, want %q", tt.t, tt.tz, got, tt.want)
		}
	}
}
