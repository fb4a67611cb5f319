package postgres

import (
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

// keyedMsg is a message of concurrency key key whose body names it.
func keyedMsg(key string, i int) *driver.Message {
	return &driver.Message{Body: []byte(fmt.Sprintf(`{"key": %q, "n": %d}`, key, i)), ConcurrencyKey: key}
}

// bodyKey is the key keyedMsg put in a body.
func bodyKey(t *testing.T, b []byte) string {
	t.Helper()
	var key string
	var n int
	if _, err := fmt.Sscanf(string(b), `{"key": %q, "n": %d}`, &key, &n); err != nil {
		t.Fatalf("body %q: %v", b, err)
	}
	return key
}

// TestClaimLeavesBusyKeysToTheirClaim: a claim that took something, left
// short only by keys another claim holds, returns what it took without
// scanning on (schema step 16); one that took nothing still scans on past
// them; and once the other claim ends, the keys are claimed.
func TestClaimLeavesBusyKeysToTheirClaim(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	for _, k := range []string{"a", "b"} {
		if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: k, Limit: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	// In claim order: one of b, 20 of a, 5 of b.
	for i, k := range slices.Concat([]string{"b"}, slices.Repeat([]string{"a"}, 20), slices.Repeat([]string{"b"}, 5)) {
		if _, err := d.Push(ctx, []*driver.Message{keyedMsg(k, i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Another claim holds key a: its lock, in a transaction of the test's.
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	lock := fmt.Sprintf("jobq.key.%s.c.%s.%s", pgx.Identifier{d.cfg.schema}.Sanitize(), d.cfg.queue, "a")
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lock); err != nil {
		t.Fatal(err)
	}
	keys := func(got []*driver.Received) []string {
		var ks []string
		for _, r := range got {
			ks = append(ks, bodyKey(t, r.Body))
		}
		return ks
	}
	// A window of 4+8: b, then 11 of a.
	if got := keys(receive(t, d, 4, time.Minute)); len(got) != 1 || got[0] != "b" {
		t.Fatalf("claim of 4 with key a busy behind one b: %v; want [b] alone", got)
	}
	// Now the window holds a alone: the claim scans on to the b's.
	if got := keys(receive(t, d, 4, time.Minute)); len(got) != 4 || got[0] != "b" || got[3] != "b" {
		t.Fatalf("claim of 4 with key a busy and at the head: %v; want four b", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := keys(receive(t, d, 4, time.Minute)); len(got) != 4 || got[0] != "a" {
		t.Fatalf("claim of 4 once key a is free: %v; want four a", got)
	}
}

// TestCapHoldsUnderRacingBatchClaims: claimers taking batches at once, with
// caps a batch could pass, never hold more of a key than its cap, and
// every task is delivered.
func TestCapHoldsUnderRacingBatchClaims(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	d := openDriver(t)
	const keys, perKey, limit, claimers = 4, 30, 3, 6
	var msgs []*driver.Message
	for i := range perKey {
		for k := range keys {
			msgs = append(msgs, keyedMsg(fmt.Sprintf("k%d", k), i))
		}
		msgs = append(msgs, keyedMsg("free", i))
	}
	for k := range keys {
		if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: fmt.Sprintf("k%d", k), Limit: limit}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	inFlight, peak := map[string]int{}, map[string]int{}
	delivered := 0
	deadline := time.Now().Add(20 * time.Second)
	var wg sync.WaitGroup
	for range claimers {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				got, err := d.claim(ctx, 8, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, r := range got {
					k := bodyKey(t, r.Body)
					inFlight[k]++
					peak[k] = max(peak[k], inFlight[k])
				}
				delivered += len(got)
				done := delivered == len(msgs)
				mu.Unlock()
				if len(got) == 0 {
					if done {
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				time.Sleep(3 * time.Millisecond)
				// Counted down before the settlement, so the count seen never
				// exceeds the real one.
				mu.Lock()
				for _, r := range got {
					inFlight[bodyKey(t, r.Body)]--
				}
				mu.Unlock()
				leases := make([]driver.Lease, len(got))
				for i, r := range got {
					leases[i] = r.Lease
				}
				if errs := d.Complete(ctx, driver.Completions(leases...)); errs != nil {
					t.Error(errs)
					return
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		if peak[key] > limit {
			t.Errorf("%d claimers held %d tasks of key %s at once; its cap is %d", claimers, peak[key], key, limit)
		}
	}
	if delivered != len(msgs) {
		t.Errorf("%d of %d tasks delivered", delivered, len(msgs))
	}
	t.Logf("peak in flight per key: %v", peak)
}

// TestCapUpgradeWithLeasesInFlight: leases taken on a capped key by the
// claim of schema step 15 still count against the cap once the schema is
// at step 16, and their completion frees it.
func TestCapUpgradeWithLeasesInFlight(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	s := pgx.Identifier{schema}.Sanitize()
	if err := migrateSteps(ctx, pool, schema, migrations[:15]); err != nil {
		t.Fatal(err)
	}
	const queue = "up"
	if _, err := pool.Exec(ctx, `INSERT INTO `+s+`.policies (queue, kind, key, limit_n) VALUES ($1, 'concurrency', 'k', 2)`, queue); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+s+`.messages (queue, packed_body, concurrency_key) SELECT $1, 'a'::bytea || convert_to('{"n": ' || i || '}', 'UTF8'), 'k' FROM generate_series(1, 4) i`, queue); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT r_id, r_lease, r_priority FROM `+s+`.claim_lookup($1, 5, 60000000)`, queue)
	if err != nil {
		t.Fatal(err)
	}
	type taken struct {
		ID    int64
		Lease string
		Prio  int32
	}
	old, err := pgx.CollectRows(rows, pgx.RowToStructByPos[taken])
	if err != nil || len(old) != 2 {
		t.Fatalf("claim of step 15 under a cap of 2: %d leases, %v; want 2", len(old), err)
	}

	d := openDriver(t, "schema="+schema, "queue="+queue)
	if got := receive(t, d, 5, time.Minute); len(got) != 0 {
		t.Fatalf("claim after the upgrade with the cap's 2 leases in flight: %d messages; want none", len(got))
	}
	l := driver.Lease{MessageID: strconv.FormatInt(old[0].ID, 10), Token: leaseToken(old[0].Lease, old[0].Prio)}
	if errs := d.Complete(ctx, driver.Completions(l)); errs != nil {
		t.Fatalf("completing a lease taken before the upgrade: %v", errs)
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 1 {
		t.Fatalf("claim after one of the 2 leases ended: %d messages; want 1", len(got))
	}
}
