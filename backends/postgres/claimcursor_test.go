package postgres

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// TestClaimPastFullKeysKeepsACursor: a claim that scans far past tasks of
// a full key keeps where it found work (schema step 25), and the next
// claim starts there: a task that became claimable before that place
// waits until the cursor is a second old, and is claimed then. Clearing the
// queue drops its cursor.
func TestClaimPastFullKeysKeepsACursor(t *testing.T) {
	t.Parallel()
	d := openURL(t, newQueueURL(t))
	setCap(t, d, "full", 1)
	// 100 of full, one of mid, 1,500 more of full, then 20 of late.
	msgs := make([]*driver.Message, 0, 1621)
	for i := range 1620 {
		m := keyedMsg("full", i)
		if i == 100 {
			m = keyedMsg("mid", i)
		}
		msgs = append(msgs, m)
	}
	for i := range 20 {
		msgs = append(msgs, keyedMsg("late", i))
	}
	if _, err := d.Push(ctxT(t), msgs); err != nil {
		t.Fatal(err)
	}
	keys := func(got []*driver.Received) []string {
		out := make([]string, len(got))
		for i, r := range got {
			out[i] = bodyKey(t, r.Body)
		}
		return out
	}
	if got := keys(receive(t, d, 1, time.Minute)); !slices.Equal(got, []string{"full"}) {
		t.Fatalf("first claim took %v; want [full], which fills its cap", got)
	}
	// Past 100 tasks of full: near, no cursor.
	mid := receive(t, d, 1, time.Minute)
	if got := keys(mid); !slices.Equal(got, []string{"mid"}) {
		t.Fatalf("second claim took %v; want [mid]", got)
	}
	if _, ok := cursorOf(t, d); ok {
		t.Fatal("a claim that scanned 100 tasks past its window kept a cursor")
	}
	// Past 1,500 more: far, a cursor at the first of late.
	if got := keys(receive(t, d, 5, time.Minute)); !slices.Equal(got, []string{"late", "late", "late", "late", "late"}) {
		t.Fatalf("third claim took %v; want five of late", got)
	}
	if _, ok := cursorOf(t, d); !ok {
		t.Fatal("a claim that scanned 1,500 tasks of a full key kept no cursor")
	}
	// mid comes back before the cursor: the next claim passes it by.
	if err := errors.Join(d.Requeue(ctxT(t), []driver.RequeueParams{{Lease: mid[0].Lease}})...); err != nil {
		t.Fatal(err)
	}
	if got := keys(receive(t, d, 5, time.Minute)); slices.Contains(got, "mid") || len(got) != 5 {
		t.Fatalf("claim from the cursor took %v; want five of late, mid left for when the cursor is old", got)
	}
	// A second later the claim scans from the head again.
	if _, err := d.pool.Exec(ctxT(t), `UPDATE `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.claim_cursors
		SET set_at = set_at - interval '2 seconds' WHERE queue = $1`, d.cfg.queue); err != nil {
		t.Fatal(err)
	}
	if got := keys(receive(t, d, 5, time.Minute)); !slices.Equal(got, []string{"mid", "late", "late", "late", "late"}) {
		t.Fatalf("claim after the cursor aged took %v; want mid, then four of late", got)
	}
	// Clearing the queue drops its cursor.
	if _, ok := cursorOf(t, d); !ok {
		t.Fatal("the queue's cursor row is gone before the clear")
	}
	if _, err := d.Clear(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := cursorOf(t, d); ok {
		t.Error("the queue's cursor row outlived a clear")
	}
}

// cursorOf reads the queue's claim cursor: the ID it starts at.
func cursorOf(t *testing.T, d *Driver) (int64, bool) {
	t.Helper()
	var id int64
	err := d.pool.QueryRow(ctxT(t), `SELECT id FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.claim_cursors WHERE queue = $1`,
		d.cfg.queue).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return id, true
}
