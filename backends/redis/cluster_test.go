package redis

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// startCluster starts a three-master Redis Cluster of private servers and
// returns its seed URL (cluster=true, every node an addr).
func startCluster(t *testing.T) string {
	t.Helper()
	base, _ := startClusterReplicas(t, 0)
	return base
}

// startClusterReplicas starts a three-master Redis Cluster with replicas
// replicas per master, which take over a master that fails within a
// second, and returns its seed URL (the masters) and its servers.
func startClusterReplicas(t *testing.T, replicas int) (string, []*server) {
	t.Helper()
	var addrs []string
	var servers []*server
	conf := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}
	if replicas > 0 {
		conf = append(conf, "--cluster-node-timeout", "1000")
	}
	for range 3 * (1 + replicas) {
		s := startServer(t, conf...)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", s.port))
		servers = append(servers, s)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := testCtx(t)
	for i, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if i >= 3 && err == nil {
				// A replica that has not synced with its master yet cannot
				// take over from it.
				var repl string
				repl, err = c.Info(ctx, "replication").Result()
				if err == nil && !strings.Contains(repl, "master_link_status:up") {
					info = ""
				}
			}
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("cluster node %s did not reach cluster_state:ok: %v", a, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return "redis://" + addrs[0] + "/?cluster=true&addr=" + addrs[1] + "&addr=" + addrs[2], servers
}

// TestConformanceCluster runs the shared suite against a Redis Cluster: a
// queue's keys share the hash tag {queue}, so every script runs on the one
// master that owns the queue's slot.
func TestConformanceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	base := startCluster(t)
	conformance.Run(t, conformance.Harness{
		Name:        "redis-cluster",
		NewQueueURL: func(t testing.TB) string { return newQueueURL(t, base) },
		PushRaw:     conformance.RawPusher(&Opener{}),
	})
}

// TestClusterQueuesSpreadOverMasters checks that different queues land on
// different masters and each works there, pushing and claiming in batches
// (which pipeline several scripts). Queue names are random, so six of them
// all hash to one of the three masters once in 243 runs; it goes on with
// more queues until two masters are seen (30 at most: one chance in 10^14
// of a false failure).
func TestClusterQueuesSpreadOverMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	base := startCluster(t)
	ctx := context.Background()
	masters := map[string]bool{}
	for q := 0; q < 6 || (len(masters) < 2 && q < 30); q++ {
		d := openURL(t, newQueueURL(t, base))
		var cc *goredis.ClusterClient
		if !d.As(&cc) {
			t.Fatal("As(**ClusterClient) failed on a cluster queue")
		}
		node, err := cc.MasterForKey(ctx, d.keys[0])
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
		var msgs []*driver.Message
		for i := range 600 {
			msgs = append(msgs, msg(fmt.Sprint(q, "-", i), 0))
		}
		push(t, d, msgs...)
		recs := receive(t, d, maxReceiveBatch, time.Minute)
		leases := make([]driver.Lease, len(recs))
		for i, r := range recs {
			leases[i] = r.Lease
		}
		if len(recs) != 600 {
			t.Fatalf("queue %d: received %d of 600", q, len(recs))
		}
		if errs := d.Complete(ctx, driver.Completions(leases...)); errs != nil {
			t.Fatalf("queue %d: complete: %v", q, errs[0])
		}
	}
	if len(masters) < 2 {
		t.Fatalf("30 queues all landed on %v; expected the hash tags to spread them", masters)
	}
}

// TestClusterFailoverFollowsPromotedReplica kills the master of a queue's
// slot; once its replica has taken over, a call that still went to the
// dead master fails as Unavailable and makes the client reload the slot
// map, so that the next call reaches the new master (go-redis alone would
// keep dialing the dead one until its next reload, up to a minute later).
func TestClusterFailoverFollowsPromotedReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a six-node Redis Cluster")
	}
	t.Parallel()
	base, servers := startClusterReplicas(t, 1)
	d := openURL(t, newQueueURL(t, base))
	push(t, d, msg("a", 0))
	var cc *goredis.ClusterClient
	d.As(&cc)
	ctx := testCtx(t)
	owner, err := cc.MasterForKey(ctx, d.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	// Replication is asynchronous: a master killed right after the push
	// may take it with it (CI saw the claim after the failover find
	// nothing). What this test checks is the client's way to the new
	// master, so the push is on the replica first.
	if n, err := owner.Wait(ctx, 1, 10*time.Second).Result(); err != nil || n < 1 {
		t.Fatalf("WAIT for the replica to have the push: %d replicas, %v", n, err)
	}
	var dead *server
	for _, s := range servers {
		if owner.Options().Addr == fmt.Sprintf("127.0.0.1:%d", s.port) {
			dead = s
		}
	}
	dead.kill()
	// Wait for a replica to own the slot, as another master sees it.
	var watch *server
	for _, s := range servers[:3] {
		if s != dead {
			watch = s
		}
	}
	wc := watch.client()
	slot, err := wc.ClusterKeySlot(ctx, d.keys[0]).Result()
	if err != nil {
		t.Fatal(err)
	}
	for !promoted(t, wc, slot, dead.port) {
		if ctx.Err() != nil {
			t.Fatalf("no replica took over the slot; the cluster's nodes: %s", wc.ClusterNodes(context.Background()).Val())
		}
		time.Sleep(50 * time.Millisecond)
	}
	recs, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute})
	if err != nil {
		wantCode(t, "a claim sent to the dead master", err, errcode.Unavailable)
		if recs, err = d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute}); err != nil {
			t.Fatalf("the claim after a failed one fails too: %v", err)
		}
	}
	if len(recs) != 1 || recs[0].ID != "a" {
		t.Fatalf("claimed %d messages after the failover, want task a", len(recs))
	}
}

// promoted tells whether, as node c sees it, a master other than the one
// on port old serves slot.
func promoted(t *testing.T, c *goredis.Client, slot int64, old int) bool {
	t.Helper()
	shards, err := c.ClusterShards(testCtx(t)).Result()
	if err != nil {
		return false
	}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			if r.Start > slot || slot > r.End {
				continue
			}
			for _, n := range sh.Nodes {
				if n.Role == "master" && n.Health == "online" && n.Port != int64(old) {
					return true
				}
			}
		}
	}
	return false
}
