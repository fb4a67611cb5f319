package jobq_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestBulkByKindSeesStashedTasks: a task too large for a message is
// queued as a stash reference; bulk actions filtered by kind read that
// reference, so it carries the kind: a cancel or dead-letter requeue by
// kind reaches stashed tasks as it reaches inline ones. Redis never
// stashes (no message limit).
func TestBulkByKindSeesStashedTasks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		act  func(t *testing.T, q *jobq.Queue) (jobq.BulkResult, error)
	}{
		{"cancel queued", func(t *testing.T, q *jobq.Queue) (jobq.BulkResult, error) {
			return q.Admin().CancelWhere(t.Context(), jobq.Filter{Kind: "render"})
		}},
		{"requeue dead letters", func(t *testing.T, q *jobq.Queue) (jobq.BulkResult, error) {
			e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if err := e.DeadLetter(t.Context(), "hc test", ""); err != nil {
				t.Fatal(err)
			}
			return q.Admin().RequeueWhere(t.Context(), jobq.Filter{Kind: "render"})
		}},
	}
	for i, tc := range tests {
		for engine, u := range engines.URLs(t, fmt.Sprintf("stashkind-%d", i)) {
			if engine == "redis" {
				continue
			}
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				dir := filepath.Join(t.TempDir(), "stash")
				q := engines.Open(t, u+"&max_message_bytes=65536&stash=file://"+filepath.ToSlash(dir))
				big := &jobq.Task{Kind: "render", Payload: []byte(`{"frame": "` + strings.Repeat("x", 100_000) + `"}`)}
				if _, err := q.Push(t.Context(), big); err != nil {
					t.Fatal(err)
				}
				if p, err := q.Admin().Peek(t.Context(), 1); err != nil || len(p) != 1 || p[0].Task == nil || p[0].Task.Stash == nil {
					t.Fatalf("Peek = %+v, %v; want the stash reference", p, err)
				}
				res, err := tc.act(t, q)
				if err != nil || res.Matched != 1 || res.Done != 1 {
					t.Fatalf("bulk action by kind = %+v, %v; want the stashed task matched and acted on", res, err)
				}
			})
		}
	}
}
