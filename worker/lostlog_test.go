package worker_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
	"github.com/jobq/jobq/worker"
)

// TestLostDeliveryLogNamesNoEmptyWorker: when no attempt of the task was
// ever recorded (its first delivery's worker died), the warning about the
// lost delivery does not name an empty "last recorded worker".
func TestLostDeliveryLogNamesNoEmptyWorker(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "long"})
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Envelope.DeliveryCount > 1 {
			return nil
		}
		<-ctx.Done() // the lease expires: nothing is recorded
		return ctx.Err()
	})
	var out syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))
	w := worker.New(q, h, worker.Options{Logger: log, Poll: 100 * time.Millisecond, Visibility: time.Second, DisableHeartbeat: true})
	if err := w.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !strings.Contains(text, "earlier deliveries ended without a settlement") {
		t.Fatalf("no warning about the lost delivery; log:\n%s", text)
	}
	if strings.Contains(text, `last_recorded_worker=""`) {
		t.Errorf("the warning names an empty last recorded worker; log:\n%s", text)
	}
}
