package cli

import (
	"bytes"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
)

// TestWaitProgressText: the live line's counts, rate and ETA.
func TestWaitProgressText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		c       waitCounts
		elapsed time.Duration
		want    string
	}{
		{"start", waitCounts{total: 10, running: 3}, 0,
			"0/10 ended: 0 succeeded, 0 failed; 3 running, 7 queued"},
		{"no rate before a second", waitCounts{total: 10, succeeded: 2, recent: 2, running: 3}, 900 * time.Millisecond,
			"2/10 ended: 2 succeeded, 0 failed; 3 running, 5 queued"},
		{"rate and ETA", waitCounts{total: 10, succeeded: 3, failed: 1, recent: 4, running: 2}, 2 * time.Second,
			"4/10 ended: 3 succeeded, 1 failed; 2 running, 4 queued; 2.0 tasks/s, ETA 3s"},
		{"running capped by what is left", waitCounts{total: 5, succeeded: 4, recent: 4, running: 9}, 4 * time.Second,
			"4/5 ended: 4 succeeded, 0 failed; 1 running, 0 queued; 1.0 tasks/s, ETA 1s"},
		{"running unknown", waitCounts{total: 100, succeeded: 40, recent: 40, running: -1}, 2 * time.Second,
			"40/100 ended: 40 succeeded, 0 failed; 60 running or queued; 20 tasks/s, ETA 3s"},
		{"ended before the wait: no rate", waitCounts{total: 3, succeeded: 2, running: 0}, 5 * time.Second,
			"2/3 ended: 2 succeeded, 0 failed; 0 running, 1 queued"},
		{"all ended", waitCounts{total: 2, succeeded: 1, failed: 1, recent: 2, running: 0}, 2 * time.Second,
			"2/2 ended: 1 succeeded, 1 failed; 0 running, 0 queued; 1.0 tasks/s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := waitProgressText(tc.c, tc.elapsed); got != tc.want {
				t.Errorf("waitProgressText(%+v, %s)\n got %q\nwant %q", tc.c, tc.elapsed, got, tc.want)
			}
		})
	}
}

// TestWaitLiveLine: on a terminal (progress), wait keeps a live line on
// standard error, redrawn in place, erased when the wait ends, and never
// mixed into the outcome lines; elsewhere it writes no such line. Run on
// SQLite: one task ended before the wait, one held by a receiver (running)
// ends during it.
func TestWaitLiveLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		progress, shared bool
	}{
		{"terminal", true, false},
		{"terminal for both streams", true, true},
		{"pipe", false, false},
	} {
		progress := tc.progress
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			q, err := jobq.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "w.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			tasks := []*jobq.Task{{Command: "echo a"}, {Command: "echo b"}}
			if _, err := q.PushBatch(ctx, tasks, jobq.PushOptions{}); err != nil {
				t.Fatal(err)
			}
			var envs []*jobq.Envelope
			for range tasks {
				e, err := q.Receive(ctx, jobq.ReceiveOptions{Wait: 5 * time.Second})
				if err != nil || e == nil {
					t.Fatalf("receive: %v", err)
				}
				envs = append(envs, e)
			}
			if err := envs[0].Complete(ctx); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			a := &app{stdout: &stdout, stderr: &stderr, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			if tc.shared {
				a.stdout = &stderr
			}
			w := &waiter{a: a, q: q, progress: progress}
			done := make(chan error, 1)
			go func() { done <- w.run(ctx, []string{tasks[0].ID, tasks[1].ID}) }()
			time.Sleep(600 * time.Millisecond)
			if err := envs[1].Complete(ctx); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("wait: %v", err)
			}
			want := tasks[0].ID + " succeeded\n" + tasks[1].ID + " succeeded\n"
			if tc.shared {
				// Each outcome line starts on an erased line, and the
				// live line is drawn again after it.
				errs := stderr.String()
				for _, id := range []string{tasks[0].ID, tasks[1].ID} {
					if !strings.Contains(errs, clearLine+id+" succeeded\n") {
						t.Errorf("outcome of %s not printed on an erased line:\n%q", id, errs)
					}
				}
				if !strings.Contains(errs, "succeeded\n1/2 ended") || !strings.HasSuffix(errs, clearLine) {
					t.Errorf("the live line is not redrawn after an outcome, or not erased at the end:\n%q", errs)
				}
				return
			}
			if stdout.String() != want {
				t.Errorf("stdout %q; want the two outcome lines alone %q", stdout.String(), want)
			}
			errs := stderr.String()
			if !progress {
				if errs != "" {
					t.Errorf("stderr off a terminal %q; want nothing", errs)
				}
				return
			}
			if !strings.Contains(errs, clearLine+"1/2 ended: 1 succeeded, 0 failed; 1 running, 0 queued") {
				t.Errorf("stderr lacks the live line with one ended and one running:\n%q", errs)
			}
			if !strings.HasSuffix(errs, clearLine) || strings.Contains(errs, "\n") {
				t.Errorf("stderr %q; want lines redrawn in place and erased at the end", errs)
			}
		})
	}
}

// TestStatsPause: the live line reads the queue's counts every second while
// a read is quick, and waits ten times a slow read's duration after it.
func TestStatsPause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ took, want time.Duration }{
		{0, time.Second},
		{20 * time.Millisecond, time.Second},
		{100 * time.Millisecond, time.Second},
		{500 * time.Millisecond, 5 * time.Second},
		{3 * time.Second, 30 * time.Second},
	} {
		if got := statsPause(tc.took); got != tc.want {
			t.Errorf("statsPause(%v) = %v; want %v", tc.took, got, tc.want)
		}
	}
}
