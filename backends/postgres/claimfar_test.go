package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// TestClaimFarFromCapKeepsHeld: a claim whose window holds fewer of a
// key's tasks than the key has slots left takes them as they come (schema
// step 23) and still records each lease in held; one that holds as many
// or more takes them one by one, up to the cap. The count of held rows is
// what later claims count against the cap.
func TestClaimFarFromCapKeepsHeld(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		cap, queued int
		want        int
	}{
		{"window below the cap", 6, 5, 5},
		{"window at the cap", 5, 5, 5},
		{"window over the cap", 4, 5, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openURL(t, newQueueURL(t))
			setCap(t, d, "k", int64(tt.cap))
			pushKeyed(t, d, "k", tt.queued)
			got := receive(t, d, 10, time.Minute)
			if len(got) != tt.want {
				t.Fatalf("claimed %d; want %d", len(got), tt.want)
			}
			if n := heldRowsOf(t, d, "k"); n != int64(tt.want) {
				t.Errorf("held rows = %d; want %d (one per lease taken)", n, tt.want)
			}
			if more := receive(t, d, 10, time.Minute); tt.want+len(more) > tt.cap {
				t.Errorf("a second claim took %d more; the cap is %d and %d are in flight", len(more), tt.cap, tt.want)
			}
		})
	}
}

// TestExpiredAdmissionsNeverBlock: expired rate admissions that no claim
// deleted yet (since step 23 only claims that meet rate keys delete them)
// do not count against the key's limit.
func TestExpiredAdmissionsNeverBlock(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openURL(t, newQueueURL(t))
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.RatePolicy, Key: "r", Limit: 2, Period: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.admissions (queue, key, expires_at)
		SELECT $1, 'r', now() - interval '1 second' FROM generate_series(1, 5)`, d.cfg.queue); err != nil {
		t.Fatal(err)
	}
	m := msg("a")
	m.RateLimitKey = "r"
	if _, err := d.Push(ctx, []*driver.Message{m}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 1 {
		t.Fatalf("claimed %d; want 1: the key's admissions have all expired", len(got))
	}
}

// TestCappedClaimKeepsClaimOrder: a claim under caps takes the highest
// priorities first, and within a priority the oldest, as an ordinary claim
// does.
func TestCappedClaimKeepsClaimOrder(t *testing.T) {
	t.Parallel()
	d := openURL(t, newQueueURL(t))
	setCap(t, d, "k", 10)
	var msgs []*driver.Message
	for i, p := range []int{1, 5, 3, 5, 2, 3} {
		m := keyedMsg("k", i)
		m.ID = fmt.Sprintf("p%d-%d", p, i)
		m.Priority = p
		msgs = append(msgs, m)
	}
	if _, err := d.Push(ctxT(t), msgs); err != nil {
		t.Fatal(err)
	}
	want := []string{"p5-1", "p5-3", "p3-2", "p3-5"}
	if got := ids(receive(t, d, 4, time.Minute)); !slices.Equal(got, want) {
		t.Errorf("claimed %v; want %v (priority, then push order)", got, want)
	}
}

// TestRedeliveryReplacesItsHeldRow: a message claimed again while the
// held row of its expired lease is still there (far from the cap, no claim
// forgets ended leases) replaces that row with its new lease, while first
// deliveries of the same claim insert theirs (schema step 24 inserts the
// two kinds apart, only redeliveries through ON CONFLICT).
func TestRedeliveryReplacesItsHeldRow(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openURL(t, newQueueURL(t))
	setCap(t, d, "k", 100)
	pushKeyed(t, d, "k", 1)
	first := receive(t, d, 5, 100*time.Millisecond)
	if len(first) != 1 {
		t.Fatalf("claimed %d; want 1", len(first))
	}
	time.Sleep(200 * time.Millisecond) // the lease expires; its held row stays
	if n := heldRowsOf(t, d, "k"); n != 1 {
		t.Fatalf("held rows after the lease expired = %d; want its row, still there", n)
	}
	m := keyedMsg("k", 1)
	m.ID = "k-1"
	if _, err := d.Push(ctx, []*driver.Message{m}); err != nil {
		t.Fatal(err)
	}
	again := receive(t, d, 5, time.Minute)
	if len(again) != 2 {
		t.Fatalf("claimed %d; want the expired message again and the new one", len(again))
	}
	var redelivered *driver.Received
	for _, r := range again {
		if r.Lease.MessageID == first[0].Lease.MessageID {
			redelivered = r
		}
	}
	if redelivered == nil || redelivered.DeliveryCount != 2 {
		t.Fatalf("second claim %v; want message %s delivered a second time", again, first[0].Lease.MessageID)
	}
	token, _, _ := strings.Cut(redelivered.Lease.Token, ".")
	rows, err := d.pool.Query(ctx, `SELECT lease::text FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.held
		WHERE queue = $1 AND key = 'k' ORDER BY id`, d.cfg.queue)
	if err != nil {
		t.Fatal(err)
	}
	leases, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(leases) != 2 || leases[0] != token {
		t.Errorf("held leases %v; want two, the first the redelivery's new lease %s", leases, token)
	}
}

// TestClaimCountsKeysOfABusyQueue: when the queue has more held rows than
// a claim counts as a bound on every key's (schema step 24), each key the
// claim meets is counted on its own: a key far from its cap is still
// taken as it comes, and a key near it gets exactly the slots it has left.
func TestClaimCountsKeysOfABusyQueue(t *testing.T) {
	t.Parallel()
	d := openURL(t, newQueueURL(t))
	setCap(t, d, "a", 50)
	setCap(t, d, "b", 50)
	pushKeyed(t, d, "b", 40)
	var inFlight int
	for inFlight < 40 {
		got := receive(t, d, 10, time.Minute)
		if len(got) == 0 {
			t.Fatalf("claimed %d of b's 40; want all of them under its cap of 50", inFlight)
		}
		inFlight += len(got)
	}
	// A claim of 10 looks at a window of 18; b's 40 held rows are more
	// than the bound of 50 - 18 + 1, so no key is bounded by the total.
	msgs := make([]*driver.Message, 0, 30)
	for i := 0; i < 15; i++ {
		for _, k := range []string{"a", "b"} {
			m := keyedMsg(k, 100+i)
			m.ID = fmt.Sprintf("%s-late-%d", k, i)
			msgs = append(msgs, m)
		}
	}
	if _, err := d.Push(ctxT(t), msgs); err != nil {
		t.Fatal(err)
	}
	byKey := map[string]int{}
	for {
		got := receive(t, d, 10, time.Minute)
		if len(got) == 0 {
			break
		}
		for _, r := range got {
			byKey[bodyKey(t, r.Body)]++
		}
	}
	if byKey["a"] != 15 || byKey["b"] != 10 {
		t.Errorf("claimed %v; want all 15 of a (far from its cap) and 10 of b (40 of its 50 in flight)", byKey)
	}
	if n := heldRowsOf(t, d, "b"); n != 50 {
		t.Errorf("held rows of b = %d; want 50, its cap", n)
	}
}
