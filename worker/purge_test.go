package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
	"github.com/jobq/jobq/worker"
)

// TestWorkerPurgesExpiredResults: a running worker deletes the result
// records whose retention has passed, now and then, and logs it at DEBUG.
func TestWorkerPurgesExpiredResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := openMem(t, "")
	pol, err := hooks.ParsePolicy("retention", "1s")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Admin().SetPolicy(ctx, pol); err != nil {
		t.Fatal(err)
	}
	id := pushOne(t, q, &jobq.Task{Command: "true"})
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }),
		worker.Options{Logger: log, Wait: true, Poll: 100 * time.Millisecond})
	worker.SetPurgeEvery(w, 100*time.Millisecond)
	events, _ := w.Subscribe(0)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(ctx) }()
	if ev := <-events; ev.Outcome != worker.Completed || !ev.Durable {
		t.Fatalf("event %+v; want the task completed", ev)
	}
	if r := result(t, q, id); r.State != driver.ResultSucceeded {
		t.Fatalf("record %+v; want succeeded", r)
	}
	// The record expires a second after it was written; a purge follows.
	// The guard stops waiting should no purge ever delete it.
	guard := time.After(30 * time.Second)
	for !strings.Contains(logs.String(), `msg="expired result records purged" purged=1`) {
		select {
		case <-guard:
			w.Stop()
			<-errc
			t.Fatalf("no purge deleted the expired record; logs:\n%s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	w.Stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := q.Result(ctx, id); errcode.Of(err) != errcode.NotFound {
		t.Fatalf("Result after the purge: %v; want NotFound", err)
	}
}
