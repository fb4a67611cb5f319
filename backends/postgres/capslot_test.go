package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// heldRowsOf is how many rows of held (the leases of capped keys) key has.
func heldRowsOf(t *testing.T, d *Driver, key string) int64 {
	t.Helper()
	var n int64
	err := d.pool.QueryRow(ctxT(t), `SELECT count(*) FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.held
		WHERE queue = $1 AND key = $2`, d.cfg.queue, key).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// setCap sets a concurrency cap.
func setCap(t *testing.T, d *Driver, key string, limit int64) {
	t.Helper()
	if err := d.SetPolicy(ctxT(t), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: key, Limit: limit}); err != nil {
		t.Fatal(err)
	}
}

// pushKeyed pushes n messages of key, with IDs key-0, key-1, ...
func pushKeyed(t *testing.T, d *Driver, key string, n int) {
	t.Helper()
	msgs := make([]*driver.Message, n)
	for i := range msgs {
		msgs[i] = keyedMsg(key, i)
		msgs[i].ID = fmt.Sprintf("%s-%d", key, i)
	}
	if _, err := d.Push(ctxT(t), msgs); err != nil {
		t.Fatal(err)
	}
}

// TestExpiredLeaseFreesItsSlot: a lease that expires frees its key's slot
// for the next claim that finds the key at its cap, though nothing
// settled it; the expired message is taken again once the slot is free.
func TestExpiredLeaseFreesItsSlot(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	setCap(t, d, "k", 1)
	pushKeyed(t, d, "k", 1)
	first := receive(t, d, 5, 100*time.Millisecond)
	if len(first) != 1 {
		t.Fatalf("claimed %d; want 1", len(first))
	}
	if _, err := d.Push(ctx, []*driver.Message{{ID: "urgent", Body: []byte(`{"key": "k", "n": 9}`), ConcurrencyKey: "k", Priority: 5}}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 0 {
		t.Fatalf("claim with the key's one lease live: %d messages; want none", len(got))
	}
	time.Sleep(200 * time.Millisecond) // the first lease expires
	second := receive(t, d, 5, time.Minute)
	if len(second) != 1 || string(second[0].Body) != `{"key": "k", "n": 9}` {
		t.Fatalf("claim once the key's lease expired: %d messages; want the one of priority 5", len(second))
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 0 {
		t.Fatalf("claim with the key's new lease live: %d messages; want none", len(got))
	}
	if errs := d.Complete(ctx, driver.Completions(second[0].Lease)); errs != nil {
		t.Fatal(errs)
	}
	third := receive(t, d, 5, time.Minute)
	if len(third) != 1 || third[0].Lease.MessageID != first[0].Lease.MessageID {
		t.Fatalf("claim once the slot is free: %d messages; want the expired message %s", len(third), first[0].Lease.MessageID)
	}
}

// TestHeldLeftBySettlementIsForgotten: a completed lease frees its key's
// slot for the next claim though its row in held is still there (the
// settlement of a queue without key policies, as a process that has not
// seen the cap yet runs it, leaves the row): the claim that meets the key
// forgets it.
func TestHeldLeftBySettlementIsForgotten(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	setCap(t, d, "k", 1)
	pushKeyed(t, d, "k", 3)
	first := receive(t, d, 5, time.Minute)
	if len(first) != 1 {
		t.Fatalf("claimed %d; want 1", len(first))
	}
	k, err := parseLease("complete", first[0].Lease)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := d.pool.Exec(ctx, d.sql.complete, []int64{k.id}, []any{k.token}, []int32{k.priority}, d.cfg.queue)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("completion that leaves the held row: %v, %v", tag, err)
	}
	if n := heldRowsOf(t, d, "k"); n != 1 {
		t.Fatalf("%d held rows after that completion; want the one it left", n)
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 1 {
		t.Fatalf("claim after the only lease ended: %d messages; want 1", len(got))
	}
}

// TestSettlementsFreeTheirSlot: under a cap of 1, a requeue, a
// dead-letter and a completion each free the key's slot for the next
// claim, and a renewal keeps it taken.
func TestSettlementsFreeTheirSlot(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	setCap(t, d, "k", 1)
	pushKeyed(t, d, "k", 3)
	take := func(what string) *driver.Received {
		t.Helper()
		got := receive(t, d, 5, time.Minute)
		if len(got) != 1 {
			t.Fatalf("%s: claimed %d under a cap of 1; want 1", what, len(got))
		}
		if more := receive(t, d, 5, time.Minute); len(more) != 0 {
			t.Fatalf("%s: a second claim took %d with the key's slot taken; want none", what, len(more))
		}
		return got[0]
	}
	r := take("first claim")
	if _, err := d.Renew(ctx, r.Lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	if more := receive(t, d, 5, time.Minute); len(more) != 0 {
		t.Fatalf("after a renewal: claimed %d; want none", len(more))
	}
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: r.Lease}}); errs != nil {
		t.Fatal(errs)
	}
	r = take("after a requeue")
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: r.Lease, Reason: "test"}}); errs != nil {
		t.Fatal(errs)
	}
	r = take("after a dead-letter")
	if errs := d.Complete(ctx, driver.Completions(r.Lease)); errs != nil {
		t.Fatal(errs)
	}
	take("after a completion")
}
