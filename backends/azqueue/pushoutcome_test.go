package azqueue_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/faultproxy"
)

// copiesByID drains the queue at rawURL directly (no proxy) and returns
// how many messages it held per task ID.
func copiesByID(t *testing.T, rawURL string) map[string]int {
	t.Helper()
	q, err := jobq.OpenWithOptions(t.Context(), rawURL, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	copies := map[string]int{}
	for {
		envs, err := q.ReceiveBatch(t.Context(), 32, jobq.ReceiveOptions{Visibility: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if len(envs) == 0 {
			return copies
		}
		for _, e := range envs {
			copies[e.Task.ID]++
		}
	}
}

// TestPushOutcomeThroughResets pushes through a proxy that resets the
// connection after forwarding a share of the Put Message POSTs: Azurite
// stores each of them, the client never hears so, and the SDK and the
// portable layer send the message again. Push must never call a task "not
// stored" here (every request it sent was applied), every task it
// reported stored must be in the queue, and every task the queue holds
// more than once must be one that push reported Resent or of unknown
// outcome (MaybeApplied): the queue's messages, counted afterwards, are
// what push said may be there.
func TestPushOutcomeThroughResets(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		rate        float64 // share of POSTs reset after forwarding
		params      string  // of the queue URL: the SDK's retries
		tasks       int
		wantUnknown bool // every task's outcome is unknown
	}{
		{"every POST reset", 1, "retries=2", 3, true},
		// The SDK's retries store the copies.
		{"a fifth of POSTs reset", 0.2, "", 80, false},
		// The portable layer's retries too, and some tasks end unknown.
		{"a fifth of POSTs reset, few SDK retries", 0.2, "retries=1", 80, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := startProxy(t, faultSeed(t))
			raw := newQueueURL(t)
			name := queueName(raw)
			q, err := jobq.OpenWithOptions(t.Context(), viaURL(t, p, raw, c.params+"&retry_delay=10ms"),
				jobq.Options{Logger: slog.New(slog.DiscardHandler), PushRetry: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { q.Close() })
			p.Add(faultproxy.Rule{Match: onMessages(http.MethodPost, name), Fault: faultproxy.ResetAfter, Rate: c.rate})
			tasks := make([]*jobq.Task, c.tasks)
			for i := range tasks {
				tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d", i)}
			}
			res, err := q.PushBatch(t.Context(), tasks, jobq.PushOptions{})
			p.Clear()
			var be *jobq.BatchError
			if err != nil && !errors.As(err, &be) {
				t.Fatalf("push: %v, want nil or a *BatchError", err)
			}
			// What push said: stored once, stored perhaps twice, unknown.
			unsure, stored := map[string]bool{}, map[string]bool{}
			for _, r := range res {
				unsure[r.ID] = r.Resent
				stored[r.ID] = true
			}
			unknown := 0
			if be != nil {
				for i, e := range be.Errs[len(res):] {
					var je *jobq.Error
					if !errors.As(e, &je) || !je.MaybeApplied {
						t.Errorf("task %d: %v; want an error that says it may have been stored", len(res)+i, e)
						continue
					}
					unsure[tasks[len(res)+i].ID] = true
					unknown++
				}
			}
			if c.wantUnknown && unknown != c.tasks {
				t.Errorf("%d of %d tasks of unknown outcome, want all", unknown, c.tasks)
			}
			// What the queue holds.
			copies := copiesByID(t, raw)
			messages, twice, resent := 0, 0, 0
			for _, tk := range tasks {
				n := copies[tk.ID]
				messages += n
				if n == 0 && stored[tk.ID] {
					t.Errorf("task %s is not in the queue, and push reported it stored", tk.ID)
				}
				if n > 1 {
					twice++
					if !unsure[tk.ID] {
						t.Errorf("task %s is queued %d times, and push reported it stored once", tk.ID, n)
					}
				}
			}
			for _, r := range res {
				if r.Resent {
					resent++
				}
			}
			t.Logf("%d tasks: %d stored (%d resent), %d unknown; the queue holds %d messages, %d tasks more than once; %d resets",
				c.tasks, len(res), resent, unknown, messages, twice, p.Injected(faultproxy.ResetAfter))
		})
	}
}
