package azqueue_test

import (
	"context"
	"log/slog"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// newQueue wraps a driver built by New in a *jobq.Queue.
func newQueue(_ context.Context, d driver.Driver) (*jobq.Queue, error) {
	return jobq.New(d, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
}
