package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/statsreport"
)

// TestPrintKeysSaysPerWorkerOnlyWhereItIs: the in-flight column says
// "per worker" where the backend leaves limits to each worker process,
// not where it merely cannot count a key's waiting tasks (Redis enforces
// limits itself and knows the in-flight count).
func TestPrintKeysSaysPerWorkerOnlyWhereItIs(t *testing.T) {
	t.Parallel()
	keys := func(perWorker bool) *statsreport.Keys {
		return &statsreport.Keys{
			Policies:  []driver.Policy{{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 2}, {Kind: driver.RatePolicy, Key: "lic", Limit: 2, Period: time.Minute}},
			Stats:     []driver.KeyStat{{Kind: driver.ConcurrencyPolicy, Key: "gpu", InFlight: 1, Waiting: -1}, {Kind: driver.RatePolicy, Key: "lic", Admitted: 1, Waiting: -1}},
			PerWorker: perWorker,
		}
	}
	tests := []struct {
		perWorker   bool
		want, never string
	}{
		{false, "gpu  1 ", "per worker"},
		{true, "gpu  per worker", "gpu  1 "},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := printKeys(&b, keys(tt.perWorker)); err != nil {
			t.Fatal(err)
		}
		if out := b.String(); !strings.Contains(out, tt.want) || strings.Contains(out, tt.never) {
			t.Errorf("per worker %t: printed\n%s\nwant %q and not %q", tt.perWorker, out, tt.want, tt.never)
		}
	}
}
