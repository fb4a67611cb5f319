package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		{"2h", now.Add(-2 * time.Hour), false},
		{"3d", now.Add(-72 * time.Hour), false},
		{"2026-11-27T09:30:00Z", time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC), false},
		{"yesterday", time.Time{}, true},
		{"-2h", time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := parseSince(tt.in, now)
		if tt.wantErr {
			if err == nil || exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--since") {
				t.Errorf("parseSince(%q) = %v, %v; want a usage error naming --since", tt.in, got, err)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestGroupText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		c    driver.GroupCounters
		want string
	}{
		{driver.GroupCounters{Name: "g", Pushed: 10, Succeeded: 3, DeadLettered: 1, Queued: 4, Running: 2, Split: true},
			"g: 4/10 ended (3 succeeded, 1 dead-lettered, 0 cancelled); 4 queued, 0 delayed, 2 running"},
		{driver.GroupCounters{Name: "g", Pushed: 10, Succeeded: 3, Failed: 2},
			"g: 3/10 ended (3 succeeded, 0 dead-lettered, 0 cancelled); 7 open; 2 failed attempts retried"},
		{driver.GroupCounters{Name: "g", Pushed: 2, Succeeded: 1, Cancelled: 1, Split: true},
			"g: 2/2 ended (1 succeeded, 0 dead-lettered, 1 cancelled); 0 queued, 0 delayed, 0 running; done"},
	}
	for _, tt := range tests {
		if got := groupText(&tt.c); got != tt.want {
			t.Errorf("groupText(%+v) = %q; want %q", tt.c, got, tt.want)
		}
	}
}

func TestNewGroupName(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 20, 5, 12, 0, time.UTC)
	a, b := newGroupName(now), newGroupName(now)
	if !strings.HasPrefix(a, "push-20261128-200512-") || len(a) != len("push-20261128-200512-")+4 || a == b {
		t.Errorf("newGroupName = %q, %q; want push-20261128-200512-xxxx, distinct", a, b)
	}
}
