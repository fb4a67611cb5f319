package jobq_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/postgres"
	"github.com/jobq/jobq/errcode"
)

// TestPushUniqueForBatch: in one batch, a task that ended within
// UniqueFor is reported as a duplicate and not stored, while the tasks
// around it are stored, in order.
func TestPushUniqueForBatch(t *testing.T) {
	t.Parallel()
	for name, u := range map[string]string{
		"sqlite":   "sqlite://" + filepath.Join(t.TempDir(), "u.db"),
		"postgres": "postgres://postgres@127.0.0.1:5432/test?queue=unique-batch-" + time.Now().Format("150405.000000"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q, err := jobq.Open(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			t.Cleanup(func() { _, _ = q.Admin().Clear(t.Context()) })
			opts := jobq.PushOptions{UniqueFor: time.Hour}
			ran := &jobq.Task{Command: "echo ran"}
			if _, err := q.PushBatch(t.Context(), []*jobq.Task{ran}, opts); err != nil {
				t.Fatal(err)
			}
			e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Wait: 5 * time.Second})
			if err != nil || e == nil {
				t.Fatalf("receive: %v", err)
			}
			if err := e.Complete(t.Context()); err != nil {
				t.Fatal(err)
			}
			batch := []*jobq.Task{{Command: "echo before"}, {Command: "echo ran"}, {Command: "echo after"}}
			res, err := q.PushBatch(t.Context(), batch, opts)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{false, true, false} {
				if res[i].Duplicate != want || res[i].ID != batch[i].ID {
					t.Errorf("result %d = %+v; want duplicate %v for %s", i, res[i], want, batch[i].ID)
				}
			}
			if n, err := q.Admin().Size(t.Context()); err != nil || n != 2 {
				t.Errorf("size = %d, %v; want 2 (the task that ran not queued again)", n, err)
			}
		})
	}
}

// TestPushUniqueForRefused: a negative window, a backend without result
// records and a push in a transaction refuse UniqueFor with a clear code.
func TestPushUniqueForRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		params string
		window time.Duration
		want   errcode.Code
	}{
		{"negative", "", -time.Second, errcode.InvalidArgument},
		{"no records", "unsupported=results", time.Hour, errcode.Unimplemented},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := openMem(t, tc.params)
			_, err := q.PushBatch(t.Context(), []*jobq.Task{{Command: "echo x"}}, jobq.PushOptions{UniqueFor: tc.window})
			if errcode.Of(err) != tc.want {
				t.Fatalf("push: %v; want %s", err, tc.want)
			}
			if n, _ := q.Admin().Size(t.Context()); n != 0 {
				t.Errorf("size = %d after a refused push; want 0", n)
			}
		})
	}
}
