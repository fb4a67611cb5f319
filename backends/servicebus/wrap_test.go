package servicebus_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// newQueue wraps a driver built by New in a *jobq.Queue, the way
// jobq.New(d, jobq.Options{}) does once the root package has it: it
// registers a one-off scheme whose opener returns d.
func newQueue(ctx context.Context, d driver.Driver) (*jobq.Queue, error) {
	scheme := fmt.Sprintf("servicebus-given-%d", schemes.Add(1))
	jobq.Register(scheme, given{d})
	return jobq.OpenWithOptions(ctx, scheme+"://client/queue", jobq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
}

var schemes atomic.Int64

type given struct{ d driver.Driver }

func (g given) Open(context.Context, *url.URL, driver.OpenOptions) (driver.Driver, error) {
	return g.d, nil
}

func (g given) Capabilities() driver.Capabilities { return g.d.Capabilities() }
