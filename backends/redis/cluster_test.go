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
)

// startCluster starts a three-master Redis Cluster of private servers and
// returns its seed URL (cluster=true, every node an addr).
func startCluster(t *testing.T) string {
	t.Helper()
	var addrs []string
	for range 3 {
		s := startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", s.port))
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := testCtx(t)
	for _, a := range addrs {
		c := goredis.NewClient(&goredis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(ctx).Result()
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
	return "redis://" + addrs[0] + "/?cluster=true&addr=" + addrs[1] + "&addr=" + addrs[2]
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
