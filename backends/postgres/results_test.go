package postgres

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/settletest"
)

// rec makes a record of task id in state st, expiring after ttl.
func rec(id string, st driver.ResultState, ttl time.Duration) *driver.ResultRecord {
	now := time.Now().Truncate(time.Microsecond)
	return &driver.ResultRecord{ID: id, State: st, UpdatedAt: now, ExpiresAt: now.Add(ttl), Data: []byte("data-" + id + "-" + string(st))}
}

// states returns the state of each record ("-" for none).
func states(recs []*driver.ResultRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = "-"
		if r != nil {
			out[i] = string(r.State)
		}
	}
	return out
}

func getResults(t *testing.T, d *Driver, ids ...string) []*driver.ResultRecord {
	t.Helper()
	got, err := d.GetResults(ctxT(t), ids)
	if err != nil {
		t.Fatalf("get results: %v", err)
	}
	return got
}

func putResults(t *testing.T, d *Driver, recs ...*driver.ResultRecord) {
	t.Helper()
	if err := d.PutResults(ctxT(t), recs); err != nil {
		t.Fatalf("put results: %v", err)
	}
}

func wantCode(t *testing.T, err error, code errcode.Code) {
	t.Helper()
	if errcode.Of(err) != code {
		t.Fatalf("error %v has code %v; want %v", err, errcode.Of(err), code)
	}
}

// openResults opens a fresh queue (see openDriver).
func openResults(t *testing.T, extra ...string) *Driver { return openDriver(t, extra...) }

func TestResultsPutGet(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	want := rec("a", driver.ResultSucceeded, time.Hour)
	putResults(t, d, want, rec("old", driver.ResultDeadLettered, -time.Second))
	got := getResults(t, d, "missing", "a", "old", "a")
	if fmt.Sprint(states(got)) != "[- succeeded - succeeded]" {
		t.Fatalf("states = %v; want the expired record hidden", states(got))
	}
	g := got[1]
	if g.ID != "a" || string(g.Data) != string(want.Data) || !g.UpdatedAt.Equal(want.UpdatedAt) || !g.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("record = %+v; want %+v", g, want)
	}
	putResults(t, d, rec("a", driver.ResultCancelled, time.Hour))
	if s := states(getResults(t, d, "a")); s[0] != "cancelled" {
		t.Fatalf("after replace: %v", s)
	}
	// Twice in one batch: the last one wins.
	putResults(t, d, rec("b", driver.ResultDeadLettered, time.Hour), rec("b", driver.ResultSucceeded, time.Hour))
	if s := states(getResults(t, d, "b")); s[0] != "succeeded" {
		t.Fatalf("twice in a batch: %v", s)
	}
}

func TestResultsCancelRequestedInsertIfAbsent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing *driver.ResultRecord
		want     driver.ResultState
	}{
		{"none", nil, driver.ResultCancelRequested},
		{"ended", rec("t", driver.ResultSucceeded, time.Hour), driver.ResultSucceeded},
		{"expired end", rec("t", driver.ResultSucceeded, -time.Second), driver.ResultCancelRequested},
		{"cancel requested", rec("t", driver.ResultCancelRequested, time.Hour), driver.ResultCancelRequested},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openResults(t)
			if tt.existing != nil {
				putResults(t, d, tt.existing)
			}
			req := rec("t", driver.ResultCancelRequested, time.Hour)
			req.Data = []byte("request")
			putResults(t, d, req)
			got := getResults(t, d, "t")[0]
			if got == nil || got.State != tt.want {
				t.Fatalf("record after cancel request = %v; want state %s", got, tt.want)
			}
			if tt.existing != nil && tt.existing.State == driver.ResultCancelRequested && string(got.Data) != string(tt.existing.Data) {
				t.Fatalf("a second cancel request replaced the first: data %q", got.Data)
			}
			putResults(t, d, rec("t", driver.ResultCancelled, time.Hour))
			if s := states(getResults(t, d, "t")); s[0] != "cancelled" {
				t.Fatalf("end after cancel request: %v", s)
			}
		})
	}
}

func TestResultsBadRecords(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	for _, r := range []*driver.ResultRecord{nil, rec("", driver.ResultSucceeded, time.Hour), rec("x", "finished", time.Hour),
		{ID: "x", State: driver.ResultSucceeded}} {
		wantCode(t, d.PutResults(ctxT(t), []*driver.ResultRecord{rec("ok", driver.ResultSucceeded, time.Hour), r}), errcode.InvalidArgument)
	}
	if s := states(getResults(t, d, "ok")); s[0] != "-" {
		t.Fatalf("a batch with a bad record stored %v", s)
	}
}

