package dashboard

import (
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
)

// Sample is one reading of the queue's counts.
type Sample struct {
	// At is when the counts were read.
	At time.Time
	// Stats are the counts.
	Stats driver.Stats
}

// ring keeps the last samples, oldest first, up to its capacity; the
// oldest is dropped when it is full. It is safe for concurrent use.
type ring struct {
	mu    sync.Mutex
	buf   []Sample
	start int // index of the oldest sample
	n     int
}

func newRing(capacity int) *ring {
	return &ring{buf: make([]Sample, max(capacity, 2))}
}

// add appends s, dropping the oldest sample when the ring is full.
func (r *ring) add(s Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
}

// all returns a copy of the samples, oldest first.
func (r *ring) all() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Sample, r.n)
	for i := range out {
		out[i] = r.buf[(r.start+i)%len(r.buf)]
	}
	return out
}
