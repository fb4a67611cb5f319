package redis

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/settletest"
)

func record(id string, state driver.ResultState, keep time.Duration) *driver.ResultRecord {
	now := time.Now()
	return &driver.ResultRecord{ID: id, State: state, UpdatedAt: now, ExpiresAt: now.Add(keep), Data: []byte(`{"v":"` + id + `"}`)}
}

func getResults(t *testing.T, d *Driver, ids ...string) []*driver.ResultRecord {
	t.Helper()
	got, err := d.GetResults(testCtx(t), ids)
	if err != nil {
		t.Fatalf("get results: %v", err)
	}
	if len(got) != len(ids) {
		t.Fatalf("get results: %d records for %d ids", len(got), len(ids))
	}
	return got
}

func TestRecordEncodingRoundTrips(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rec  *driver.ResultRecord
	}{
		{"plain", record("a", driver.ResultSucceeded, time.Hour)},
		{"ID with newlines and digits", record("12\n34\n", driver.ResultSucceeded, time.Hour)},
		{"binary data with newlines", &driver.ResultRecord{ID: "b", State: driver.ResultDeadLettered,
			UpdatedAt: time.UnixMilli(1000), ExpiresAt: time.UnixMilli(2000), Data: []byte("x\ny\x00\n")}},
		{"empty data", &driver.ResultRecord{ID: "c", State: driver.ResultCancelled, UpdatedAt: time.UnixMilli(5), ExpiresAt: time.UnixMilli(6)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := decodeRecord(tt.rec.ID, appendRecord(nil, tt.rec))
			if !ok {
				t.Fatal("decode failed")
			}
			if got.State != tt.rec.State || !bytes.Equal(got.Data, tt.rec.Data) ||
				got.UpdatedAt.UnixMilli() != tt.rec.UpdatedAt.UnixMilli() || got.ExpiresAt.UnixMilli() != tt.rec.ExpiresAt.UnixMilli() {
				t.Fatalf("round trip: got %+v, want %+v", got, tt.rec)
			}
		})
	}
	for _, bad := range []string{"not a record", "", "000001y", "000001x", "000009x"} {
		if _, ok := decodeRecord("x", []byte(bad)); ok {
			t.Fatalf("decoded %q, which jobq did not write for task x", bad)
		}
	}
}

