package benchkit

import (
	"context"
	"log/slog"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// noRecords is a driver with its result records and cancel hidden: the
// portable layer sees neither ResultStore, ResultWaiter nor
// TaskRemover, and Results and Cancel declared Unsupported, so the queue
// keeps no records. Everything else is the driver's own.
type noRecords struct {
	driver.Driver
	driver.PolicyStore
	driver.Namer
	caps driver.Capabilities
}

func (n *noRecords) Capabilities() driver.Capabilities { return n.caps }

// OpenWithoutRecords makes a queue on d that keeps no result records, to
// measure what records cost against a queue on the same backend that keeps
// them. d must be a policy store that knows its name (as the SQL and Redis
// drivers are). The queue owns d.
func OpenWithoutRecords(b *testing.B, d driver.Driver) *jobq.Queue {
	b.Helper()
	ps, ok := d.(driver.PolicyStore)
	nm, ok2 := d.(driver.Namer)
	if !ok || !ok2 {
		b.Fatalf("%T is not a policy store with a name", d)
	}
	caps := d.Capabilities()
	features := make(map[driver.Feature]driver.Support, len(caps.Features))
	for f, s := range caps.Features {
		features[f] = s
	}
	for _, f := range []driver.Feature{driver.Results, driver.Cancel} {
		features[f] = driver.Support{Level: driver.Unsupported, Fallback: "hidden by the benchmark"}
	}
	caps.Features = features
	q, err := jobq.New(&noRecords{Driver: d, PolicyStore: ps, Namer: nm, caps: caps}, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = q.Admin().Clear(context.Background())
		_ = q.Close()
	})
	return q
}
