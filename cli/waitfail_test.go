package cli_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/cli"

	_ "modernc.org/sqlite"
)

// TestWaitThatFailsSaysHowToResume: a wait that fails (here the records
// table is dropped under it) before any task ended says that the tasks are
// not affected and gives the command that waits for them again. It gave
// the hint only once some task had ended, so push --wait's tasks, whose
// IDs the user never saw, could not be waited for again.
func TestWaitThatFailsSaysHowToResume(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "q.db")
	q := "sqlite://" + path + "?queue=waitfail"
	code, out, errOut := run(t, q, "push", "--print-ids", "-c", "echo never run")
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	id := strings.TrimSpace(out)
	type ran struct {
		code        int
		out, errOut string
	}
	done := make(chan ran, 1)
	go func() {
		code, out, errOut := run(t, q, "wait", id)
		done <- ran{code, out, errOut}
	}()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Drop the table until the wait fails: the wait's open makes it again
	// if it comes after a drop.
	var r ran
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case r = <-done:
			break wait
		case <-deadline:
			t.Fatal("wait did not fail with its records table dropped")
		case <-tick.C:
			_, _ = db.Exec(`DROP TABLE IF EXISTS jobq_results`)
		}
	}
	want := "1 of 1 task has not ended (stopping the wait does not stop them); resume with: jobq '" + q + "' wait " + id
	if r.code != cli.ExitFailure || !strings.Contains(r.errOut, want) {
		t.Fatalf("wait: exit %d, stderr %q; want exit %d and %q", r.code, r.errOut, cli.ExitFailure, want)
	}
}
