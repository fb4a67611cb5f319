package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestDamagedRowRoundTrip: a row another tool damaged does not fail Peek,
// is quarantined by the claim (the good message beside it is returned),
// lists as a dead letter naming the damage, and comes back repaired when
// requeued, to be claimed normally.
func TestDamagedRowRoundTrip(t *testing.T) {
	t.Parallel()
	d := setup(t, "").drv
	ctx := t.Context()
	res, err := d.Push(ctx, []*driver.Message{{ID: "bad", Body: []byte(`{}`)}, {ID: "good", Body: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.ExecContext(ctx, `UPDATE jobq_messages SET enqueued_at = 'yesterday', priority = 'high', deliveries = 2.5 WHERE id = ?`,
		res[0].MessageID); err != nil {
		t.Fatal(err)
	}
	if peek, err := d.Peek(ctx, 10); err != nil || len(peek) != 2 {
		t.Fatalf("Peek beside a damaged row = %d messages, %v; want both, no error", len(peek), err)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("claim = %d messages, %v; want the good one alone", len(got), err)
	}
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 1 || !strings.HasPrefix(dead[0].Reason, "corrupt record: ") || dead[0].ID != "bad" {
		t.Fatalf("ListDead = %+v, %v; want the damaged message, its reason saying corrupt record", dead, err)
	}
	if n, err := d.RequeueDead(ctx, nil); err != nil || n != 1 {
		t.Fatalf("RequeueDead = %d, %v", n, err)
	}
	got, err = d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != "bad" || got[0].DeliveryCount != 1 {
		t.Fatalf("claim after requeue = %+v, %v; want the repaired message, delivery 1", got, err)
	}
}

// TestTextVisibleAtIsClaimable: a visible_at that another tool wrote as
// text (which SQLite orders after every number, so "<= now" never held)
// counts as visible; the claim replaces it, and a waiting Receive does not
// fail on it.
func TestTextVisibleAtIsClaimable(t *testing.T) {
	t.Parallel()
	d := setup(t, "").drv
	ctx := t.Context()
	res, err := d.Push(ctx, []*driver.Message{{ID: "odd", Body: []byte(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.ExecContext(ctx, `UPDATE jobq_messages SET visible_at = 'soon' WHERE id = ?`, res[0].MessageID); err != nil {
		t.Fatal(err)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute, Wait: 100 * time.Millisecond})
	if err != nil || len(got) != 1 || got[0].ID != "odd" {
		t.Fatalf("Receive = %d messages, %v; want the message whose visible_at is text", len(got), err)
	}
	if err := first(d.Complete(ctx, driver.Completions(got[0].Lease))); err != nil {
		t.Fatalf("complete: %v", err)
	}
}

func first(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
