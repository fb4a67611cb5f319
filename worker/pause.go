package worker

import (
	"context"
	"log/slog"
	"sync"
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

	mu         sync.Mutex
	loaded     time.Time
	refreshing bool
	pauses     []driver.PauseState
	told       bool // the whole-queue pause was logged
}

func newPauseWatch(q *jobq.Queue, log *slog.Logger) *pauseWatch {
	off := q == nil || q.Capabilities().Level(driver.Pause) == driver.Unsupported
	return &pauseWatch{q: q, log: log, off: off}
}

// current returns the pauses as last read, starting a reread when they are
// older than driver.PauseRefresh. The first call reads them before it
// returns, so that a worker started on a paused queue takes nothing.
func (p *pauseWatch) current() []driver.PauseState {
	if p.off {
		return nil
	}
	p.mu.Lock()
	if p.loaded.IsZero() && !p.refreshing {
		p.refreshing = true
		p.mu.Unlock()
		p.load()
		p.mu.Lock()
	}
	defer p.mu.Unlock()
	if time.Since(p.loaded) >= driver.PauseRefresh && !p.refreshing {
		p.refreshing = true
		go p.load()
	}
	return p.pauses
}

func (p *pauseWatch) load() {
	ctx, cancel := context.WithTimeout(context.Background(), driver.PauseRefresh)
	pols, err := p.q.Admin().Policies(ctx)
	cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refreshing = false
	p.loaded = time.Now()
	if err != nil {
		p.log.Debug("could not read the queue's pauses; keeping the last known ones", "error", err)
		return
	}
	p.pauses = driver.Pauses(pols)
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

// stops returns the pause that stops t, if there is one.
func (p *pauseWatch) stops(t *jobq.Task) (driver.PauseState, bool) {
	for _, s := range p.current() {
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
