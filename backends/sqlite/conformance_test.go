package sqlite_test

import (
	"crypto/rand"
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/conformance"
)

// TestConformance runs the shared suite on sqlite: with the default limits,
// and with max_message_bytes lowered (which the size-limit checks use).
// Every queue of a mode lives in one file, as queues in production share
// one, so the checks also prove that queues in a file stay apart.
func TestConformance(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name, params string
		maxBytes     int
	}{
		{"default", "", 0},
		{"limited", "&max_message_bytes=4096", 4096},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "conformance.db")
			conformance.Run(t, conformance.Harness{
				Name: "sqlite " + m.name,
				NewQueueURL: func(testing.TB) string {
					return "sqlite://" + file + "?queue=" + rand.Text() + m.params
				},
				MaxMessageBytes: m.maxBytes,
				PushRaw:         conformance.RawPusher(sqlite.URLOpener{}),
			})
		})
	}
}
