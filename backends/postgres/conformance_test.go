package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jobq/jobq/backends/postgres"
	"github.com/jobq/jobq/conformance"
)

// conformanceMaxBytes lowers the queue's size limit so that the suite's
// size check moves 1 MiB rather than the default 64 MiB.
const conformanceMaxBytes = 1 << 20

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		Name: "postgres",
		NewQueueURL: func(t testing.TB) string {
			return queueURL(t, url.Values{"max_message_bytes": {fmt.Sprint(conformanceMaxBytes)}})
		},
		MaxMessageBytes: conformanceMaxBytes,
		PushRaw:         conformance.RawPusher(postgres.Opener{}),
		Corruptions:     corruptions,
	})
}

// TestConformanceThroughPgBouncer runs the shared suite through PgBouncer in
// transaction pooling mode, opened with pgbouncer=true: no startup
// parameters, unnamed statements, no LISTEN (receivers poll). It is skipped
// with -short or without pgbouncer installed (.ci/install-pgbouncer.sh).
func TestConformanceThroughPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PgBouncer")
	}
	bouncer, err := url.Parse(postgres.StartPgBouncer(t, 10))
	if err != nil {
		t.Fatal(err)
	}
	conformance.Run(t, conformance.Harness{
		Name: "postgres-pgbouncer",
		NewQueueURL: func(t testing.TB) string {
			u, err := url.Parse(queueURL(t, url.Values{"max_message_bytes": {fmt.Sprint(conformanceMaxBytes)},
				"pgbouncer": {"true"}, "poll": {"20ms"}}))
			if err != nil {
				t.Fatal(err)
			}
			u.Host = bouncer.Host
			return u.String()
		},
		MaxMessageBytes: conformanceMaxBytes,
		PushRaw:         conformance.RawPusher(postgres.Opener{}),
		Corruptions:     corruptions,
	})
}

// corruptions are the damaged rows the CorruptRecord check stores: values
// the columns' types allow but no jobq writes.
var corruptions = []conformance.Corruption{
	damaged("delivery count at the integer's limit", "deliveries = 2147483647"),
	damaged("negative delivery count", "deliveries = -5"),
	damaged("enqueue time is infinity", "enqueued_at = 'infinity'"),
	damaged("enqueue time is -infinity, visible since -infinity", "enqueued_at = '-infinity', visible_at = '-infinity'"),
	damaged("stored body without a header jobq writes", "packed_body = decode('00', 'hex') || packed_body"),
	// The body leaves the task ID out, so the rebuilt body holds 0xbe too.
	damaged("task key is not valid UTF-8", `task_key = '\x6b6579be2d6b6579'::bytea`),
}

func damaged(name, set string) conformance.Corruption {
	return conformance.Corruption{Name: name, Write: func(ctx context.Context, url string, body []byte) error {
		return postgres.WriteDamaged(ctx, url, body, set)
	}}
}
