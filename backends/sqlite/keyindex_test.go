package sqlite

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestKeyIndexHoldsLeasesOnly: jobq_messages_ckey holds keyed messages
// under a lease only, ordered by when the lease ends, so a claim under caps
// counts the leases in flight (countInFlight) by a range of that index
// rather than over the queue's keyed backlog; a file with the earlier
// definition (every keyed message) gets this one when it is next opened.
func TestKeyIndexHoldsLeasesOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, "queue=q")
	raw, err := sql.Open("sqlite", b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx := b.ctx
	for _, stmt := range []string{
		`DROP INDEX jobq_messages_ckey`,
		`CREATE INDEX jobq_messages_ckey ON jobq_messages (queue, concurrency_key, visible_at, lease) WHERE concurrency_key <> ''`,
	} {
		if _, err := raw.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	d := openAt(t, b.path, "queue=q")
	var def string
	if err := raw.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'jobq_messages_ckey'`).Scan(&def); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "lease IS NOT NULL") {
		t.Fatalf("index after the upgrade: %s; want the partial index over leased messages", def)
	}

	rows, err := raw.QueryContext(ctx, `EXPLAIN QUERY PLAN `+countInFlight, "q", 0)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "; "); !strings.Contains(p, "jobq_messages_ckey (queue=? AND visible_at>?)") {
		t.Errorf("count of leases in flight: plan %q; want a range of lease ends in jobq_messages_ckey", p)
	}

	indexed := func() int {
		t.Helper()
		var n int
		err := raw.QueryRowContext(ctx, `SELECT count(*) FROM jobq_messages INDEXED BY jobq_messages_ckey
			WHERE queue = 'q' AND visible_at > -9223372036854775808 AND concurrency_key <> '' AND lease IS NOT NULL`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := d.Push(ctx, []*driver.Message{{ID: id, Body: []byte(id), ConcurrencyKey: "k"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := indexed(); n != 0 {
		t.Errorf("%d queued keyed messages in the index; want none before they are claimed", n)
	}
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 2, Visibility: time.Minute})
	if err != nil || len(got) != 2 {
		t.Fatalf("claimed %d, %v; want 2", len(got), err)
	}
	if n := indexed(); n != 2 {
		t.Errorf("%d messages in the index with 2 leased; want 2", n)
	}
	if errs := d.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
		t.Fatal(errs)
	}
	if n := indexed(); n != 1 {
		t.Errorf("%d messages in the index after a completion; want the 1 still leased", n)
	}
}
