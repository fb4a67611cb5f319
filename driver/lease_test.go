package driver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestLocalLease(t *testing.T) {
	t.Parallel()
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		l      driver.LocalLease
		at     time.Duration // after sent
		wantOK bool
	}{
		{"fresh lease", driver.LocalLease{Length: 30 * time.Second}, time.Second, true},
		{"just before the default margin (3s)", driver.LocalLease{Length: 30 * time.Second}, 27*time.Second - time.Nanosecond, true},
		{"at the default margin", driver.LocalLease{Length: 30 * time.Second}, 27 * time.Second, false},
		{"expired", driver.LocalLease{Length: 30 * time.Second}, time.Minute, false},
		{"within an explicit margin", driver.LocalLease{Length: 30 * time.Second, Margin: 5 * time.Second}, 26 * time.Second, false},
		{"before an explicit margin", driver.LocalLease{Length: 30 * time.Second, Margin: time.Second}, 28 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exp := tt.l.Expiry(sent)
			if want := sent.Add(tt.l.Length); !exp.Equal(want) {
				t.Fatalf("Expiry(%v) = %v, want %v", sent, exp, want)
			}
			err := tt.l.Check("complete", driver.Lease{MessageID: "m-1", Token: "t", Expiry: exp}, sent.Add(tt.at))
			switch {
			case tt.wantOK && err != nil:
				t.Errorf("Check at +%v = %v; want nil", tt.at, err)
			case !tt.wantOK && errcode.Of(err) != errcode.LockLost:
				t.Errorf("Check at +%v = %v; want a LockLost error", tt.at, err)
			case !tt.wantOK && (!strings.Contains(err.Error(), "complete") || !strings.Contains(err.Error(), "m-1")):
				t.Errorf("Check at +%v = %v; want the operation and the message named", tt.at, err)
			}
		})
	}
}
