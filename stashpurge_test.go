package jobq_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestPurgeKeepsStashOfTaskPushedAgain: a stashed task that was
// dead-lettered and then pushed again (same content, so the same ID and
// the same stash object) still runs after the dead letters are purged:
// the purge leaves the object that the queued task refers to. Purging one
// of two dead letters of the same task by message ID likewise leaves the
// other one requeueable. Redis never stashes (no message limit).
func TestPurgeKeepsStashOfTaskPushedAgain(t *testing.T) {
	t.Parallel()
	purgeAll := func(t *testing.T, q *jobq.Queue) {
		if _, err := q.Admin().PurgeDeadLetters(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		// twin makes a second message of the task after the first was
		// dead-lettered; purge then purges dead letters.
		twin, purge func(t *testing.T, q *jobq.Queue)
		requeue     bool // a dead letter is left, to requeue
	}{
		{"pushed again, all purged", pushBig, purgeAll, false},
		{"pushed again, purged by filter", pushBig, func(t *testing.T, q *jobq.Queue) {
			if _, err := q.Admin().PurgeWhere(t.Context(), jobq.Filter{All: true}); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"two dead letters, one purged", func(t *testing.T, q *jobq.Queue) {
			pushBig(t, q)
			deadLetterNext(t, q)
		}, func(t *testing.T, q *jobq.Queue) {
			dls, err := q.Admin().DeadLetters(t.Context(), 10)
			if err != nil || len(dls) != 2 {
				t.Fatalf("dead letters: %d, %v; want 2", len(dls), err)
			}
			if _, err := q.Admin().PurgeDeadLetters(t.Context(), dls[0].MessageID); err != nil {
				t.Fatal(err)
			}
		}, true},
	}
	for i, tc := range tests {
		for engine, u := range engines.URLs(t, fmt.Sprintf("purgetwin-%d", i)) {
			if engine == "redis" {
				continue
			}
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "stash")
				q := engines.Open(t, u+"&max_message_bytes=65536&stash=file://"+filepath.ToSlash(dir))
				pushBig(t, q)
				deadLetterNext(t, q)
				tc.twin(t, q)
				tc.purge(t, q)
				if tc.requeue {
					if n, err := q.Admin().RequeueDeadLetters(t.Context()); err != nil || n != 1 {
						t.Fatalf("RequeueDeadLetters = %d, %v; want the dead letter left", n, err)
					}
				}
				e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute})
				if err != nil {
					dls, _ := q.Admin().DeadLetters(t.Context(), 10)
					for _, d := range dls {
						t.Logf("dead letter: %s", d.Reason)
					}
					t.Fatalf("Receive after the purge: %v; want the task pushed again", err)
				}
				if err := e.Complete(t.Context()); err != nil {
					t.Fatal(err)
				}
				if left, _ := os.ReadDir(dir); len(left) != 0 {
					t.Errorf("stash objects left after the task completed: %d", len(left))
				}
			})
		}
	}
}

// pushBig pushes a task too large for a 64 KiB message.
func pushBig(t *testing.T, q *jobq.Queue) {
	t.Helper()
	if _, err := q.Push(t.Context(), bigTask(100_000)); err != nil {
		t.Fatal(err)
	}
}

// deadLetterNext receives the next task and dead-letters it.
func deadLetterNext(t *testing.T, q *jobq.Queue) {
	t.Helper()
	e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if e.Task.Stash != nil || len(e.Task.Command) < 100_000 {
		t.Fatal(errors.New("the received task is not the whole stashed task"))
	}
	if err := e.DeadLetter(t.Context(), "hc test", ""); err != nil {
		t.Fatal(err)
	}
}
