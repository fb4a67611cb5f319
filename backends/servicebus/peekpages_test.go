package servicebus_test

import (
	"fmt"
	"testing"

	"github.com/jobq/jobq"
)

// TestPeekPagesPastTheServiceLimit: Service Bus returns at most 250
// messages per peek, however many are asked for. Peek (peek -n, show) used
// to ask once, and so saw only the first 250 of a longer queue.
func TestPeekPagesPastTheServiceLimit(t *testing.T) {
	t.Parallel()
	q, _ := open(t, newQueueURL(t))
	ctx := ctxT(t)
	const n = 300
	tasks := make([]*jobq.Task, n)
	for i := range tasks {
		tasks[i] = &jobq.Task{Command: fmt.Sprintf("echo %d", i)}
	}
	if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := q.Admin().Peek(ctx, 1000)
	if err != nil || len(got) != n {
		t.Fatalf("peek 1000 of %d queued tasks: %d, %v; want all %d", n, len(got), err, n)
	}
	seen := map[string]bool{}
	for _, m := range got {
		if m.Task == nil || seen[m.Task.ID] {
			t.Fatalf("peek returned %+v twice or undecoded", m)
		}
		seen[m.Task.ID] = true
	}
}
