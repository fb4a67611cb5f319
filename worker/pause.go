package worker

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// pauseWatch keeps this worker's view of the queue's pauses
// (Admin.Pause), reread at most every driver.PauseRefresh in the
// background, so that a queue that is never paused costs one policy read
// per refresh period, not a round trip per task.
type pauseWatch struct {
	q   *jobq.Queue
	log *slog.Logger
	off bool // the backend keeps no pauses

	// view is the last read: every task's check (stops) reads it without
	// the mutex, which the handlers' checks otherwise contended for. nil
	// until the first read ends.
	view atomic.Pointer[pauseView]

	mu      sync.Mutex
	reading chan struct{} // closed when the read under way ends; nil when none is
	told    bool          // the whole-queue pause was logged
}

// pauseView is one read of the pauses, and when it ended.
type pauseView struct {
	loaded time.Time
	pauses []driver.PauseState
}

func newPauseWatch(q *jobq.Queue, log *slog.Logger) *pauseWatch {
	off := q == nil || q.Capabilities().Level(driver.Pause) == driver.Unsupported
	return &pauseWatch{q: q, log: log, off: off}
}

// current returns the pauses as last read, starting a reread in the
// background once they are half a refresh period old, so that a busy
// worker keeps them fresh without waiting for a read. The first call reads
// them before it returns, so that a worker started on a paused queue takes
// nothing.
func (p *pauseWatch) current() []driver.PauseState {
	if p.off {
		return nil
	}
	v := p.view.Load()
	if v == nil {
		return p.fresh()
	}
	if time.Since(v.loaded) >= driver.PauseRefresh/2 {
		p.mu.Lock()
		if p.reading == nil {
			go p.load(p.startRead())
		}
		p.mu.Unlock()
	}
	return v.pauses
}

// fresh returns pauses no older than driver.PauseRefresh, waiting for a
// read when the last one is older. A receive that waited long (an idle
// worker's wait grows to MaxPoll) may bring tasks pushed after a pause the
// background reread has not seen; a busy worker's view is kept fresh by
// current, so it seldom waits here. Concurrent callers share one read.
func (p *pauseWatch) fresh() []driver.PauseState {
	if p.off {
		return nil
	}
	if v := p.view.Load(); v != nil && time.Since(v.loaded) < driver.PauseRefresh {
		return v.pauses
	}
	p.mu.Lock()
	if v := p.view.Load(); v != nil && time.Since(v.loaded) < driver.PauseRefresh {
		p.mu.Unlock()
		return v.pauses // a read ended meanwhile
	}
	done := p.reading
	if done == nil {
		done = p.startRead()
		p.mu.Unlock()
		p.load(done)
	} else {
		p.mu.Unlock()
		<-done
	}
	return p.view.Load().pauses
}

// startRead marks a read as under way; p.mu is held.
func (p *pauseWatch) startRead() chan struct{} {
	p.reading = make(chan struct{})
	return p.reading
}

// load reads the pauses, then closes done. A failed read keeps the pauses
// last read (none at first), as read now: the next read is a refresh
// period away.
func (p *pauseWatch) load(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), driver.PauseRefresh)
	pols, err := p.q.Admin().Policies(ctx)
	cancel()
	next := &pauseView{loaded: time.Now()}
	if err != nil {
		p.log.Debug("could not read the queue's pauses; keeping the last known ones", "error", err)
		if v := p.view.Load(); v != nil {
			next.pauses = v.pauses
		}
	} else {
		next.pauses = driver.Pauses(pols)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.view.Store(next)
	p.reading = nil
	close(done)
}

// whole returns the whole-queue pause, if there is one.
func (p *pauseWatch) whole() (driver.PauseState, bool) {
	for _, s := range p.current() {
		if s.Whole() {
			return s, true
		}
	}
	return driver.PauseState{}, false
}

// stops returns the pause that stops t, if there is one, from pauses no
// older than driver.PauseRefresh.
func (p *pauseWatch) stops(t *jobq.Task) (driver.PauseState, bool) {
	for _, s := range p.fresh() {
		if s.Stops(t.Kind, t.ConcurrencyKey, t.RateLimitKey) {
			return s, true
		}
	}
	return driver.PauseState{}, false
}

// pausePoll is how often a paused worker looks whether it was resumed.
const pausePoll = 250 * time.Millisecond

// wait blocks while the whole queue is paused. It returns true when the
// worker drains, or quit is closed, meanwhile.
func (p *pauseWatch) wait(drain, quit <-chan struct{}) bool {
	s, paused := p.whole()
	if !paused {
		return false
	}
	p.note(s, true)
	t := time.NewTicker(pausePoll)
	defer t.Stop()
	for paused {
		select {
		case <-t.C:
		case <-drain:
			return true
		case <-quit:
			return true
		}
		_, paused = p.whole()
	}
	p.note(s, false)
	return false
}

// note logs, once per pause, that the worker stopped or started again.
func (p *pauseWatch) note(s driver.PauseState, paused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if paused == p.told {
		return
	}
	p.told = paused
	if paused {
		p.log.Info("the queue is paused: taking no new tasks until it is resumed", "since", s.Since.Format(time.RFC3339), "by", s.By)
	} else {
		p.log.Info("the queue was resumed: taking tasks again")
	}
}

// pausedDelay is how long a worker puts back a task that a pause stops:
// a refresh period for a whole-queue pause (the worker takes nothing
// meanwhile), longer for a pause of one kind or key, whose tasks the
// worker meets among the others it claims.
func pausedDelay(s driver.PauseState) time.Duration {
	if s.Whole() {
		return driver.PauseRefresh
	}
	return 5 * driver.PauseRefresh
}