func TestCompleteStoresRecords(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b"), msg("c"), msg("d")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, 4, time.Minute)
	if len(got) != 4 {
		t.Fatalf("received %d", len(got))
	}
	// b's lease is not held (a wrong token); c has no record; d's record
	// is invalid.
	lost := got[1].Lease
	lost.Token = leaseToken("00000000-0000-0000-0000-000000000001", 0)
	leases := []driver.Lease{got[0].Lease, lost, got[2].Lease, got[3].Lease}
	recs := []*driver.ResultRecord{rec("a", driver.ResultSucceeded, time.Hour), rec("b", driver.ResultSucceeded, time.Hour), nil, {ID: "d"}}
	errs := d.Complete(ctx, settletest.WithResults(leases, recs))
	if errs == nil || errs[0] != nil || errcode.Of(errs[1]) != errcode.LockLost || errs[2] != nil || errcode.Of(errs[3]) != errcode.InvalidArgument {
		t.Fatalf("errs = %v; want b LockLost, d InvalidArgument", errs)
	}
	if s := states(getResults(t, d, "a", "b", "c", "d")); fmt.Sprint(s) != "[succeeded - - -]" {
		t.Fatalf("records = %v; want a record for a only", s)
	}
	if s, err := d.Stats(ctx); err != nil || s.InFlight != 2 {
		t.Fatalf("stats = %+v, %v; want b and d still in flight", s, err)
	}
	// Without records it is Complete.
	if errs := d.Complete(ctx, settletest.WithResults([]driver.Lease{got[1].Lease}, []*driver.ResultRecord{nil})); errs != nil {
		t.Fatal(errs)
	}
}

func TestDeadLetterStoresRecords(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, 2, time.Minute)
	lost := got[1].Lease
	lost.Token = leaseToken("00000000-0000-0000-0000-000000000001", 0)
	reqs := []driver.DeadLetterParams{{Lease: got[0].Lease, Reason: "failed", Body: []byte("new")}, {Lease: lost, Reason: "failed"}}
	recs := []*driver.ResultRecord{rec("a", driver.ResultDeadLettered, time.Hour), rec("b", driver.ResultDeadLettered, time.Hour)}
	errs := d.DeadLetter(ctx, settletest.DeadWithResults(reqs, recs))
	if errs == nil || errs[0] != nil || errcode.Of(errs[1]) != errcode.LockLost {
		t.Fatalf("errs = %v; want b LockLost", errs)
	}
	if s := states(getResults(t, d, "a", "b")); fmt.Sprint(s) != "[dead-lettered -]" {
		t.Fatalf("records = %v", s)
	}
	dead, err := d.ListDead(ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].ID != "a" || string(dead[0].Body) != "new" || dead[0].Reason != "failed" {
		t.Fatalf("dead letters = %v, %v", dead, err)
	}
	if s, err := d.Stats(ctx); err != nil || s.InFlight != 1 {
		t.Fatalf("stats = %+v, %v; want b in flight", s, err)
	}
}