func TestPutGetResultsAndCancelRequestedInsertIfAbsent(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	if err := d.PutResults(ctx, []*driver.ResultRecord{
		record("done", driver.ResultSucceeded, time.Hour),
		record("asked", driver.ResultCancelRequested, time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	// A cancel request must not hide an end; a second one changes nothing;
	// an end replaces a cancel request.
	late := record("done", driver.ResultCancelRequested, time.Hour)
	again := record("asked", driver.ResultCancelRequested, time.Hour)
	again.Data = []byte("second")
	if err := d.PutResults(ctx, []*driver.ResultRecord{late, again}); err != nil {
		t.Fatal(err)
	}
	got := getResults(t, d, "done", "asked", "unknown")
	if got[0] == nil || got[0].State != driver.ResultSucceeded {
		t.Fatalf("done: %+v, want succeeded", got[0])
	}
	if got[1] == nil || got[1].State != driver.ResultCancelRequested || string(got[1].Data) != `{"v":"asked"}` {
		t.Fatalf("asked: %+v, want the first cancel request", got[1])
	}
	if got[2] != nil {
		t.Fatalf("unknown: %+v, want nil", got[2])
	}
	if err := d.PutResults(ctx, []*driver.ResultRecord{record("asked", driver.ResultCancelled, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := getResults(t, d, "asked"); got[0] == nil || got[0].State != driver.ResultCancelled {
		t.Fatalf("asked after the end: %+v, want cancelled", got[0])
	}
}

func TestRecordsExpireInRedis(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	r := record("brief", driver.ResultSucceeded, 300*time.Millisecond)
	if err := d.PutResults(ctx, []*driver.ResultRecord{r}); err != nil {
		t.Fatal(err)
	}
	name, at := bucketOf(r.ExpiresAt, 300*time.Millisecond)
	ttl, err := d.client.PTTL(ctx, d.prefix+"rb:"+name).Result()
	if err != nil || ttl <= 0 || time.Now().Add(ttl).After(time.UnixMilli(at).Add(time.Second)) {
		t.Fatalf("record bucket TTL %v (%v), want the bucket's expiry %v", ttl, err, time.UnixMilli(at))
	}
	if got := getResults(t, d, "brief"); got[0] == nil {
		t.Fatal("record not found before it expired")
	}
	for time.Now().Before(r.ExpiresAt) {
		time.Sleep(50 * time.Millisecond)
	}
	// The bucket outlives the record by up to a span; the record is hidden.
	if got := getResults(t, d, "brief"); got[0] != nil {
		t.Fatalf("expired record returned: %+v", got[0])
	}
	if n, err := d.PurgeResults(ctx, time.Now()); n != 0 || err != nil {
		t.Fatalf("purge: %d, %v; want 0, nil (Redis expires records)", n, err)
	}
	// An expired record is not stored at all.
	if err := d.PutResults(ctx, []*driver.ResultRecord{record("past", driver.ResultSucceeded, -time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got := getResults(t, d, "past"); got[0] != nil {
		t.Fatalf("expired record returned: %+v", got[0])
	}
}

func TestBucketOf(t *testing.T) {
	t.Parallel()
	base := time.UnixMilli(1_700_000_000_123)
	tests := []struct {
		keep time.Duration
		span time.Duration
	}{
		{time.Second, time.Minute},
		{7 * 24 * time.Hour, 7 * 24 * time.Hour / bucketSpans},
		{2 * 24 * time.Hour, 3 * time.Hour},
	}
	for _, tt := range tests {
		for _, exp := range []time.Time{base, base.Add(time.Millisecond), base.Add(tt.span)} {
			name, at := bucketOf(exp, tt.keep)
			end := time.UnixMilli(at)
			if end.Before(exp) || end.After(exp.Add(tt.span+time.Second)) {
				t.Errorf("bucketOf(%v, %v) = %s expiring %v: not within a span after the record", exp, tt.keep, name, end)
			}
		}
		a, _ := bucketOf(base, tt.keep)
		b, _ := bucketOf(base.Add(tt.span/2), tt.keep)
		c, _ := bucketOf(base.Add(2*tt.span), tt.keep)
		if a == c || (a != b && b == c) {
			t.Errorf("keep %v: buckets %s %s %s do not follow the spans", tt.keep, a, b, c)
		}
	}
}

// TestRecordsAcrossBuckets: a cancel request and the end written with
// different retentions land in different buckets; the end wins, and a
// cancel request still never hides it.
func TestRecordsAcrossBuckets(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	if err := d.PutResults(ctx, []*driver.ResultRecord{record("x", driver.ResultCancelRequested, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutResults(ctx, []*driver.ResultRecord{record("x", driver.ResultCancelled, 48*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := d.PutResults(ctx, []*driver.ResultRecord{record("x", driver.ResultCancelRequested, 96*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := getResults(t, d, "x"); got[0] == nil || got[0].State != driver.ResultCancelled {
		t.Fatalf("record %+v, want cancelled", got[0])
	}
	n, err := d.client.ZCard(ctx, d.prefix+"rbs").Result()
	if err != nil || n != 2 {
		t.Fatalf("%d buckets (%v), want 2", n, err)
	}
}

func TestSettleWithResultsIsAtomic(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	push(t, d, msg("ok", 0), msg("dead", 0), msg("lost", 0), msg("none", 0))
	recs := receive(t, d, 4, time.Minute)
	if len(recs) != 4 {
		t.Fatalf("received %d, want 4", len(recs))
	}
	by := map[string]driver.Lease{}
	for _, r := range recs {
		by[r.ID] = r.Lease
	}
	lost := by["lost"]
	lost.Token = "not-the-token"
	ctx := testCtx(t)
	errs := d.Complete(ctx, settletest.WithResults([]driver.Lease{by["ok"], lost, by["none"]}, []*driver.ResultRecord{
		record("ok", driver.ResultSucceeded, time.Hour), record("lost", driver.ResultSucceeded, time.Hour), nil,
	}))
	if errs == nil || errs[0] != nil || errcode.Of(errs[1]) != errcode.LockLost || errs[2] != nil {
		t.Fatalf("complete errors %v, want nil, LockLost, nil", errs)
	}
	if errs := d.DeadLetter(ctx, settletest.DeadWithResults([]driver.DeadLetterParams{{Lease: by["dead"], Reason: "boom"}}, []*driver.ResultRecord{record("dead", driver.ResultDeadLettered, time.Hour)})); errs != nil {
		t.Fatalf("dead-letter: %v", errs)
	}
	got := getResults(t, d, "ok", "dead", "lost", "none")
	if got[0] == nil || got[0].State != driver.ResultSucceeded || got[1] == nil || got[1].State != driver.ResultDeadLettered {
		t.Fatalf("records %+v %+v, want succeeded and dead-lettered", got[0], got[1])
	}
	if got[2] != nil || got[3] != nil {
		t.Fatalf("a record was stored without its settlement (%+v) or without a record (%+v)", got[2], got[3])
	}
	if s := stats(t, d); s.InFlight != 1 || s.Dead != 1 {
		t.Fatalf("stats %+v, want the lost lease in flight and one dead letter", s)
	}
}

func TestWaitResultsWakesOnSettlement(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	// The first call subscribes and returns at once.
	if err := d.WaitResults(ctx, []string{"w"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	push(t, d, msg("w", 0))
	r := receive(t, d, 1, time.Minute)
	done := make(chan error, 1)
	go func() { done <- d.WaitResults(ctx, []string{"other", "w"}, time.Minute) }()
	for d.resultWake.count() == 0 {
		time.Sleep(time.Millisecond)
	}
	if errs := d.Complete(ctx, settletest.WithResults([]driver.Lease{r[0].Lease}, []*driver.ResultRecord{record("w", driver.ResultSucceeded, time.Hour)})); errs != nil {
		t.Fatal(errs)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A record announced before the waiter registered is not missed.
	if err := d.PutResults(ctx, []*driver.ResultRecord{record("early", driver.ResultCancelled, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for !d.resultWake.remembers("early") {
		time.Sleep(time.Millisecond)
	}
	if err := d.WaitResults(ctx, []string{"early"}, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func TestRemoveTasks(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	later := msg("delayed", 0)
	later.NotBefore = time.Now().Add(time.Hour)
	push(t, d, msg("ready", 3), later, msg("held", 0), msg("requeued", 0), msg("dead", 0), msg("kept", 0))
	recs := receive(t, d, 4, time.Minute) // ready (priority 3), held, requeued, dead
	by := map[string]driver.Lease{}
	for _, r := range recs {
		by[r.ID] = r.Lease
	}
	if _, ok := by["ready"]; !ok {
		t.Fatalf("received %v, want ready among them", recs)
	}
	// Put ready and requeued back (new ready members), dead-letter dead.
	if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: by["ready"]}, {Lease: by["requeued"]}}); errs != nil {
		t.Fatal(errs)
	}
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: by["dead"], Reason: "x"}}); errs != nil {
		t.Fatal(errs)
	}
	asked := []string{"ready", "delayed", "held", "requeued", "dead", "unknown"}
	var requested, cancelled []*driver.ResultRecord
	for _, id := range asked {
		requested = append(requested, record(id, driver.ResultCancelRequested, time.Hour))
		// A longer retention puts the end in another bucket than the request.
		cancelled = append(cancelled, record(id, driver.ResultCancelled, 48*time.Hour))
	}
	if err := d.PutResults(ctx, requested); err != nil {
		t.Fatal(err)
	}
	got, _, err := d.RemoveTasks(ctx, cancelled, nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if want := []string{"delayed", "ready", "requeued"}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	// The removal stored the removed tasks' records, and only theirs.
	var states []driver.ResultState
	for _, r := range getResults(t, d, asked...) {
		states = append(states, r.State)
	}
	if want := "[cancelled cancelled cancel-requested cancelled cancel-requested cancel-requested]"; fmt.Sprint(states) != want {
		t.Fatalf("records after remove = %v; want %s", states, want)
	}
	if s := stats(t, d); s.Ready != 1 || s.Delayed != 0 || s.InFlight != 1 || s.Dead != 1 {
		t.Fatalf("stats after remove %+v, want kept ready, held in flight, one dead", s)
	}
	// The removed IDs are free again: pushing one queues a new task.
	if res := push(t, d, msg("ready", 0)); res[0].Duplicate {
		t.Fatal("a removed task's ID still dedups")
	}
}

// TestSettleScriptReadsTheRecordsID: the complete script takes each
// record's task ID from the record itself, whatever its bytes.
func TestSettleScriptReadsTheRecordsID(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ids := []string{"a\nb", "000003", "\x00{x}"}
	for _, id := range ids {
		push(t, d, msg(id, 0))
	}
	recs := receive(t, d, len(ids), time.Minute)
	leases := make([]driver.Lease, len(recs))
	rr := make([]*driver.ResultRecord, len(recs))
	for i, r := range recs {
		leases[i] = r.Lease
		rr[i] = record(r.ID, driver.ResultSucceeded, time.Hour)
	}
	if errs := d.Complete(testCtx(t), settletest.WithResults(leases, rr)); errs != nil {
		t.Fatal(errs)
	}
	for i, g := range getResults(t, d, ids...) {
		if g == nil || g.ID != ids[i] || g.State != driver.ResultSucceeded {
			t.Fatalf("record of %q: %+v", ids[i], g)
		}
	}
}

// TestPutManyResults: a batch larger than one script call takes (Cancel of
// many tasks) is stored in chunks.
func TestPutManyResults(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	const n = 3*chunkSize + 7
	recs := make([]*driver.ResultRecord, n)
	ids := make([]string, n)
	for i := range recs {
		ids[i] = fmt.Sprintf("many-%d", i)
		recs[i] = record(ids[i], driver.ResultCancelRequested, time.Hour)
	}
	if err := d.PutResults(testCtx(t), recs); err != nil {
		t.Fatal(err)
	}
	for i, g := range getResults(t, d, ids...) {
		if g == nil || g.State != driver.ResultCancelRequested {
			t.Fatalf("record %d: %+v", i, g)
		}
	}
}

// Not parallel: testing.AllocsPerRun counts the whole process's allocations.
func TestRecordArgsAllocateNothingPerRecord(t *testing.T) {
	recs := make([]*driver.ResultRecord, 200)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("task-%d", i), driver.ResultSucceeded, time.Hour)
	}
	rs := prepareAll(recs)
	allocs := func(n int) float64 {
		return testing.AllocsPerRun(20, func() {
			if _, tail := rs.args(0, n); len(tail) != 2*n {
				t.Fatalf("%d tail arguments for %d records, want %d", len(tail), n, 2*n)
			}
		})
	}
	if per := (allocs(200) - allocs(1)) / 199; per > 0.1 {
		t.Errorf("%.2f allocations per record, want none (the ID and encoding go in as pointers)", per)
	}
}

// Not parallel: testing.AllocsPerRun counts the whole process's allocations.
func TestPrepareSharesOneBufferAmongRecords(t *testing.T) {
	recs := make([]*driver.ResultRecord, 100)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("task-%d", i), driver.ResultSucceeded, time.Hour)
		recs[i].Data = bytes.Repeat([]byte{byte('a' + i%26)}, i)
	}
	rs := prepareAll(recs)
	if rs.n != len(recs) {
		t.Fatalf("prepared %d records, want %d", rs.n, len(recs))
	}
	for i, v := range rs.vals {
		if cap(v) != len(v) {
			t.Fatalf("record %d: capacity %d beyond its length %d: an append to it would overwrite the next", i, cap(v), len(v))
		}
		got, ok := decodeRecord(rs.ids[i], v)
		if !ok || !bytes.Equal(got.Data, recs[i].Data) || got.State != recs[i].State {
			t.Fatalf("record %d decodes to %+v (ok %v), want %+v", i, got, ok, recs[i])
		}
	}
	// A few (the IDs, the values, the one buffer), not one per record.
	if n := testing.AllocsPerRun(10, func() { prepareAll(recs) }); n > 10 {
		t.Errorf("prepare of %d records allocates %v times; want a few, not one per record", len(recs), n)
	}
}
