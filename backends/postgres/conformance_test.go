package postgres_test

import (
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
	})
}
