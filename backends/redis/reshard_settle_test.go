package redis

import (
	"log/slog"
	"net/url"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestSettleDuringSlotMigrationKeepsRecord settles a task, with its result
// record and group tally, while the queue's slot is half moved to another
// master: the record's bucket not yet created (a record bucket is new
// every few minutes), or some of the keys the settlement writes already on
// the target. The settlement either takes effect whole or fails as
// Unavailable having changed nothing, and once the move is done its retry
// stores the record: the message is never deleted without its record
// (Redis stopped a script at the first key not on its node, after the
// deletions). It runs through a client opened from a URL and one given to
// New, which follows go-redis's ASK redirections to the importing node.
func TestSettleDuringSlotMigrationKeepsRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	base := startCluster(t)
	for _, tc := range []struct {
		name       string
		dead       bool     // dead-letter rather than complete
		capped     bool     // the tasks have a capped concurrency key
		sameBucket bool     // the task's record goes to the warm-up's bucket
		moved      []string // the key patterns moved before the settlement
		fromNew    bool     // a client given to New
	}{
		{name: "new bucket"},
		{name: "new bucket, dead letter", dead: true},
		{name: "buckets moved", moved: []string{"rb:*"}},
		{name: "bucket list moved", moved: []string{"rbs"}},
		{name: "message moved", moved: []string{"m:*"}},
		{name: "in-flight set moved", moved: []string{"inflight"}},
		{name: "group moved", moved: []string{"g:*"}},
		{name: "all but the buckets moved, dead letter", dead: true, moved: []string{"seq", "m:*", "inflight", "ids", "dead", "g:*", "groups"}},
		{name: "all but the buckets moved, New", fromNew: true, moved: []string{"seq", "m:*", "inflight", "ids", "g:*", "groups"}},
		{name: "buckets moved, New", fromNew: true, moved: []string{"rb:*"}},
		{name: "all moved, new bucket", moved: []string{"*"}},
		{name: "all moved, New", fromNew: true, sameBucket: true, moved: []string{"*"}},
		{name: "held-lease set moved", capped: true, sameBucket: true, moved: []string{"cin:*"}},
		{name: "all moved, new bucket, New", fromNew: true, moved: []string{"*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newQueueURL(t, base)
			d := openURL(t, u)
			if tc.fromNew {
				d = newOnCluster(t, u)
			}
			// A first task's record makes the bucket list and a bucket
			// exist; the second's retention puts its record in another,
			// unless sameBucket.
			warm, task := msg("warm", 0), msg("task", 0)
			warm.Group, task.Group = "g", "g"
			if tc.capped {
				if err := d.SetPolicy(testCtx(t), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 10}); err != nil {
					t.Fatal(err)
				}
				warm.ConcurrencyKey, task.ConcurrencyKey = "gpu", "gpu"
			}
			push(t, d, warm, task)
			recs := receive(t, d, 2, time.Hour)
			if len(recs) != 2 {
				t.Fatalf("claimed %d of 2 tasks", len(recs))
			}
			now := time.Now()
			settle := func(r *driver.Received, keep time.Duration) error {
				rec := &driver.ResultRecord{ID: r.ID, State: driver.ResultSucceeded, UpdatedAt: now, ExpiresAt: now.Add(keep), Data: []byte("done")}
				tally := driver.GroupTally{Group: "g", State: driver.GroupSucceeded}
				var errs []error
				if tc.dead {
					rec.State, tally.State = driver.ResultDeadLettered, driver.GroupDeadLettered
					errs = d.DeadLetter(testCtx(t), []driver.DeadLetterParams{{Lease: r.Lease, Reason: "failed", Result: rec, Tally: tally}})
				} else {
					errs = d.Complete(testCtx(t), []driver.CompleteParams{{Lease: r.Lease, Result: rec, Tally: tally}})
				}
				if errs != nil {
					return errs[0]
				}
				return nil
			}
			first, second := recs[0], recs[1]
			if first.ID != "warm" {
				first, second = second, first
			}
			if err := settle(first, 24*time.Hour); err != nil {
				t.Fatal(err)
			}

			move := startSlotMove(t, d)
			for _, p := range tc.moved {
				move.migrate(d.prefix + p)
			}
			keep := time.Hour
			if tc.sameBucket {
				keep = 24 * time.Hour
			}
			err := settle(second, keep)
			t.Logf("the settlement during the move: %v", err)
			if err != nil {
				wantCode(t, "a settlement during the move", err, errcode.Unavailable)
			}
			move.finish()
			if err != nil {
				if rerr := settle(second, keep); rerr != nil {
					t.Fatalf("the settlement retried after the move: %v (the attempt during it failed: %v)", rerr, err)
				}
			}
			got, rerr := d.GetResults(testCtx(t), []string{"task"})
			if rerr != nil {
				t.Fatal(rerr)
			}
			if len(got) != 1 || got[0] == nil || string(got[0].Data) != "done" {
				t.Fatalf("the task's record after the move: %+v, want the one its settlement stored", got)
			}
			g, gerr := d.GroupCounts(testCtx(t), "g")
			if gerr != nil || g == nil || g.Succeeded+g.DeadLettered != 2 {
				t.Fatalf("group counts after the move: %+v, %v; want both tasks counted", g, gerr)
			}
		})
	}
}

