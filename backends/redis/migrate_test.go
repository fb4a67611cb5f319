package redis

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// slotMove moves the hash slot of one queue from the master that owns it
// to another, key by key, as resharding does (CLUSTER SETSLOT IMPORTING
// and MIGRATING, MIGRATE, SETSLOT NODE).
type slotMove struct {
	t        testing.TB
	slot     int64
	src, dst *goredis.Client
	dstAddr  string
	all      []*goredis.Client // every master
}

// startSlotMove puts the slot of d's queue, on a cluster, in the migrating
// state towards another master.
func startSlotMove(t testing.TB, d *Driver) *slotMove {
	t.Helper()
	ctx := testCtx(t)
	var cc *goredis.ClusterClient
	if !d.As(&cc) {
		t.Fatal("the queue is not on a cluster")
	}
	owner, err := cc.MasterForKey(ctx, d.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	m := &slotMove{t: t}
	if m.slot, err = owner.ClusterKeySlot(ctx, d.keys[0]).Result(); err != nil {
		t.Fatal(err)
	}
	m.all = masters(t, cc)
	for _, n := range m.all {
		switch {
		case n.Options().Addr == owner.Options().Addr:
			m.src = n
		case m.dst == nil:
			m.dst, m.dstAddr = n, n.Options().Addr
		}
	}
	if m.src == nil || m.dst == nil {
		t.Fatalf("found no two masters among %d", len(m.all))
	}
	srcID, dstID := m.src.ClusterMyID(ctx).Val(), m.dst.ClusterMyID(ctx).Val()
	m.must(m.dst.Do(ctx, "CLUSTER", "SETSLOT", m.slot, "IMPORTING", srcID).Err())
	m.must(m.src.Do(ctx, "CLUSTER", "SETSLOT", m.slot, "MIGRATING", dstID).Err())
	return m
}

// masters returns the masters in the client's slot map. ForEachMaster
// calls its function on every master at once, so the list is appended to
// under a lock (without one, CI once lost two of the three).
func masters(t testing.TB, cc *goredis.ClusterClient) []*goredis.Client {
	t.Helper()
	var (
		mu  sync.Mutex
		all []*goredis.Client
	)
	err := cc.ForEachMaster(testCtx(t), func(ctx context.Context, n *goredis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		all = append(all, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func (m *slotMove) must(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

// migrate moves the slot's keys that match the glob pattern to the target.
func (m *slotMove) migrate(pattern string) {
	m.t.Helper()
	ctx := testCtx(m.t)
	keys, err := m.src.ClusterGetKeysInSlot(ctx, int(m.slot), 1<<20).Result()
	m.must(err)
	host, port, _ := strings.Cut(m.dstAddr, ":")
	for _, k := range keys {
		if ok, _ := path.Match(pattern, k); ok {
			m.must(m.src.Migrate(ctx, host, port, k, 0, 5*time.Second).Err())
		}
	}
}

// finish moves the rest of the slot's keys and gives the slot to the
// target on every master, in the order Redis's CLUSTER SETSLOT documents:
// the target first (its config epoch rises, so its claim wins over older
// gossip), then the source, then the others.
func (m *slotMove) finish() {
	m.t.Helper()
	m.migrate("*")
	ctx := testCtx(m.t)
	dstID := m.dst.ClusterMyID(ctx).Val()
	order := []*goredis.Client{m.dst, m.src}
	for _, c := range m.all {
		if c != m.dst && c != m.src {
			order = append(order, c)
		}
	}
	for _, c := range order {
		m.must(c.Do(ctx, "CLUSTER", "SETSLOT", m.slot, "NODE", dstID).Err())
	}
}

// TestClaimDuringSlotMigrationKeepsMessages claims while the queue's slot
// is half moved to another master: the messages whose hashes have moved
// stay ready (the claim fails as Unavailable when it leased none), and once
// the move is done every message is claimed once.
func TestClaimDuringSlotMigrationKeepsMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	base := startCluster(t)
	for _, tc := range []struct {
		name  string
		moved string // the message hashes moved before the claim
	}{
		{"every hash moved", "m:*"},
		{"odd hashes moved", "m:*[13579]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openURL(t, newQueueURL(t, base))
			const n = 20
			var msgs []*driver.Message
			for i := range n {
				msgs = append(msgs, msg(fmt.Sprint(i), 0))
			}
			// A delayed message and a policy make the due set and the
			// policy key exist, so that the claim gets as far as the ready
			// messages (a script stops at the first key of a migrating
			// slot that is not on its node).
			later := msg("later", 0)
			later.NotBefore = time.Now().Add(time.Hour)
			push(t, d, append(msgs, later)...)
			if err := d.SetPolicy(testCtx(t), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 100}); err != nil {
				t.Fatal(err)
			}

			move := startSlotMove(t, d)
			move.migrate(d.prefix + tc.moved)
			recs, err := d.Receive(testCtx(t), driver.ReceiveParams{Max: n, Visibility: time.Minute})
			if len(recs) == 0 {
				wantCode(t, "a claim that leased nothing", err, errcode.Unavailable)
			} else if err != nil {
				t.Fatalf("claim: %v", err)
			}
			move.finish()

			seen := map[string]int{}
			for _, r := range recs {
				seen[r.ID]++
			}
			for _, r := range receive(t, d, 2*n, time.Minute) {
				seen[r.ID]++
			}
			for _, m := range msgs {
				if seen[m.ID] != 1 {
					t.Errorf("task %s claimed %d times, want once", m.ID, seen[m.ID])
				}
			}
		})
	}
}

// TestCallsDuringSlotMigrationAreUnavailable pushes and reads counts while
// the queue's slot is moving to another master, before any key has moved:
// the scripts stop at the keys Redis will not create or read on either
// node, and the calls fail as Unavailable (which the portable layer and
// the worker retry), having stored nothing; after the move they work.
func TestCallsDuringSlotMigrationAreUnavailable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	d := openURL(t, newQueueURL(t, startCluster(t)))
	push(t, d, msg("before", 0))
	move := startSlotMove(t, d)
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"push of one", func(ctx context.Context) error {
			_, err := d.Push(ctx, []*driver.Message{msg("one", 0)})
			return err
		}},
		{"push of two", func(ctx context.Context) error {
			_, err := d.Push(ctx, []*driver.Message{msg("two", 0), msg("three", 0)})
			return err
		}},
		{"stats", func(ctx context.Context) error {
			_, err := d.Stats(ctx)
			return err
		}},
	} {
		wantCode(t, tc.name, tc.call(testCtx(t)), errcode.Unavailable)
	}
	move.finish()
	push(t, d, msg("after", 0))
	if s := stats(t, d); s.Ready != 2 {
		t.Fatalf("after the move: %d ready, want 2 (before and after)", s.Ready)
	}
}

