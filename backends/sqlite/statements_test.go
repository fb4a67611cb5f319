package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// prepared reports whether the driver's write connection has prepared
// query: each statement a write transaction runs is prepared on first use
// (writer.stmt).
func (b *testBundle) prepared(query string) bool {
	b.drv.writeSem <- struct{}{}
	defer func() { <-b.drv.writeSem }()
	_, ok := b.drv.w.stmts[query]
	return ok
}

// TestClaimWithoutPoliciesReadsNone: a claim of a queue without policies
// runs the claim statement alone, which tests for them itself; one with a
// concurrency policy still enforces it.
func TestClaimWithoutPoliciesReadsNone(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	for i := range 3 {
		b.push(t, &driver.Message{ID: fmt.Sprintf("k%d", i), Body: []byte("x"), ConcurrencyKey: "k"})
	}
	if got := b.receive(t, 1, time.Minute); len(got) != 1 {
		t.Fatalf("claimed %d; want 1", len(got))
	}
	if b.prepared(selectPolicies) {
		t.Fatal("a claim of a queue without policies read them with a statement of its own")
	}
	if err := b.drv.SetPolicy(b.ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if got := b.receive(t, 10, time.Minute); len(got) != 1 {
		t.Fatalf("claimed %d under a cap of 2 with 1 in flight; want 1", len(got))
	}
	if got := b.receive(t, 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed %d with the cap reached; want 0", len(got))
	}
}

// TestPushStoresChunks: a push stores its messages with one statement per
// chunk (insertRows), and each message's result names its own message,
// across chunk boundaries: duplicates within the batch and of a queued
// task, canonical and other IDs, and messages without an ID (never
// duplicates).
func TestPushStoresChunks(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	queued := b.push(t, msg("queued"))[0].MessageID
	const n = 100
	msgs := make([]*driver.Message, n)
	wantDup := map[int]int{} // index -> index of the message it repeats (-1: the queued one)
	for i := range msgs {
		id := fmt.Sprintf("t%03d", i)
		if i%3 == 0 {
			id = fmt.Sprintf("%032x", i) // canonical: stored as its 16 bytes
		}
		msgs[i] = &driver.Message{ID: id, Body: []byte("body " + id)}
	}
	msgs[10].ID, msgs[90].ID = "", ""
	msgs[70].ID, wantDup[70] = msgs[3].ID, 3 // across the first chunk's end
	msgs[65].ID, wantDup[65] = msgs[64].ID, 64
	msgs[99].ID, wantDup[99] = "queued", -1
	res := b.push(t, msgs...)
	for _, rows := range []int{64, 32, 4} {
		if !b.prepared(insertMessages(rows)) {
			t.Errorf("no statement of %d messages prepared", rows)
		}
	}
	if b.prepared(insertMessage) {
		t.Error("a message was pushed with a statement of its own")
	}
	got := b.receive(t, 1000, time.Minute)
	if len(got) != n-len(wantDup)+1 {
		t.Fatalf("queued %d; want %d", len(got), n-len(wantDup)+1)
	}
	byMessage := map[string]*driver.Received{}
	for _, r := range got {
		byMessage[r.Lease.MessageID] = r
	}
	for i, m := range msgs {
		j, dup := wantDup[i]
		switch {
		case dup && j < 0:
			if !res[i].Duplicate || res[i].MessageID != queued {
				t.Errorf("message %d: %+v; want a duplicate of the queued message %s", i, res[i], queued)
			}
		case dup:
			if !res[i].Duplicate || res[i].MessageID != res[j].MessageID {
				t.Errorf("message %d: %+v; want a duplicate of message %d (%s)", i, res[i], j, res[j].MessageID)
			}
		default:
			r := byMessage[res[i].MessageID]
			if res[i].Duplicate || r == nil || r.ID != m.ID || string(r.Body) != string(m.Body) {
				t.Errorf("message %d (%q): %+v names %+v", i, m.ID, res[i], r)
			}
		}
	}
	if res[10].MessageID == res[90].MessageID {
		t.Error("two messages without an ID got one message ID")
	}
}