// TestCancelDuringSlotMigrationKeepsRecord cancels queued tasks while the
// queue's slot is half moved to another master: the removal either takes
// effect whole, with the tasks' cancelled records, or fails as
// Unavailable having removed nothing, and after the move it removes them
// with their records.
func TestCancelDuringSlotMigrationKeepsRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	base := startCluster(t)
	for _, tc := range []struct {
		name  string
		keep  time.Duration // the records' retention: 24h puts them in warm's bucket
		moved []string
	}{
		{name: "new bucket", keep: time.Hour},
		{name: "buckets moved", keep: 24 * time.Hour, moved: []string{"rb:*"}},
		{name: "second message moved", keep: 24 * time.Hour, moved: []string{"m:4"}},
		{name: "group moved", keep: 24 * time.Hour, moved: []string{"g:*"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openURL(t, newQueueURL(t, base))
			// warm's record makes the bucket list and a bucket exist, and
			// the delayed task the due set; a and b are messages 3 and 4.
			warm, later := msg("warm", 0), msg("later", 0)
			later.NotBefore = time.Now().Add(time.Hour)
			a, b := msg("a", 0), msg("b", 0)
			a.Group, b.Group = "g", "g"
			push(t, d, warm)
			now := time.Now()
			r := receive(t, d, 1, time.Hour)[0]
			if errs := d.Complete(testCtx(t), []driver.CompleteParams{{Lease: r.Lease,
				Result: &driver.ResultRecord{ID: r.ID, State: driver.ResultSucceeded, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}}}); errs != nil {
				t.Fatal(errs[0])
			}
			push(t, d, later, a, b)

			move := startSlotMove(t, d)
			for _, p := range tc.moved {
				move.migrate(d.prefix + p)
			}
			var recs []*driver.ResultRecord
			for _, id := range []string{"a", "b"} {
				recs = append(recs, &driver.ResultRecord{ID: id, State: driver.ResultCancelled, UpdatedAt: now, ExpiresAt: now.Add(tc.keep), Data: []byte("cancelled")})
			}
			removed, _, err := d.RemoveTasks(testCtx(t), recs, nil)
			t.Logf("the removal during the move: %v, %v", removed, err)
			if err != nil {
				wantCode(t, "a removal during the move", err, errcode.Unavailable)
			}
			move.finish()
			if err != nil {
				if removed, _, err = d.RemoveTasks(testCtx(t), recs, nil); err != nil {
					t.Fatal(err)
				}
			}
			if len(removed) != 2 {
				t.Fatalf("removed %v, want a and b", removed)
			}
			got, err := d.GetResults(testCtx(t), []string{"a", "b"})
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				if g == nil || g.State != driver.ResultCancelled {
					t.Errorf("the record of removed task %s: %+v, want it cancelled", recs[i].ID, g)
				}
			}
			g, gerr := d.GroupCounts(testCtx(t), "g")
			if gerr != nil || g == nil || g.Cancelled != 2 {
				t.Fatalf("group counts after the move: %+v, %v; want both tasks cancelled", g, gerr)
			}
		})
	}
}