// TestNoScriptOnImportingNode moves the queue's counter, the key every
// script declares, to the importing master first. go-redis follows the
// ASK redirection there; a script run on that node would see the keys
// still on the migrating one as empty: the claim found no task although
// one was ready (a worker then stops, the queue "empty"), and created keys
// there that the move could not migrate afterwards (BUSYKEY: the reshard
// stopped half done). The claim fails as Unavailable instead, the move
// completes, and the task is claimed after it.
func TestNoScriptOnImportingNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	u := newQueueURL(t, startCluster(t))
	d, other := openURL(t, u), openURL(t, u)
	waiting := driver.ReceiveParams{Max: 5, Visibility: time.Minute, Wait: time.Millisecond}
	// Two handles wait on the empty queue; a push of one task wakes one of
	// them, and the other stays in the waiters set.
	for _, h := range []*Driver{d, other} {
		if _, err := h.Receive(testCtx(t), waiting); err != nil {
			t.Fatal(err)
		}
	}
	push(t, d, msg("a", 0))

	move := startSlotMove(t, d)
	move.migrate(d.prefix + "seq")
	recs, err := d.Receive(testCtx(t), waiting)
	if len(recs) > 0 {
		t.Fatalf("claimed %d messages on the importing node", len(recs))
	}
	wantCode(t, "a claim sent to the importing node", err, errcode.Unavailable)
	move.finish()
	if recs := receive(t, d, 5, time.Minute); len(recs) != 1 || recs[0].ID != "a" {
		t.Fatalf("after the move: claimed %d messages, want task a", len(recs))
	}
}

// TestPlainClientOnClusterNodeAsksForClusterTrue opens queues on one node
// of a cluster without cluster=true. A queue whose slot is on another
// node fails to open, and one whose slot moves away afterwards fails its
// next call, with InvalidArgument naming cluster=true (not an Unavailable
// MOVED error, retried in vain).
func TestPlainClientOnClusterNodeAsksForClusterTrue(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	base := startCluster(t)
	// plain is the queue's URL on the first seed, without cluster=true.
	plain := func(raw string) *url.URL {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Del("cluster")
		q.Del("addr")
		u.RawQuery = q.Encode()
		return u
	}
	var local string
	elsewhere := false
	for i := 0; i < 40 && (local == "" || !elsewhere); i++ {
		u := newQueueURL(t, base)
		d, err := (&Opener{}).Open(testCtx(t), plain(u), driver.OpenOptions{})
		if err == nil {
			d.Close()
			local = u
			continue
		}
		elsewhere = true
		wantCode(t, "open of a queue on another node", err, errcode.InvalidArgument)
		if !strings.Contains(err.Error(), "cluster=true") {
			t.Errorf("the open error does not name cluster=true: %v", err)
		}
	}
	if local == "" || !elsewhere {
		t.Fatalf("of 40 queues, none was on the seed node or none elsewhere (found one there: %v)", local != "")
	}
	// A queue on the seed's slot works through the plain client until
	// the slot moves.
	d := openURL(t, plain(local).String())
	push(t, d, msg("a", 0))
	startSlotMove(t, openURL(t, local)).finish()
	_, err := d.Push(testCtx(t), []*driver.Message{msg("b", 0)})
	wantCode(t, "a push after the slot moved away", err, errcode.InvalidArgument)
}
