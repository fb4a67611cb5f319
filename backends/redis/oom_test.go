package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestOutOfMemory fills a redis-server with maxmemory-policy noeviction
// beyond its maxmemory while a worker holds leases. A push must fail with
// ResourceExhausted and store nothing; the leases must still renew (a
// long task whose renewals fail loses its lease and runs again elsewhere
// while it still runs, and nothing frees the memory), complete and
// requeue, since none of that makes the data set grow.
func TestOutOfMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own redis-server")
	}
	t.Parallel()
	srv := startServer(t, "--maxmemory-policy", "noeviction")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q, err := jobq.Open(ctx, newQueueURL(t, srv.url()))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	const held = 3
	var envs []*jobq.Envelope
	for i := range held {
		if _, err := q.Push(ctx, &jobq.Task{Command: fmt.Sprintf("echo %d", i)}); err != nil {
			t.Fatal(err)
		}
		env, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, env)
	}
	// Out of memory from here on: maxmemory below what the server uses.
	c := srv.client()
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	var usedMemory int64
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			usedMemory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if usedMemory == 0 {
		t.Fatalf("no used_memory in INFO memory: %q", info)
	}
	if err := c.ConfigSet(ctx, "maxmemory", fmt.Sprint(usedMemory/2)).Err(); err != nil {
		t.Fatal(err)
	}

	_, err = q.Push(ctx, &jobq.Task{Command: "echo refused"})
	if !errors.Is(err, errcode.ResourceExhausted) || !strings.Contains(err.Error(), "maxmemory") {
		t.Fatalf("push with Redis out of memory: %v; want ResourceExhausted naming maxmemory", err)
	}
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"renew", func() error { return envs[0].Renew(ctx, time.Minute) }},
		{"renew again", func() error { return envs[0].Renew(ctx, time.Minute) }},
		{"complete", func() error { return envs[0].Complete(ctx) }},
		{"requeue", func() error { return envs[1].Requeue(ctx, 0) }},
		{"requeue with a delay", func() error { return envs[2].Requeue(ctx, time.Hour) }},
	} {
		if err := step.do(); err != nil {
			t.Errorf("%s with Redis out of memory: %v", step.name, err)
		}
	}
	// The worker registry's write names the cause, not EXECABORT.
	var d *Driver
	if !q.As(&d) {
		t.Fatal("no *Driver behind the queue")
	}
	err = d.PutWorker(ctx, &driver.WorkerRecord{ID: "w1", Heartbeat: time.Now(), Data: []byte("{}")})
	if !errors.Is(err, errcode.ResourceExhausted) || !strings.Contains(err.Error(), "maxmemory") {
		t.Errorf("worker record with Redis out of memory: %v; want ResourceExhausted naming maxmemory", err)
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready != 1 || st.Delayed != 1 || st.InFlight != 0 {
		t.Fatalf("stats %+v; want the requeued task ready, the delayed one delayed, and the refused push nowhere", st)
	}
}
