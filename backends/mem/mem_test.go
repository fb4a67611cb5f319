package mem_test

import (
	"crypto/rand"
	"testing"

	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/conformance"
)

// TestConformance runs the shared suite on mem as declared by default and
// in degraded modes, which also tests the portable layer's fallbacks.
func TestConformance(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name, params string
		maxBytes     int
	}{
		{"native", "", 0},
		{"limited", "?max_message_bytes=4096", 4096},
		{"unsupported", "?unsupported=delayed-requeue,delayed-push,lease-renewal,dead-letter,priority,peek,exact-count,dedup,in-place-update", 0},
		{"emulated", "?emulated=delayed-requeue,delayed-push,lease-renewal,dead-letter,priority,peek,exact-count,dedup&unsupported=in-place-update", 0},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			conformance.Run(t, conformance.Harness{
				Name:            "mem " + m.name,
				NewQueueURL:     func(testing.TB) string { return "mem://conformance-" + rand.Text() + m.params },
				MaxMessageBytes: m.maxBytes,
				PushRaw:         conformance.RawPusher(mem.URLOpener{}),
			})
		})
	}
}
