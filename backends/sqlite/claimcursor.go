package sqlite

import (
	"slices"
	"sync"
)

// A claim on a queue with policies leaves out the keys at their limit as it
// walks the claim order. Tasks of a key at its cap queued ahead of claimable
// work (100,000 tasks of a key capped at 1, pushed first) made every claim
// read all of them: 68 ms a claim of 32 (BenchmarkClaimPastFullKey).
//
// So when a claim that leaves keys out finds its first candidate far past
// the head of the queue (more than cursorGap IDs past its first window,
// or at another priority), the process keeps where it found it, with the
// keys it left out. For a second, a claim whose keys left out include all
// of those looks at the head window (which catches a task of higher
// priority pushed since), then scans on from that place instead of from
// the head: what lies between was tasks of keys that are still at their
// limit. What it can pass by is a task that became claimable there since,
// beyond the head window: a lease that expired or was requeued. Such a task
// waits until the cursor is a second old. A key that falls below its
// limit is no longer left out, so the cursor is not used, and the next
// claim scans from the head.
//
// The cursor is this process's: other processes on the file keep their own.

const (
	// cursorGap is how many message IDs past the head window a claim must
	// find its first candidate before it keeps a cursor: nearer, the scan
	// from the head is short.
	cursorGap = 1000
	// cursorLife is how long a cursor is used, in µs.
	cursorLife = 1_000_000
)

// claimCursor is where the last claim that scanned far found work.
type claimCursor struct {
	mu           sync.Mutex
	set          bool
	at           int64 // µs: when a scan from the head set it
	prio         int
	id           int64
	leftC, leftR []string // the keys that scan left out
}

// from returns where a claim at now that leaves out blockedC and blockedR
// may start, and whether it may.
func (c *claimCursor) from(now int64, blockedC, blockedR []string) (prio int, id int64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.set || now-c.at >= cursorLife || !subset(c.leftC, blockedC) || !subset(c.leftR, blockedR) {
		return 0, 0, false
	}
	return c.prio, c.id, true
}

// keep sets the cursor after a scan from the head that found its first
// candidate at (prio, id).
func (c *claimCursor) keep(now int64, prio int, id int64, blockedC, blockedR []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set, c.at, c.prio, c.id = true, now, prio, id
	c.leftC, c.leftR = slices.Clone(blockedC), slices.Clone(blockedR)
}

// move moves the cursor on to (prio, id), where a scan from it found its
// first candidate, keeping its age and keys.
func (c *claimCursor) move(prio int, id int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.prio, c.id = prio, id
}

// forget drops the cursor (Clear): its place may be taken by new
// messages.
func (c *claimCursor) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set = false
}

// far reports whether a candidate at (prio, id) is far past (fromPrio,
// fromID), where a scan started or a window ended.
func far(prio int, id int64, fromPrio int, fromID int64) bool {
	return prio != fromPrio || id-fromID > cursorGap
}

func subset(sub, of []string) bool {
	for _, k := range sub {
		if !slices.Contains(of, k) {
			return false
		}
	}
	return true
}
