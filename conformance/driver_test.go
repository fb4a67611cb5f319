package conformance_test

import (
	"context"
	"testing"

	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/driver"
)

// minimal is a driver with nothing but the methods of driver.Driver: a
// mem driver with every optional interface of package driver hidden, as
// docs/drivers.md's minimum driver has.
type minimal struct{ driver.Driver }

// TestRunDriverValue runs the whole suite from driver values alone (no URL,
// no registered opener, no PushRaw) on a minimum driver that declares
// unsupported every feature that needs an optional interface: every check
// passes or skips naming what it needs.
func TestRunDriverValue(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Harness{
		Name: "minimum driver",
		NewDriver: func(_ context.Context, _ testing.TB, queue string) (driver.Driver, error) {
			d, err := mem.New(mem.Options{Queue: queue, Unsupported: []driver.Feature{
				driver.ConcurrencyLimit, driver.RateLimit, driver.Pause, driver.Results, driver.Cancel, driver.WorkerRegistry, driver.Groups,
				driver.Schedules, driver.BulkActions, driver.Dependencies,
			}})
			if err != nil {
				return nil, err
			}
			return minimal{d}, nil
		},
	})
}
