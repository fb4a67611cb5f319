package sqlite

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestClaimPastFullKeysKeepsACursor: a claim that scans far past tasks of
// a full key keeps where it found work, and the next claim starts there: a
// task that became claimable before that place waits until the cursor is a
// second old, and is claimed then.
func TestClaimPastFullKeysKeepsACursor(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=q")
	d := b.drv
	if err := d.SetPolicy(b.ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "full", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	// 100 of full, one of mid, 1,500 more of full, then 20 of late.
	var msgs []*driver.Message
	for i := range 1620 {
		key := "full"
		if i == 100 {
			key = "mid"
		}
		msgs = append(msgs, &driver.Message{Body: []byte(key), ConcurrencyKey: key})
	}
	for i := range 20 {
		msgs = append(msgs, &driver.Message{Body: []byte("late"), ConcurrencyKey: fmt.Sprintf("late%d", i%3)})
	}
	b.push(t, msgs...)
	receive := func(max int) ([]string, []*driver.Received) {
		t.Helper()
		got, err := d.Receive(b.ctx, driver.ReceiveParams{Max: max, Visibility: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		bodies := make([]string, len(got))
		for i, r := range got {
			bodies[i] = string(r.Body)
		}
		return bodies, got
	}
	late5 := []string{"late", "late", "late", "late", "late"}
	if got, _ := receive(1); !slices.Equal(got, []string{"full"}) {
		t.Fatalf("first claim took %v; want [full], which fills its cap", got)
	}
	// Past 100 tasks of full: near, no cursor.
	got, mid := receive(1)
	if !slices.Equal(got, []string{"mid"}) {
		t.Fatalf("second claim took %v; want [mid]", got)
	}
	if d.cursor.set {
		t.Fatal("a claim that scanned 100 tasks past the head kept a cursor")
	}
	// Past 1,500 more: far, a cursor at the first of late.
	if got, _ := receive(5); !slices.Equal(got, late5) {
		t.Fatalf("third claim took %v; want five of late", got)
	}
	if !d.cursor.set {
		t.Fatal("a claim that scanned 1,500 tasks of a full key kept no cursor")
	}
	// mid comes back before the cursor: the next claim passes it by.
	if err := errors.Join(d.Requeue(b.ctx, []driver.RequeueParams{{Lease: mid[0].Lease}})...); err != nil {
		t.Fatal(err)
	}
	if got, _ := receive(5); !slices.Equal(got, late5) {
		t.Fatalf("claim from the cursor took %v; want five of late, mid left for when the cursor is old", got)
	}
	// A second later the claim scans from the head again.
	d.cursor.mu.Lock()
	d.cursor.at -= 2 * cursorLife
	d.cursor.mu.Unlock()
	if got, _ := receive(5); !slices.Equal(got, []string{"mid", "late", "late", "late", "late"}) {
		t.Fatalf("claim after the cursor aged took %v; want mid, then four of late", got)
	}
	// Clearing the queue drops the cursor.
	if !d.cursor.set {
		t.Fatal("the cursor is gone before the clear")
	}
	if _, err := d.Clear(t.Context()); err != nil {
		t.Fatal(err)
	}
	if d.cursor.set {
		t.Error("the cursor outlived a clear")
	}
}
