package worker

import (
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
	mu    sync.Mutex
	limit int
	n     int
	// oldest and newest end the list of pending tasks, oldest first.
	oldest, newest *settling
}

// settling is one finished task's place in the backlog. It lives in the
// task's own state (taskRun), so that the backlog allocates nothing.
type settling struct {
	finished   time.Time
	prev, next *settling
}

func newBacklog(limit int) *backlog { return &backlog{limit: limit} }

// admit reports whether a task that finished now may give its token back
// before its settlement; when it does, s is in the backlog, and done(s)
// must be called once the settlement ends.
func (b *backlog) admit(s *settling, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n >= b.limit {
		return false
	}
	if b.oldest != nil && now.Sub(b.oldest.finished) >= settleWindow {
		return false
	}
	*s = settling{finished: now, prev: b.newest}
	if b.newest != nil {
		b.newest.next = s
	} else {
		b.oldest = s
	}
	b.newest = s
	b.n++
	return true
}

// done removes a settled task from the backlog.
func (b *backlog) done(s *settling) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		b.oldest = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	} else {
		b.newest = s.prev
	}
	s.prev, s.next = nil, nil
	b.n--
}
