package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/cli"
)

// TestWaitCancelNoteByCapability: wait names a pending cancel on standard
// error, and says that a task not pushed yet ends only once it is pushed
// only where the backend cannot remove tasks by ID (cancel emulated:
// Storage Queue on Azurite), not on SQLite, where cancel is native.
func TestWaitCancelNoteByCapability(t *testing.T) {
	t.Parallel()
	const pending = "1 task has a cancel pending and has not ended: each ends when the worker that holds it, or next receives it, stops it"
	const notPushed = "one not pushed yet ends only once it is pushed"
	tests := []struct {
		name string
		// queue returns the queue's arguments (URL and flags) and the ID
		// of a task with a cancel pending on it.
		queue         func(t *testing.T) ([]string, string)
		wantNotPushed bool
	}{
		{"sqlite, a running task", func(t *testing.T) ([]string, string) {
			q := sqliteQueue(t)
			if code, _, errOut := run(t, q, "-q", "push", "-c", "sleep 60"); code != 0 {
				t.Fatalf("push: exit %d: %s", code, errOut)
			}
			lib, err := jobq.Open(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lib.Close() })
			// Held in flight, as by a worker running it: the cancel is
			// requested, not done at once.
			e, err := lib.Receive(t.Context(), jobq.ReceiveOptions{Wait: 5 * time.Second})
			if err != nil || e == nil {
				t.Fatalf("receive: %v, %v", e, err)
			}
			return []string{q}, e.Task.ID
		}, false},
		{"azqueue, a task not pushed yet", func(t *testing.T) ([]string, string) {
			name, _ := azuriteQueue(t)
			connStr := azq.DevelopmentConnectionString + "BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"
			return []string{"azqueue://devstoreaccount1/" + name, "--conn-str", connStr}, "0123456789abcdef0123456789abcdef"
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, id := tt.queue(t)
			if code, out, errOut := run(t, append(q, "-q", "cancel", id)...); code != 0 || !strings.Contains(out, id+" requested") {
				t.Fatalf("cancel: exit %d, out %q, err %q; want %s requested", code, out, errOut, id)
			}
			code, _, errOut := run(t, append(q, "wait", "--timeout", "300ms", id)...)
			if code != cli.ExitFailure || !strings.Contains(errOut, pending) {
				t.Fatalf("wait: exit %d, err %q; want exit %d naming the pending cancel", code, errOut, cli.ExitFailure)
			}
			if got := strings.Contains(errOut, notPushed); got != tt.wantNotPushed {
				t.Errorf("wait: err %q; says a task not pushed yet ends once pushed: %v, want %v", errOut, got, tt.wantNotPushed)
			}
		})
	}
}
