package jobq

import (
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// warnOnce records which degraded features a queue has warned about.
type warnOnce struct {
	mu   sync.Mutex
	seen map[driver.Feature]bool
}

// degrade is called before the portable layer uses feature f. For a native
// feature it does nothing. For an emulated feature, or an unsupported one
// with a safe portable fallback, it logs one WARN per queue and feature that
// says what happens instead, and returns nil. For an unsupported feature
// without a safe fallback it returns an Unimplemented error.
func (q *Queue) degrade(op string, f driver.Feature) error {
	s := q.caps.Features[f]
	var instead string
	switch s.Level {
	case driver.Native:
		return nil
	case driver.Emulated:
		instead = s.Fallback
	default:
		fb, safe := driver.PortableFallback(f)
		if !safe {
			msg := "backend " + q.backend() + " does not support " + string(f)
			if s.Fallback != "" {
				msg += ": " + s.Fallback
			}
			return &Error{Code: errcode.Unimplemented, Op: op, Queue: q.url, Msg: msg + " (run `jobq backends` to see which backends do)"}
		}
		instead = fb
		if s.Fallback != "" {
			instead = s.Fallback
		}
	}
	q.warnOnce(f, instead)
	return nil
}

// warnOnce logs, once per queue and feature, that f is degraded and what
// happens instead.
func (q *Queue) warnOnce(f driver.Feature, instead string) {
	if q.firstWarning(f) {
		q.log.Warn("jobq: feature degraded on this backend",
			"feature", string(f), "level", q.caps.Features[f].Level.String(), "backend", q.scheme, "instead", instead)
	}
}

// firstWarning reports whether the warning marked key is this queue's
// first, and marks it given.
func (q *Queue) firstWarning(key driver.Feature) bool {
	q.warned.mu.Lock()
	defer q.warned.mu.Unlock()
	first := !q.warned.seen[key]
	q.warned.seen[key] = true
	return first
}

// longDelayKey marks, in warnOnce, the warning that a requeue delay was
// shortened to the backend's longest.
const longDelayKey driver.Feature = "requeue delay over the backend's maximum"

// fitDelay returns delay, shortened to the backend's longest visibility
// timeout when it declares one (Azure Storage Queue: 7 days), with one
// warning per queue. A retry backoff, snooze or gate delay may be longer
// than the engine can hide a message; refused, the settlement would fail
// and the task would come back at its lease's end without using up a
// retry, forever. Shortened, it comes back early, which is safe.
func (q *Queue) fitDelay(delay time.Duration) time.Duration {
	mv := q.caps.MaxVisibility
	if mv <= 0 || delay <= mv {
		return delay
	}
	if q.firstWarning(longDelayKey) {
		q.log.Warn("jobq: a requeue delay is longer than this backend can hide a message; the task comes back after the backend's maximum instead",
			"delay", delay, "max", mv, "backend", q.scheme)
	}
	return mv
}
