package jobq_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// TestGroupWork: a group's work done, lost and saved by checkpoints add
// up its tasks' attempts (a preempted one with a checkpoint, a failed
// one, the successes), and leave out the tasks of other groups.
func TestGroupWork(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "w.db")+"?queue=work")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for i, g := range []string{"sweep", "sweep", "other"} {
		if _, err := q.Push(ctx, &jobq.Task{Command: "step " + string(rune('a'+i)), Group: g, NumRetries: 2,
			RetryBackoff: jobq.Backoff{Base: time.Millisecond, Cap: time.Millisecond}}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now().Add(-time.Hour)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	recv := func() *jobq.Envelope {
		t.Helper()
		e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	// Every task: a preempted attempt of 100 s that saved 60 s and lost
	// 40 s, then (task b) a failure of 10 s, then a success of 30 s.
	for done := 0; done < 3; {
		e := recv()
		switch len(e.Attempts()) {
		case 0:
			hooks.RecordAttempt(e, jobq.Attempt{Outcome: jobq.OutcomePreempted, Start: at(0), End: at(100), Lost: 40 * time.Second, Saved: 60 * time.Second})
			if err := e.Requeue(ctx, 0); err != nil {
				t.Fatal(err)
			}
			continue
		case 1:
			if e.Task.Command == "step b" {
				hooks.RecordAttempt(e, jobq.Attempt{Outcome: jobq.OutcomeFailure, Start: at(200), End: at(210)})
				if _, err := e.Fail(ctx, errors.New("exit 1"), ""); err != nil {
					t.Fatal(err)
				}
				continue
			}
		}
		hooks.RecordAttempt(e, jobq.Attempt{Outcome: jobq.OutcomeSuccess, Start: at(300), End: at(330)})
		if err := e.Complete(ctx); err != nil {
			t.Fatal(err)
		}
		done++
	}
	ws, err := q.Admin().GroupWork(ctx, "sweep", "other")
	if err != nil {
		t.Fatal(err)
	}
	want := []jobq.GroupWork{
		{Group: "sweep", Records: 2, Done: 2*100*time.Second + 10*time.Second + 2*30*time.Second, Lost: 80 * time.Second, Saved: 120 * time.Second, Preemptions: 2},
		{Group: "other", Records: 1, Done: 130 * time.Second, Lost: 40 * time.Second, Saved: 60 * time.Second, Preemptions: 1},
	}
	for i, w := range ws {
		if *w != want[i] {
			t.Errorf("GroupWork[%d] = %+v; want %+v", i, *w, want[i])
		}
	}
	if _, err := q.Admin().GroupWork(ctx, "nope"); errcode.Of(err) != errcode.NotFound {
		t.Errorf("GroupWork of an unknown group: %v; want NotFound", err)
	}
}
