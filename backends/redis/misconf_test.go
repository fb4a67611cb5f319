package redis

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
)

// TestMisconfIsResourceExhausted: a redis-server whose snapshot failed
// (its directory is gone, as a full disk would fail it) refuses writes with
// MISCONF; jobq reports that as ResourceExhausted, which the worker takes
// as "pause and retry the settlement", and writes go through again once the
// server accepts them.
func TestMisconfIsResourceExhausted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own redis-server")
	}
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A save rule makes Redis refuse writes after a failed snapshot
	// (stop-writes-on-bgsave-error, on by default).
	srv := startServer(t, "--save", "3600 1", "--dir", dataDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := jobq.Open(ctx, newQueueURL(t, srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo before"}); err != nil {
		t.Fatal(err)
	}
	env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
	if err != nil || env == nil {
		t.Fatalf("receive: %v, %v", env, err)
	}

	// The server's working directory disappears: the snapshot cannot be
	// written.
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	c := srv.client()
	if err := c.BgSave(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "rdb_last_bgsave_status:err") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the snapshot did not fail: %s", info)
		}
		time.Sleep(10 * time.Millisecond)
	}

	err = env.Complete(ctx)
	if !errors.Is(err, errcode.ResourceExhausted) || !strings.Contains(err.Error(), "MISCONF") {
		t.Fatalf("complete after a failed snapshot: %v; want ResourceExhausted from MISCONF", err)
	}

	// The server accepts writes again: the same completion goes through.
	if err := c.ConfigSet(ctx, "stop-writes-on-bgsave-error", "no").Err(); err != nil {
		t.Fatal(err)
	}
	if err := env.Complete(ctx); err != nil {
		t.Fatalf("complete once writes are accepted again: %v", err)
	}
	if n, err := q.Admin().Size(ctx); err != nil || n != 0 {
		t.Fatalf("queue size %d (%v); want 0", n, err)
	}
}
