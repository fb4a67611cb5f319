package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// The bounds of the result tracker.
const (
	// peekPerSample is how many queued tasks each sample looks at for IDs.
	peekPerSample = 100
	// resultsPerSample is how many tracked tasks each sample asks the
	// result records about.
	resultsPerSample = 50
	// maxTracked bounds the task IDs waiting for their result.
	maxTracked = 2000
	// maxEnded bounds the ended tasks kept for the runtime distribution.
	maxEnded = 5000
)

// endedTask is what a result record told about one task.
type endedTask struct {
	id      string
	state   driver.ResultState
	runtime time.Duration // zero when the record does not bound the attempt
}

// resultTracker follows tasks the dashboard saw queued until their result
// records say how they ended, for runtimes and outcomes that include the
// tasks that succeeded. The queue's result records cannot be listed, so
// the tracker learns task IDs by peeking at the queue each sample: it sees
// a sample of the tasks (those near the head of the queue when it looks),
// not all of them.
type resultTracker struct {
	mu      sync.Mutex
	pending []string // oldest first
	known   map[string]bool
	// queued is when each pending task was queued, where the backend
	// says: a record written before is an earlier run's.
	queued   map[string]time.Time
	ended    []endedTask // oldest first, at most maxEnded
	disabled string      // why results are not followed; "" while they are
	probed   bool        // whether the backend was asked if it keeps results (sampler only)
}

func newResultTracker() *resultTracker {
	return &resultTracker{known: map[string]bool{}, queued: map[string]time.Time{}}
}

// off stops the tracker for good, saying why.
func (r *resultTracker) off(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.disabled = why
	r.pending, r.known, r.queued = nil, map[string]bool{}, map[string]time.Time{}
}

// track adds the peeked tasks not seen before, dropping the oldest when
// full.
func (r *resultTracker) track(peeked []*jobq.PeekedTask) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range peeked {
		if p.Task == nil || p.Task.ID == "" || r.known[p.Task.ID] {
			continue
		}
		id := p.Task.ID
		if len(r.pending) >= maxTracked {
			delete(r.known, r.pending[0])
			delete(r.queued, r.pending[0])
			r.pending = r.pending[1:]
		}
		r.pending = append(r.pending, id)
		r.known[id] = true
		if !p.EnqueuedAt.IsZero() {
			r.queued[id] = p.EnqueuedAt
		}
	}
}

// earlierRun reports whether a record written at recorded belongs to a
// run of task id before the one the tracker saw queued (the task was
// pushed again with the same ID). The record carries its worker's clock
// and the queue time the engine's: a record less than runClockSlack
// older than the push is taken as this run's, so that a worker whose clock
// lags a little does not leave its task followed for good.
func (r *resultTracker) earlierRun(id string, recorded time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q, ok := r.queued[id]
	return ok && !recorded.IsZero() && recorded.Before(q.Add(-runClockSlack))
}

// runClockSlack is how far earlierRun lets a worker's clock lag the
// engine's.
const runClockSlack = time.Second

// next returns up to n of the oldest tracked IDs, moving them to the back.
func (r *resultTracker) next(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	n = min(n, len(r.pending))
	out := append([]string(nil), r.pending[:n]...)
	r.pending = append(r.pending[n:], out...)
	return out
}

// end records a task's outcome and stops tracking it. The ID stays known,
// so that a task seen again (requeued from the dead letters) is not
// counted twice while the dashboard runs.
func (r *resultTracker) end(id string, e endedTask) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.pending {
		if p == id {
			r.pending = append(r.pending[:i], r.pending[i+1:]...)
			break
		}
	}
	delete(r.queued, id)
	if len(r.ended) >= maxEnded {
		r.ended = r.ended[1:]
	}
	r.ended = append(r.ended, e)
}

// snapshot returns the ended tasks, how many are still followed, and why
// results are not followed ("" when they are).
func (r *resultTracker) snapshot() ([]endedTask, int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]endedTask(nil), r.ended...), len(r.pending), r.disabled
}

// followResults peeks at the queue for task IDs and reads the result
// records of the oldest tracked ones. A backend that keeps no result
// records (or cannot peek) turns the tracker off, with the reason.
func (s *Server) followResults(ctx context.Context) {
	t := s.results
	if _, _, off := t.snapshot(); off != "" {
		return
	}
	if !t.probed {
		// An ID no task has: NotFound where results are kept. Asking first
		// spares a backend without them the peeks.
		_, err := s.q.Result(ctx, "jobq-dashboard-probe")
		switch code := errcode.Of(err); {
		case code == errcode.Unimplemented:
			t.off("this backend keeps no result records")
			return
		case err != nil && code != errcode.NotFound:
			return // asked again at the next sample
		}
		t.probed = true
	}
	peeked, err := s.q.Admin().Peek(ctx, peekPerSample)
	if err != nil {
		if errcode.Of(err) == errcode.Unimplemented {
			t.off("this backend cannot peek at queued tasks")
		} else if ctx.Err() == nil {
			s.log.Warn("dashboard: could not peek at the queue", "error", redact.String(err.Error()))
		}
		return
	}
	t.track(peeked)
	for _, id := range t.next(resultsPerSample) {
		res, err := s.q.Result(ctx, id)
		switch code := errcode.Of(err); {
		case err == nil:
		case code == errcode.NotFound:
			continue // not ended yet
		case code == errcode.Unimplemented:
			t.off("this backend keeps no result records")
			return
		default:
			if ctx.Err() == nil {
				s.log.Warn("dashboard: could not read a result record", "task", id, "error", redact.String(err.Error()))
			}
			return
		}
		if !res.State.Final() || t.earlierRun(id, res.Recorded) {
			continue
		}
		e := endedTask{id: id, state: res.State}
		if !res.Started.IsZero() && res.Finished.After(res.Started) {
			e.runtime = res.Finished.Sub(res.Started)
		}
		t.end(id, e)
	}
}