// TestRequeueDuringSlotMigrationKeepsLease requeues a task while the
// in-flight set has moved to the target: the requeue fails as
// Unavailable having changed nothing (it dropped the lease, made the
// message ready, then stopped at the in-flight set), and after the move
// its retry makes the task ready once.
func TestRequeueDuringSlotMigrationKeepsLease(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	d := openURL(t, newQueueURL(t, startCluster(t)))
	push(t, d, msg("a", 0))
	r := receive(t, d, 1, time.Hour)[0]
	requeue := func() error {
		if errs := d.Requeue(testCtx(t), []driver.RequeueParams{{Lease: r.Lease}}); errs != nil {
			return errs[0]
		}
		return nil
	}
	move := startSlotMove(t, d)
	move.migrate(d.prefix + "inflight")
	err := requeue()
	if err != nil {
		wantCode(t, "a requeue during the move", err, errcode.Unavailable)
	}
	move.finish()
	if err != nil {
		if rerr := requeue(); rerr != nil {
			t.Fatalf("the requeue retried after the move: %v (the attempt during it failed: %v)", rerr, err)
		}
	}
	if s := stats(t, d); s.Ready != 1 || s.InFlight != 0 {
		t.Fatalf("after the requeue: %+v, want the task ready once", s)
	}
}

// TestPutResultsDuringSlotMigration stores a record while the queue's
// bucket list has moved to the target: the call fails as Unavailable
// having stored nothing (it wrote the record into its bucket, then stopped
// at the list, leaving the bucket without a reader who finds it), and its
// retry after the move stores it.
func TestPutResultsDuringSlotMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	d := openURL(t, newQueueURL(t, startCluster(t)))
	push(t, d, msg("a", 0)) // the counter, which every call declares, exists
	now := time.Now()
	rec := func(id string) *driver.ResultRecord {
		return &driver.ResultRecord{ID: id, State: driver.ResultSucceeded, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour), Data: []byte(id)}
	}
	if err := d.PutResults(testCtx(t), []*driver.ResultRecord{rec("warm")}); err != nil {
		t.Fatal(err)
	}
	move := startSlotMove(t, d)
	move.migrate(d.prefix + "rbs")
	err := d.PutResults(testCtx(t), []*driver.ResultRecord{rec("task")})
	if err != nil {
		wantCode(t, "a record stored during the move", err, errcode.Unavailable)
		name, _ := bucketOf(now.Add(24*time.Hour), 24*time.Hour)
		if n := move.src.HExists(testCtx(t), d.prefix+"rb:"+name, "task").Val(); n {
			t.Fatalf("the failed call stored the record in bucket %s, which the bucket list (on the other node) does not name", name)
		}
	}
	move.finish()
	if err != nil {
		if err := d.PutResults(testCtx(t), []*driver.ResultRecord{rec("task")}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := d.GetResults(testCtx(t), []string{"task"})
	if err != nil || len(got) != 1 || got[0] == nil || string(got[0].Data) != "task" {
		t.Fatalf("the record after the move: %+v, %v", got, err)
	}
}

// newOnCluster opens the queue of URL u (on a cluster) through New, with
// a cluster client of the test's.
func newOnCluster(t *testing.T, u string) *Driver {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: append([]string{pu.Host}, pu.Query()["addr"]...)})
	t.Cleanup(func() { c.Close() })
	d, err := New(testCtx(t), c, Options{Queue: pu.Query().Get("queue"), Prefix: pu.Query().Get("prefix"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
