package worker

import (
	"container/list"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
)

// A task whose handler has returned gives its claim token back before its
// settlement ends, so that the next claim overlaps the settlement's round
// trip. Every such task is finished but not yet acknowledged: if the worker
// dies now, it runs again elsewhere. The backlog of them is bounded two
// ways, so that a killed worker re-runs at most what it finished in the
// last moment:
//
//   - by time: while the oldest of them has waited longer than
//     settleWindow, settlement is falling behind, and finished tasks keep
//     their tokens until settled, which slows claims to the pace of
//     settlement instead of piling finished tasks up;
//   - by count: at most unsettledLimit of them at once.

// settleWindow is how long a finished task may wait for its settlement
// while its token is already back in use. A few round trips to a nearby
// engine: settlement that keeps up stays well within it.
const settleWindow = 20 * time.Millisecond

// maxUnsettled is the count bound for backends that settle many messages
// in one request: the settler's largest batch, so that settlement can send
// full batches.
const maxUnsettled = 512

// unsettledLimit sizes the count bound by the backend's batch limits: a
// backend that receives at most N messages per request (Azure Storage
// Queue: 32) settles them one request each, and more than one batch of
// settlements in flight only adds to what a crash re-runs.
func unsettledLimit(c driver.Capabilities) int {
	if n := c.MaxReceiveBatch; n > 0 && n < maxUnsettled {
		return n
	}
	return maxUnsettled
}

// backlog tracks the finished tasks that gave their token back early.
type backlog struct {
	mu      sync.Mutex
	limit   int
	pending list.List // of time.Time: when each finished, oldest first
}

func newBacklog(limit int) *backlog { return &backlog{limit: limit} }

// admit reports whether a task that finished now may give its token back
// before its settlement; when it does, done must be called with the
// returned element once the settlement ends.
func (b *backlog) admit(now time.Time) (*list.Element, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending.Len() >= b.limit {
		return nil, false
	}
	if f := b.pending.Front(); f != nil && now.Sub(f.Value.(time.Time)) >= settleWindow {
		return nil, false
	}
	return b.pending.PushBack(now), true
}

// done removes a settled task from the backlog.
func (b *backlog) done(e *list.Element) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending.Remove(e)
}
