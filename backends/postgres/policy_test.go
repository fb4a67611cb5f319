package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// TestClaimSkipsCrowdedHead: when more tasks of a full key sit at the head
// of the queue than one scan window holds, a claim still finds the eligible
// task behind them (the function's second pass).
func TestClaimSkipsCrowdedHead(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	q, err := jobq.OpenWithOptions(ctx, newQueueURL(t), jobq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Policies().Set(ctx, jobq.Policy{Kind: jobq.ConcurrencyPolicy, Key: "busy", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	var tasks []*jobq.Task
	for i := range 50 {
		tasks = append(tasks, &jobq.Task{Command: fmt.Sprintf("busy %d", i), ConcurrencyKey: "busy"})
	}
	tasks = append(tasks, &jobq.Task{Command: "free"})
	if _, err := q.PushBatch(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	first, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute})
	if err != nil || first.Task.ConcurrencyKey != "busy" {
		t.Fatalf("first receive: %v, %v; want a busy task", first, err)
	}
	second, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("second receive: %v; want the free task behind 49 blocked ones", err)
	}
	if second.Task.Command != "free" {
		t.Fatalf("second receive gave %q; want the free task", second.Task.Command)
	}
	if _, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute}); err == nil {
		t.Fatal("a third receive returned a task; the busy key is at its cap and nothing else is queued")
	}
	for _, e := range []*jobq.Envelope{first, second} {
		if err := e.Complete(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
