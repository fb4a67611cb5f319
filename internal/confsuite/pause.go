package confsuite

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/worker"
)

// checkPause: a running worker stops taking tasks within the declared
// delay of a whole-queue Pause made through another handle, pushes still
// go in, Stats-side listings show the pause, and after Resume every task
// pushed meanwhile runs exactly once. Unsupported: Pause and Resume fail
// with Unimplemented. Emulated: the same, allowing the worker a longer
// delay before it sees the pause.
func checkPause(c *C) {
	q := c.open()
	if level(q, driver.Pause) == driver.Unsupported {
		c.pauseUnsupported(q)
	}
	settle := 2*driver.PauseRefresh + time.Second
	if level(q, driver.Pause) == driver.Emulated {
		settle = 5*driver.PauseRefresh + 5*time.Second
	}
	admin := c.openQueue(q.ref) // pause from another handle, as an operator would
	runs := c.startCountingWorker(q)
	c.pauseWhole(admin, q)
	time.Sleep(settle)

	const n = 6
	ids := make([]string, n)
	for i := range ids {
		r, err := q.Push(c.ctx(), task(fmt.Sprintf("paused %d", i)))
		if err != nil {
			c.Fatalf("Push %d on a paused queue: %v", i, err)
		}
		ids[i] = r.ID
	}
	time.Sleep(settle)
	if early := runs.distinct(); early != 0 {
		c.Errorf("%d of %d tasks pushed %v after Pause ran while the queue was paused", early, n, settle)
	}

	had, err := admin.Admin().Resume(c.ctx(), jobq.PauseOptions{})
	if err != nil || !had {
		c.Fatalf("Resume = %v, %v; want true, nil", had, err)
	}
	runs.waitFor(n, time.Now().Add(settle+30*time.Second))
	runs.expectRunning(c)
	for _, id := range ids {
		if got := runs.of(id); got != 1 {
			c.Errorf("task %s ran %d times after Resume, want once", id, got)
		}
	}
	if had, err := admin.Admin().Resume(c.ctx(), jobq.PauseOptions{}); err != nil || had {
		c.Errorf("a second Resume = %v, %v; want false, nil", had, err)
	}
	c.pauseScopes(admin)
}

// pauseUnsupported: where pause is unsupported, Pause and Resume are
// Unimplemented; the check then skips.
func (c *C) pauseUnsupported(q *handle) {
	_, err := q.Admin().Pause(c.ctx(), jobq.PauseOptions{})
	c.expectCode(err, errcode.Unimplemented, "Pause on a backend without pause")
	_, err = q.Admin().Resume(c.ctx(), jobq.PauseOptions{})
	c.expectCode(err, errcode.Unimplemented, "Resume on a backend without pause")
	c.skipNeeds("feature pause", "pause is unsupported: "+q.Capabilities().Features[driver.Pause].Fallback)
}

// pauseWhole pauses the whole queue through admin and checks what Pause
// returned and what q's policies then say.
func (c *C) pauseWhole(admin, q *handle) {
	s, err := admin.Admin().Pause(c.ctx(), jobq.PauseOptions{By: "conformance@check"})
	if err != nil {
		c.Fatalf("Pause: %v", err)
	}
	if !s.Whole() || s.By != "conformance@check" || time.Since(s.Since) > time.Minute {
		c.Errorf("Pause returned %+v, want the whole queue, by conformance@check, since now", s)
	}
	pols, err := q.Admin().Policies(c.ctx())
	if err != nil {
		c.Fatalf("Policies: %v", err)
	}
	if ps := driver.Pauses(pols); len(ps) != 1 || ps[0].By != s.By || !ps[0].Since.Equal(s.Since) || !ps[0].Whole() {
		c.Errorf("after Pause the queue's pauses are %+v, want one: %+v", ps, s)
	}
}

// runCounter counts the runs of each task by a worker the check started.
type runCounter struct {
	mu   sync.Mutex
	ran  map[string]int
	done chan error
}

// startCountingWorker runs a worker on q until the check ends, counting
// the runs of each task.
func (c *C) startCountingWorker(q *handle) *runCounter {
	// MaxPoll: the worker reads pauses before each receive, and an idle
	// receive that waits long may bring tasks pushed after a pause.
	r := &runCounter{ran: map[string]int{}, done: make(chan error, 1)}
	h := worker.HandlerFunc(func(_ context.Context, j *worker.Job) error {
		r.mu.Lock()
		r.ran[j.Task.ID]++
		r.mu.Unlock()
		return nil
	})
	w := worker.New(q.Queue, h, worker.Options{Concurrency: 2, Wait: true, Poll: time.Second, MaxPoll: time.Second, Visibility: c.vis(), Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(c.ctx())
	go func() { r.done <- w.Run(ctx) }()
	c.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// distinct is how many tasks ran.
func (r *runCounter) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ran)
}

// of is how often task id ran.
func (r *runCounter) of(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran[id]
}

// waitFor waits until n tasks ran, or deadline.
func (r *runCounter) waitFor(n int, deadline time.Time) {
	for r.distinct() < n && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
}

// expectRunning: the worker has not ended.
func (r *runCounter) expectRunning(c *C) {
	select {
	case err := <-r.done:
		c.Errorf("the worker ended while the check ran: %v", err)
		r.done <- err
	default:
	}
}

// pauseScopes: pauses of a kind, a key and both are stored apart, with
// keys that policy syntax reserves characters of, and resumed one by one.
func (c *C) pauseScopes(q *handle) {
	c.Helper()
	scopes := []jobq.PauseOptions{{Kind: "render"}, {Key: "gpu=a/b ü"}, {Kind: "render", Key: "gpu=a/b ü"}}
	for _, o := range scopes {
		if _, err := q.Admin().Pause(c.ctx(), o); err != nil {
			c.Fatalf("Pause(%+v): %v", o, err)
		}
	}
	pols, err := q.Admin().Policies(c.ctx())
	if err != nil {
		c.Fatalf("Policies: %v", err)
	}
	ps := driver.Pauses(pols)
	for _, o := range scopes {
		n := 0
		for _, s := range ps {
			if s.TaskKind == o.Kind && s.Key == o.Key {
				n++
			}
		}
		if n != 1 {
			c.Errorf("pause of kind %q key %q is listed %d times among %+v, want once", o.Kind, o.Key, n, ps)
		}
	}
	for _, o := range scopes {
		if had, err := q.Admin().Resume(c.ctx(), o); err != nil || !had {
			c.Errorf("Resume(%+v) = %v, %v; want true, nil", o, had, err)
		}
	}
	if pols, err := q.Admin().Policies(c.ctx()); err != nil || len(driver.Pauses(pols)) != 0 {
		c.Errorf("after resuming every scope the policies are %v, %v; want no pause", pols, err)
	}
}
