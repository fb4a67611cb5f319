package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestRequeueAllDeadMovesInChunks: `dlq requeue --all` moves the dead
// letters a chunk per transaction, so that another process's write (here a
// push through a second handle that waits at most 1 ms for the file's
// write lock) gets through between chunks, and every letter is moved once.
// Not parallel: it sets package hooks.
func TestRequeueAllDeadMovesInChunks(t *testing.T) {
	b := setup(t, "")
	const letters = 5
	for i := range letters {
		b.push(t, msg(fmt.Sprint("dead-", i)))
	}
	got := b.receive(t, letters, time.Minute)
	reqs := make([]driver.DeadLetterParams, len(got))
	for i, r := range got {
		reqs[i] = driver.DeadLetterParams{Lease: r.Lease, Reason: "failed"}
	}
	if errs := b.drv.DeadLetter(b.ctx, reqs); errs != nil {
		t.Fatalf("dead-letter: %v", errs)
	}
	other := openAt(t, b.path, "busy_timeout=1ms")
	oldChunk := requeueChunk
	requeueChunk = 2
	chunks := 0
	afterRequeueChunk = func() {
		chunks++
		if _, err := other.Push(b.ctx, []*driver.Message{msg(fmt.Sprint("between-", chunks))}); err != nil {
			t.Errorf("a push from another handle between chunks: %v", err)
		}
	}
	t.Cleanup(func() { requeueChunk, afterRequeueChunk = oldChunk, nil })

	n, err := b.drv.RequeueDead(b.ctx, nil)
	if err != nil || n != letters {
		t.Fatalf("RequeueDead(all) = %d, %v; want %d", n, err, letters)
	}
	if chunks != 3 {
		t.Errorf("%d chunks committed; want 3 (5 letters, 2 a chunk)", chunks)
	}
	if s := b.stats(t); s.Dead != 0 || s.Ready != letters+3 {
		t.Errorf("after the requeue: %d dead, %d ready; want 0 and %d", s.Dead, s.Ready, letters+3)
	}
}
