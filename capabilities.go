package jobq

import (
	"sync"

	"github.com/jobq/jobq/driver"
)

// Capabilities is what a backend declares it can do; see the driver package
// for the features and levels.
type Capabilities = driver.Capabilities

// Feature names one optional behaviour of a backend.
type Feature = driver.Feature

// portableFallback says what the portable layer itself does when a driver
// declares a feature Unsupported and ignoring the request is safe. Features
// missing from this map fail with Unimplemented instead, because doing
// nothing would be a silent change of meaning.
var portableFallback = map[driver.Feature]string{
	driver.Priority:      "priority is ignored; tasks are received in roughly push order",
	driver.ExactCount:    "counts are approximate",
	driver.Dedup:         "a task whose ID is already queued is queued again (at-least-once delivery still holds)",
	driver.InPlaceUpdate: "the retry budget is counted from the delivery count instead of a decremented num_retries, so a lease that expires also uses up a retry",
}

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
		fb, safe := portableFallback[f]
		if !safe {
			msg := "backend " + q.scheme + " does not support " + string(f)
			if s.Fallback != "" {
				msg += ": " + s.Fallback
			}
			return &Error{Code: Unimplemented, Op: op, Queue: q.url, Msg: msg + " (run `jobq backends` to see which backends do)"}
		}
		instead = fb
		if s.Fallback != "" {
			instead = s.Fallback
		}
	}
	q.warned.mu.Lock()
	first := !q.warned.seen[f]
	q.warned.seen[f] = true
	q.warned.mu.Unlock()
	if first {
		q.log.Warn("jobq: feature degraded on this backend",
			"feature", string(f), "level", s.Level.String(), "backend", q.scheme, "instead", instead)
	}
	return nil
}
