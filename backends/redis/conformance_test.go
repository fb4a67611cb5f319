package redis

import (
	"strconv"
	"testing"

	"github.com/jobq/jobq/conformance"
)

// TestConformance runs the shared suite against the Redis server at
// JOBQ_TEST_REDIS_URL (default redis://127.0.0.1:6379/0), every check on its
// own queue (and so its own keys), in parallel.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		Name:        "redis",
		NewQueueURL: func(t testing.TB) string { return newQueueURL(t, "") },
		PushRaw:     conformance.RawPusher(&Opener{}),
	})
}

// TestConformanceSizeLimit runs the suite on queues whose URL lowers the
// message size limit, so that the stash and TooLarge paths run too.
func TestConformanceSizeLimit(t *testing.T) {
	const limit = 64 << 10
	conformance.Run(t, conformance.Harness{
		Name: "redis-limited",
		NewQueueURL: func(t testing.TB) string {
			return newQueueURL(t, "") + "&max_message_bytes=" + strconv.Itoa(limit)
		},
		MaxMessageBytes: limit,
		PushRaw:         conformance.RawPusher(&Opener{}),
	})
}
