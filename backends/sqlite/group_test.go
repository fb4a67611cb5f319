package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestGroupCommit runs several queued operations as one group, the way a
// leader does under concurrency, and checks that each is atomic on its own:
// a failing one changes nothing while the others commit, and an abandoned
// one never runs.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.push(t, msg("done"), msg("renewed"))
	got := b.receive(t, 2, time.Minute)

	newReq := func(fn func(tx wtx) error) *writeReq {
		r := &writeReq{ctx: b.ctx, fn: fn, done: make(chan error, 1)}
		b.drv.queue.add(r)
		return r
	}
	stale := got[1].Lease
	stale.Token = "not-the-token"
	var ran bool
	complete := newReq(func(tx wtx) error {
		res, err := tx.Exec(deleteLeased, got[0].Lease.MessageID, got[0].Lease.Token, micros(time.Now()))
		if err != nil {
			return err
		}
		return lostIfNone(res, got[0].Lease)
	})
	lost := newReq(func(tx wtx) error {
		// Changes a row, then fails: the savepoint must undo the change.
		if _, err := tx.Exec(`UPDATE jobq_messages SET body = x'00' WHERE task_id = 'renewed'`); err != nil {
			return err
		}
		return driver.Errorf(errcode.LockLost, "lost on purpose")
	})
	abandoned := newReq(func(wtx) error { ran = true; return nil })
	abandoned.state.Store(reqAbandoned)
	push := newReq(func(tx wtx) error {
		now := micros(time.Now())
		return tx.QueryRow(insertMessage, b.drv.cfg.queue, "pushed", []byte("p"), 0, 0, now, now, "", "", "").Scan(new(int64))
	})

	b.drv.writeSem <- struct{}{}
	b.drv.lead(complete)
	<-b.drv.writeSem

	if err := <-complete.done; err != nil {
		t.Errorf("complete in the group: %v", err)
	}
	wantCode(t, <-lost.done, errcode.LockLost)
	if err := <-push.done; err != nil {
		t.Errorf("push in the group: %v", err)
	}
	if ran {
		t.Error("an abandoned operation ran")
	}
	if len(b.drv.queue.pending) != 0 {
		t.Errorf("%d operations left queued", len(b.drv.queue.pending))
	}
	// The next leader yields for company after a shared group, and not
	// after a lone operation.
	if !b.drv.queue.shared.Load() {
		t.Error("a group of three operations is not marked shared")
	}
	b.push(t, msg("alone"))
	if b.drv.queue.shared.Load() {
		t.Error("a lone push is marked shared")
	}
	peeked, err := b.drv.Peek(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{}
	for _, p := range peeked {
		bodies[p.ID] = string(p.Body)
	}
	delete(bodies, "alone")
	if len(bodies) != 2 || bodies["renewed"] != "body-renewed" || bodies["pushed"] != "p" {
		t.Fatalf("after the group: %v; want the failed operation undone, the push kept, the completed message gone", bodies)
	}
}

// TestWriteCanceledWhileQueued: a caller whose context ends while its
// operation waits behind another transaction returns at once, and its
// operation never runs.
func TestWriteCanceledWhileQueued(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	b.drv.writeSem <- struct{}{} // a long transaction holds the lock
	ctx, cancel := context.WithTimeout(b.ctx, 50*time.Millisecond)
	defer cancel()
	_, err := b.drv.Push(ctx, []*driver.Message{msg("never")})
	wantCode(t, err, errcode.DeadlineExceeded)
	<-b.drv.writeSem
	b.push(t, msg("after"))
	if s := b.stats(t); s != (driver.Stats{Ready: 1}) {
		t.Fatalf("stats %+v, want only the later push", s)
	}
}