func TestPurgeResultsInBatches(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	other := openResults(t)
	ctx := ctxT(t)
	const expired = 2*purgeBatch + 7
	var recs []*driver.ResultRecord
	for i := range expired {
		recs = append(recs, rec(fmt.Sprint("old", i), driver.ResultSucceeded, -time.Minute))
	}
	putResults(t, d, append(recs, rec("live", driver.ResultSucceeded, time.Hour))...)
	putResults(t, other, rec("old0", driver.ResultSucceeded, -time.Minute))

	// The look finds the queue's expired records, and only those.
	tids, err := d.expiredRecords(ctx, time.Now())
	if err != nil || len(tids) != expired {
		t.Fatalf("the look found %d expired records (%v); want %d", len(tids), err, expired)
	}
	n, err := d.PurgeResults(ctx, time.Now())
	if err != nil || n != expired {
		t.Fatalf("purge = %d, %v; want %d", n, err, expired)
	}
	if n, err := d.PurgeResults(ctx, time.Now()); err != nil || n != 0 {
		t.Fatalf("second purge = %d, %v", n, err)
	}
	count := func(q string) (n int) {
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{d.cfg.schema}.Sanitize()+`.results WHERE queue = $1`, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if c := count(d.cfg.queue); c != 1 {
		t.Fatalf("%d records left; want the live one", c)
	}
	if c := count(other.cfg.queue); c != 1 {
		t.Fatal("the other queue's record was purged")
	}
}

func TestRemoveTasks(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("ready"), msg("flight"), msg("dead"), msg("expired"),
		{ID: "delayed", Body: []byte("x"), NotBefore: time.Now().Add(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, 3, time.Minute)
	if fmt.Sprint(ids(got)) != "[ready flight dead]" {
		t.Fatalf("received %v", ids(got))
	}
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: got[0].Lease}}); errs != nil {
		t.Fatal(errs)
	}
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: got[2].Lease, Reason: "x"}}); errs != nil {
		t.Fatal(errs)
	}
	receive(t, d, 2, time.Millisecond) // ready and expired, on a lease that runs out at once
	time.Sleep(5 * time.Millisecond)
	asked := []string{"ready", "flight", "dead", "expired", "delayed", "unknown"}
	var requested, cancelled []*driver.ResultRecord
	for _, id := range asked {
		requested = append(requested, rec(id, driver.ResultCancelRequested, time.Hour))
		cancelled = append(cancelled, rec(id, driver.ResultCancelled, time.Hour))
	}
	putResults(t, d, requested...)
	removed, _, err := d.RemoveTasks(ctx, cancelled, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if fmt.Sprint(removed) != "[delayed expired ready]" {
		t.Fatalf("removed %v; want ready, delayed and the expired lease's message", removed)
	}
	// The removal stored the removed tasks' records, and only theirs.
	recs := states(getResults(t, d, asked...))
	if want := "[cancelled cancel-requested cancel-requested cancelled cancelled cancel-requested]"; fmt.Sprint(recs) != want {
		t.Fatalf("records after remove = %v; want %s", recs, want)
	}
	s, err := d.Stats(ctx)
	if err != nil || s.Ready != 0 || s.Delayed != 0 || s.InFlight != 1 || s.Dead != 1 {
		t.Fatalf("stats after remove = %+v, %v; want flight in flight, dead dead", s, err)
	}
}

func TestWaitResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		listen string
		other  bool // the record is stored by another driver (process)
	}{
		{"same driver", "true", false},
		{"other driver, LISTEN", "true", true},
		{"other driver, polling", "false", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			waiter := openResults(t, "listen="+tt.listen, "poll=20ms")
			writer := waiter
			if tt.other {
				writer = openURL(t, newQueueURL(t, "queue="+waiter.cfg.queue))
			}
			ctx := ctxT(t)
			var wg sync.WaitGroup
			done := make(chan error, 1)
			wg.Go(func() {
				for {
					if err := waiter.WaitResults(ctx, []string{"w"}, time.Hour); err != nil {
						done <- err
						return
					}
					got, err := waiter.GetResults(ctx, []string{"w"})
					if err != nil || got[0] != nil {
						done <- err
						return
					}
				}
			})
			putResults(t, writer, rec("w", driver.ResultSucceeded, time.Hour))
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-ctx.Done():
				t.Fatal("WaitResults did not return after the record was stored")
			}
			wg.Wait()
			if err := waiter.WaitResults(ctx, []string{"none", "w"}, time.Hour); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestWaitResultsWokenBySettlement(t *testing.T) {
	t.Parallel()
	waiter := openResults(t, "poll=1h")
	worker := openURL(t, newQueueURL(t, "queue="+waiter.cfg.queue))
	ctx := ctxT(t)
	if _, err := worker.Push(ctx, []*driver.Message{msg("s")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, worker, 1, time.Minute)
	// Let the waiter's LISTEN connection come up (it polls every hour).
	for !waiter.listening.Load() {
		waiter.WaitResults(ctx, []string{"s"}, time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- waiter.WaitResults(ctx, []string{"s"}, time.Hour) }()
	if errs := worker.Complete(ctx, settletest.WithResults([]driver.Lease{got[0].Lease}, []*driver.ResultRecord{rec("s", driver.ResultSucceeded, time.Hour)})); errs != nil {
		t.Fatal(errs)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("a settlement with a record in another process did not wake the waiter")
	}
}

func TestWaitResultsTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	putResults(t, d, rec("c", driver.ResultCancelRequested, time.Hour))
	if err := d.WaitResults(ctxT(t), []string{"c"}, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	if err := d.WaitResults(ctx, []string{"c"}, time.Hour); errcode.Of(err) != errcode.Canceled {
		t.Fatalf("canceled wait: %v", err)
	}
}

// TestResultsTableAddedToExistingSchema opens a queue on a schema at the
// version before result records: the open migrates it, and its queued
// messages stay.
func TestResultsTableAddedToExistingSchema(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	if err := migrateSteps(ctx, pool, schema, migrations[:7]); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+pgx.Identifier{schema}.Sanitize()+`.messages (queue, task_id, body) VALUES ('old', 'kept', '\x00')`); err != nil {
		t.Fatal(err)
	}
	d := openResults(t, "schema="+schema, "queue=old")
	putResults(t, d, rec("kept", driver.ResultSucceeded, time.Hour))
	if s := states(getResults(t, d, "kept")); s[0] != "succeeded" {
		t.Fatalf("records on a migrated schema: %v", s)
	}
	got := receive(t, d, 1, time.Minute)
	if len(got) != 1 || got[0].ID != "kept" {
		t.Fatalf("the queued message did not survive the migration: %v", got)
	}
	var version int
	if err := pool.QueryRow(ctx, `SELECT max(version) FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations`).Scan(&version); err != nil || version != SchemaVersion {
		t.Fatalf("schema version %d, %v; want %d", version, err, SchemaVersion)
	}
}

// TestCompleteRecordsSameIDTwice: two settled messages whose records
// name the same task (a batch can hold them) store one record, the last.
func TestCompleteRecordsSameIDTwice(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	ctx := ctxT(t)
	if _, err := d.Push(ctx, []*driver.Message{msg("x1"), msg("x2")}); err != nil {
		t.Fatal(err)
	}
	got := receive(t, d, 2, time.Minute)
	first, last := rec("same", driver.ResultDeadLettered, time.Hour), rec("same", driver.ResultSucceeded, time.Hour)
	if errs := d.Complete(ctx, settletest.WithResults([]driver.Lease{got[0].Lease, got[1].Lease}, []*driver.ResultRecord{first, last})); errs != nil {
		t.Fatal(errs)
	}
	if s := states(getResults(t, d, "same")); s[0] != "succeeded" {
		t.Fatalf("record = %v; want the batch's last", s)
	}
}

// TestSettleOverExistingRecord: a settlement whose task has a record
// already (a cancel request, or an earlier run of the same task ID)
// replaces it: the plain insert meets it, and the statement runs again as
// an upsert, which later settlements then use at once.
func TestSettleOverExistingRecord(t *testing.T) {
	t.Parallel()
	for _, op := range []string{"complete", "dead-letter"} {
		t.Run(op, func(t *testing.T) {
			t.Parallel()
			d := openResults(t)
			ctx := ctxT(t)
			putResults(t, d, rec("a", driver.ResultCancelRequested, time.Hour), rec("b", driver.ResultSucceeded, time.Hour))
			if _, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b")}); err != nil {
				t.Fatal(err)
			}
			got := receive(t, d, 2, time.Minute)
			settle := func(r *driver.Received, st driver.ResultState) []error {
				recs := []*driver.ResultRecord{rec(r.ID, st, time.Hour)}
				if op == "complete" {
					return d.Complete(ctx, settletest.WithResults([]driver.Lease{r.Lease}, recs))
				}
				return d.DeadLetter(ctx, settletest.DeadWithResults([]driver.DeadLetterParams{{Lease: r.Lease, Reason: "x"}}, recs))
			}
			if d.recordsMet() {
				t.Fatal("a new driver starts with the upsert")
			}
			if errs := settle(got[0], driver.ResultCancelled); errs != nil {
				t.Fatal(errs)
			}
			if !d.recordsMet() {
				t.Fatal("the settlement did not meet the record")
			}
			if errs := settle(got[1], driver.ResultDeadLettered); errs != nil {
				t.Fatal(errs)
			}
			if s := states(getResults(t, d, "a", "b")); fmt.Sprint(s) != "[cancelled dead-lettered]" {
				t.Fatalf("records = %v", s)
			}
		})
	}
}

// TestResultsDataRoundTrip: each record of a batch keeps its own bytes,
// empty and binary ones included, through PutResults and the settlements.
func TestResultsDataRoundTrip(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	ctx := ctxT(t)
	datas := [][]byte{nil, {0, 0xff, 'x'}, []byte(strings.Repeat("é", 1000)), {}}
	check := func(prefix string) {
		t.Helper()
		var ids []string
		for i := range datas {
			ids = append(ids, fmt.Sprint(prefix, i))
		}
		got := getResults(t, d, ids...)
		for i, r := range got {
			if r == nil || !bytes.Equal(r.Data, datas[i]) {
				t.Fatalf("%s: record %d = %v; want data %q", prefix, i, r, datas[i])
			}
		}
	}
	recs := func(prefix string) []*driver.ResultRecord {
		var out []*driver.ResultRecord
		for i, data := range datas {
			r := rec(fmt.Sprint(prefix, i), driver.ResultSucceeded, time.Hour)
			r.Data = data
			out = append(out, r)
		}
		return out
	}
	putResults(t, d, recs("put")...)
	check("put")

	for _, op := range []string{"complete", "dead"} {
		var msgs []*driver.Message
		for i := range datas {
			msgs = append(msgs, msg(fmt.Sprint(op, i)))
		}
		if _, err := d.Push(ctx, msgs); err != nil {
			t.Fatal(err)
		}
		got := receive(t, d, len(msgs), time.Minute)
		var errs []error
		if op == "complete" {
			var leases []driver.Lease
			for _, r := range got {
				leases = append(leases, r.Lease)
			}
			errs = d.Complete(ctx, settletest.WithResults(leases, recs(op)))
		} else {
			var reqs []driver.DeadLetterParams
			for _, r := range got {
				reqs = append(reqs, driver.DeadLetterParams{Lease: r.Lease, Reason: "x"})
			}
			errs = d.DeadLetter(ctx, settletest.DeadWithResults(reqs, recs(op)))
		}
		if errs != nil {
			t.Fatal(errs)
		}
		check(op)
	}
}

// TestSettlementsPastTheNotifyBurst: settlements beyond the notification
// burst store their records without notifying inline, and a trailing
// notification still wakes a waiter in another process.
func TestSettlementsPastTheNotifyBurst(t *testing.T) {
	t.Parallel()
	waiter := openResults(t, "poll=1h")
	worker := openURL(t, newQueueURL(t, "queue="+waiter.cfg.queue))
	ctx := ctxT(t)
	const n = 3 * notifyBurst
	var msgs []*driver.Message
	for i := range n {
		msgs = append(msgs, msg(fmt.Sprint("m", i)))
	}
	if _, err := worker.Push(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	got := receive(t, worker, n, time.Minute)
	for !waiter.listening.Load() {
		waiter.WaitResults(ctx, []string{"none"}, time.Millisecond)
	}
	last := got[n-1].ID
	done := make(chan error, 1)
	go func() {
		for {
			if err := waiter.WaitResults(ctx, []string{last}, time.Hour); err != nil {
				done <- err
				return
			}
			if r, err := waiter.GetResults(ctx, []string{last}); err != nil || r[0] != nil {
				done <- err
				return
			}
		}
	}()
	for _, r := range got {
		if errs := worker.Complete(ctx, settletest.WithResults([]driver.Lease{r.Lease}, []*driver.ResultRecord{rec(r.ID, driver.ResultSucceeded, time.Hour)})); errs != nil {
			t.Fatal(errs)
		}
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	for i, s := range states(getResults(t, worker, ids...)) {
		if s != "succeeded" {
			t.Fatalf("record %d: %s", i, s)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the last settlement's record never woke the waiter")
	}
}

// TestPurgePlanUsesTheExpiryIndex: in the purge's transaction the look
// for expired records scans the expiry index (a bitmap scan, the only one
// a BRIN index serves), not the primary key, which would read every record
// of the queue, and the delete fetches the rows it was given by address.
func TestPurgePlanUsesTheExpiryIndex(t *testing.T) {
	t.Parallel()
	d := openResults(t)
	err := d.withBitmapScans(ctxT(t), func(tx pgx.Tx) error {
		plan := explainGeneric(t, tx, "COSTS OFF", d.rsql.purge.expired, "text, timestamptz, integer", expiredArgs(d))
		if !strings.Contains(plan, "Bitmap Index Scan on results_expiry") || strings.Contains(plan, "results_pkey") {
			t.Errorf("the look for expired records does not scan the expiry index alone:\n%s", plan)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The delete runs under the pool's settings.
	err = pgx.BeginFunc(ctxT(t), d.pool, func(tx pgx.Tx) error {
		plan := explainGeneric(t, tx, "COSTS OFF", d.rsql.purge.remove, "text, timestamptz, tid[]", expiredArgs(d)[:strings.LastIndex(expiredArgs(d), ",")]+", '{\"(0,1)\"}'")
		if strings.Contains(plan, "Index") || strings.Count(plan, "Tid Scan") != 2 {
			t.Errorf("the purge's delete does not fetch its rows by address alone:\n%s", plan)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
