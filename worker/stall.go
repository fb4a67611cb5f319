package worker

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// writeStall is the worker's state while the engine refuses writes (a
// full disk, an engine out of memory or unreachable): while any settlement
// is being retried the worker takes no new task, since it could not record
// its outcome either, and each refused settlement is retried with backoff
// until it succeeds, its lease is lost or expires, or the worker is killed.
// Receives refused for want of resources are part of the same episode.
// It logs once when the pause begins and once when it ends.
type writeStall struct {
	log *slog.Logger
	// retrying counts settlements being retried; read without the lock on
	// every settlement and every receive.
	retrying atomic.Int64
	// recvRefused is set while receives are refused (ResourceExhausted);
	// read without the lock on every receive.
	recvRefused atomic.Bool
	// ends counts the episodes ended, read without the lock as each
	// settlement and receive begins: a refusal of an attempt begun before
	// an episode ended is stale (the engine took a write since), so it
	// starts no episode, and the attempt is made again at once.
	ends atomic.Uint64

	mu    sync.Mutex
	since time.Time
	// tasks are those whose settlement is being retried, to name them
	// when a stop gives them up (Worker.abandon).
	tasks map[*jobq.Envelope]struct{}
	clear chan struct{} // closed when the last retried settlement ends
	// wrote is closed, and replaced, when a settlement succeeds: the
	// retried ones try again at once rather than at the end of their
	// backoff.
	wrote chan struct{}
}

func newWriteStall(log *slog.Logger) *writeStall {
	return &writeStall{log: log, wrote: make(chan struct{}), tasks: map[*jobq.Envelope]struct{}{}}
}

// refused reports whether a settlement failed because the engine cannot
// write now, which retrying later may cure. Drivers map a full disk
// (SQLite's SQLITE_FULL, Postgres's 53100, Redis's OOM and MISCONF) to
// ResourceExhausted, and an unreachable engine to Unavailable.
func refused(err error) bool {
	switch errcode.Of(err) {
	case errcode.ResourceExhausted, errcode.Unavailable, errcode.DeadlineExceeded:
		return true
	}
	return false
}

// settleRetryMin and settleRetryMax bound the backoff between attempts of
// a refused settlement, which doubles (with jitter) from one to the other.
const (
	settleRetryMin = 500 * time.Millisecond
	settleRetryMax = 30 * time.Second
)

// active reports whether writes are refused. Callers hold mu.
func (s *writeStall) active() bool { return s.retrying.Load() > 0 || s.recvRefused.Load() }

// pause logs the start of an episode. Callers hold mu.
func (s *writeStall) pause(err error) {
	s.since = time.Now()
	s.log.Warn("the engine refuses writes (disk full, out of memory or unreachable?): taking no new tasks; retrying until it accepts them",
		"error", err)
}

// resume logs the end of an episode; ok says whether the last refused
// write went through. Callers hold mu.
func (s *writeStall) resume(ok bool) {
	s.ends.Add(1)
	paused := time.Since(s.since).Round(time.Millisecond)
	if ok {
		s.log.Info("the engine accepts writes again: taking tasks again", "paused_for", paused)
	} else {
		s.log.Warn("gave up the refused settlements (their tasks will be delivered again when their leases expire)", "paused_for", paused)
	}
}

// epoch is read as an attempt begins, for enter and receiveRefused.
func (s *writeStall) epoch() uint64 { return s.ends.Load() }

// enter counts one more settlement, env's, being retried; the first
// pauses the worker. It does neither, and returns false, when the refused
// attempt began (at epoch seen) before an episode ended.
func (s *writeStall) enter(env *jobq.Envelope, err error, seen uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ends.Load() != seen {
		return false
	}
	s.tasks[env] = struct{}{}
	was := s.active()
	if s.retrying.Add(1) == 1 {
		s.clear = make(chan struct{})
	}
	if !was {
		s.pause(err)
	}
	return true
}

// leave counts env's retried settlement out; ok says whether it went
// through. The last one lets the worker take tasks again.
func (s *writeStall) leave(env *jobq.Envelope, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tasks, env)
	if s.retrying.Add(-1) > 0 {
		return
	}
	close(s.clear)
	if !s.active() {
		s.resume(ok)
	}
}

// pending returns the IDs of the tasks whose settlement is being retried,
// sorted.
func (s *writeStall) pending() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.tasks))
	for env := range s.tasks {
		ids = append(ids, env.Task.ID)
	}
	slices.Sort(ids)
	return ids
}

