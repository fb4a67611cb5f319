package jobq

import (
	"sync"

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
	q.warned.mu.Lock()
	first := !q.warned.seen[f]
	q.warned.seen[f] = true
	q.warned.mu.Unlock()
	if first {
		q.log.Warn("jobq: feature degraded on this backend",
			"feature", string(f), "level", q.caps.Features[f].Level.String(), "backend", q.scheme, "instead", instead)
	}
}