// receiveRefused notes a receive refused for want of resources. It
// returns false, noting nothing, when the receive began (at epoch seen)
// before an episode ended.
func (s *writeStall) receiveRefused(err error, seen uint64) bool {
	if s.recvRefused.Load() {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ends.Load() != seen {
		return false
	}
	was := s.active()
	s.recvRefused.Store(true)
	if !was {
		s.pause(err)
	}
	return true
}

// receiveAccepted notes a receive that went through.
func (s *writeStall) receiveAccepted() {
	if !s.recvRefused.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.recvRefused.Swap(false) {
		return
	}
	if !s.active() {
		s.resume(true)
	}
}

// succeeded notes a settlement that went through, which wakes those being
// retried.
func (s *writeStall) succeeded() {
	if s.retrying.Load() == 0 {
		return
	}
	s.mu.Lock()
	close(s.wrote)
	s.wrote = make(chan struct{})
	s.mu.Unlock()
}

// next returns the channel closed when a settlement next succeeds.
func (s *writeStall) next() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wrote
}

// wait blocks while settlements are being retried. It returns true when
// stop or quit is closed meanwhile.
func (s *writeStall) wait(stop, quit <-chan struct{}) bool {
	if s.retrying.Load() == 0 {
		return false
	}
	s.mu.Lock()
	ch := s.clear
	s.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	case <-stop:
		return true
	case <-quit:
		return true
	}
}

// settle runs one settlement of env (op, with its own timeout under the
// ctx it is given), and while the engine refuses it, pauses the worker and
// retries it with backoff. It gives up, returning the last error, when the
// error is of another kind (LockLost, say), when the lease has expired
// (another delivery will run the task: a duplicate, never a loss), when
// the worker is killed, or when its stop timeout passes (which also
// cancels the ctx of an attempt in flight). When an attempt went
// unanswered (MaybeApplied), the error it returns has MaybeApplied set
// too: that attempt may have settled the message, and a retry then finds
// the lease gone (LockLost) because it did.
func (w *Worker) settle(env *jobq.Envelope, log *slog.Logger, op func(ctx context.Context) error) (err error) {
	seen := w.stall.epoch()
	err = op(w.writeCtx)
	if err == nil {
		w.stall.succeeded()
		return nil
	}
	if !refused(err) {
		return err
	}
	unsure := hooks.MaybeApplied(err)
	defer func() {
		if err != nil && unsure {
			err = hooks.MarkMaybeApplied(err)
		}
	}()
	entered, ok := false, false
	defer func() {
		if entered {
			w.stall.leave(env, ok)
		}
	}()
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = settleRetryMin
	bo.MaxInterval = settleRetryMax
	bo.Multiplier = 2
	bo.MaxElapsedTime = 0
	bo.Reset()
	for {
		if !entered {
			// The refusal of an attempt begun before a pause ended is
			// stale (the engine took a write since): no pause, and the
			// attempt is made again at once.
			entered = w.stall.enter(env, err, seen)
		}
		if entered && !w.awaitRetry(env, log, bo.NextBackOff(), err) {
			return err
		}
		seen = w.stall.epoch()
		if err = op(w.writeCtx); err == nil {
			ok = true
			w.stall.succeeded()
			return nil
		}
		if !refused(err) {
			// The engine answered: it takes writes again.
			ok = true
			return err
		}
		unsure = unsure || hooks.MaybeApplied(err)
	}
}

// awaitRetry waits wait before the next attempt of env's refused
// settlement, or less when another settlement goes through meanwhile. It
// returns false, having logged why, when the settlement is given up: the
// lease has expired, the worker was killed or its stop timeout passed.
func (w *Worker) awaitRetry(env *jobq.Envelope, log *slog.Logger, wait time.Duration, err error) bool {
	if !w.keepLease(env, log, wait) {
		log.Warn("giving up a refused settlement: the task's lease has expired, so it will be delivered again", "error", err)
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.stall.next():
	case <-w.killed:
		log.Warn("worker killed: giving up a refused settlement; the task will be delivered again when its lease expires",
			"error", err, "lease_expires", env.Expiry())
		return false
	case <-w.giveUp:
		log.Warn("stop timeout reached: giving up a refused settlement; the task will be delivered again when its lease expires",
			"error", err, "lease_expires", env.Expiry())
		return false
	}
	return true
}

// unsettledNote says what becomes of a task whose settlement failed with
// err: delivered again once its lease expires, unless an attempt that went
// unanswered settled it.
func unsettledNote(err error) string {
	if hooks.MaybeApplied(err) {
		return "an attempt went unanswered and may have settled it (a retry then finds its lease gone); if it did not, it will be delivered again when its lease expires"
	}
	return "it will be delivered again when its lease expires"
}

// keepLease renews env's lease when it would expire before the next
// attempt, wait from now, and reports whether the lease is still held as
// far as the worker knows. A renewal is a write too and may well be
// refused; then the lease runs out, and the task is delivered again.
func (w *Worker) keepLease(env *jobq.Envelope, log *slog.Logger, wait time.Duration) bool {
	left := time.Until(env.Expiry())
	if left > 2*wait {
		return true
	}
	if !w.o.DisableHeartbeat {
		ctx, cancel := context.WithTimeout(w.writeCtx, settleTimeout)
		err := env.Renew(ctx, 0)
		cancel()
		if err == nil {
			return true
		}
		log.Debug("lease renewal refused while a settlement waits", "error", err)
	}
	return left > 0
}
