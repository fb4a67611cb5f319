package jobq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func intp(n int) *int { return &n }

func TestBulkRefusesBadInput(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	ad := q.Admin()
	now := time.Now()
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"unknown state", func() error { _, err := ad.RequeueWhere(t.Context(), jobq.Filter{State: "zombie"}); return err }, `unknown state "zombie": use queued or dead-lettered`},
		{"record state without a filter", func() error { _, err := ad.PurgeWhere(t.Context(), jobq.Filter{State: "succeeded"}); return err }, "every succeeded result record"},
		{"record state with a kind", func() error {
			_, err := ad.PurgeWhere(t.Context(), jobq.Filter{State: "cancelled", Kind: "x", All: true})
			return err
		}, "do not keep the task's kind or key"},
		{"record state to requeue", func() error { _, err := ad.RequeueWhere(t.Context(), jobq.Filter{State: "succeeded"}); return err }, "only purge deletes"},
		{"cancel-requested records", func() error {
			_, err := ad.PurgeWhere(t.Context(), jobq.Filter{State: "cancel-requested", All: true})
			return err
		}, "bulk actions leave alone"},
		{"requeue queued", func() error { _, err := ad.RequeueWhere(t.Context(), jobq.Filter{State: "queued"}); return err }, "requeue takes dead letters"},
		{"cancel dead letters", func() error {
			_, err := ad.CancelWhere(t.Context(), jobq.Filter{State: "dead-lettered", Kind: "k"})
			return err
		}, "purge them"},
		{"exit code on queued", func() error { _, err := ad.CancelWhere(t.Context(), jobq.Filter{ExitCode: intp(1)}); return err }, "filters dead letters"},
		{"error on queued purge", func() error {
			_, err := ad.PurgeWhere(t.Context(), jobq.Filter{State: "queued", ErrorContains: "x"})
			return err
		}, "filters dead letters"},
		{"since after until", func() error {
			_, err := ad.RequeueWhere(t.Context(), jobq.Filter{Since: now, Until: now.Add(-time.Hour)})
			return err
		}, "is not before until"},
		{"batch too large", func() error { _, err := ad.RequeueWhere(t.Context(), jobq.Filter{BatchSize: 20000}); return err }, "batch size is 20000"},
		{"cancel without filter", func() error { _, err := ad.CancelWhere(t.Context(), jobq.Filter{}); return err }, "no filter given"},
		{"purge without filter", func() error { _, err := ad.PurgeWhere(t.Context(), jobq.Filter{DryRun: true}); return err }, "say All"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.call()
			if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want InvalidArgument saying %q", err, tc.want)
			}
		})
	}
}

// deadLetters pushes tasks and dead-letters each: every third of kind
// "render" with key tenant-a and exit code 137, the others exit 1 with
// "connection reset" in their output. It returns the IDs of the render
// tasks.
func deadLetters(t *testing.T, q *jobq.Queue, n int) (render []string) {
	t.Helper()
	for i := range n {
		tk := &jobq.Task{Command: fmt.Sprintf("echo %d", i)}
		if i%3 == 0 {
			tk.Kind, tk.ConcurrencyKey = "render", "tenant-a"
		}
		if _, err := q.Push(t.Context(), tk); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		e := receiveOne(t, q)
		if e.Task.Kind == "render" {
			e.SetResult(jobq.ResultDetails{ExitCode: intp(137), Output: "killed"})
			render = append(render, e.Task.ID)
		} else {
			e.SetResult(jobq.ResultDetails{ExitCode: intp(1), Output: "connection reset by peer"})
		}
		if err := e.DeadLetter(t.Context(), "command exited with status", "the output tail"); err != nil {
			t.Fatal(err)
		}
	}
	return render
}

func TestBulkFiltersDeadLetters(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	before := time.Now().Add(-time.Second)
	render := deadLetters(t, q, 30)
	cases := []struct {
		name string
		f    jobq.Filter
		want int64
	}{
		{"everything", jobq.Filter{}, 30},
		{"kind", jobq.Filter{Kind: "render"}, 10},
		{"unknown kind", jobq.Filter{Kind: "none"}, 0},
		{"key", jobq.Filter{Key: "tenant-a"}, 10},
		{"exit code from the record", jobq.Filter{ExitCode: intp(137)}, 10},
		{"other exit code", jobq.Filter{ExitCode: intp(1)}, 20},
		{"error text in the record", jobq.Filter{ErrorContains: "connection reset"}, 0}, // output is not the error
		{"error text in the reason", jobq.Filter{ErrorContains: "exited with status"}, 30},
		{"error text in the detail", jobq.Filter{ErrorContains: "output tail"}, 30},
		{"since before", jobq.Filter{Since: before}, 30},
		{"since after", jobq.Filter{Since: time.Now().Add(time.Hour)}, 0},
		{"until before", jobq.Filter{Until: before}, 0},
		{"kind and exit code", jobq.Filter{Kind: "render", ExitCode: intp(1)}, 0},
		{"small batches", jobq.Filter{Kind: "render", BatchSize: 3}, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.DryRun = true
			res, err := q.Admin().RequeueWhere(t.Context(), tc.f)
			if err != nil || res.Matched != tc.want || res.Done != 0 || res.Scanned != 30 {
				t.Errorf("RequeueWhere(%+v) = %+v, %v; want %d matched of 30 scanned, none done", tc.f, res, err, tc.want)
			}
		})
	}
	res, err := q.Admin().RequeueWhere(t.Context(), jobq.Filter{ExitCode: intp(137), BatchSize: 4})
	if err != nil || res.Done != 10 {
		t.Fatalf("RequeueWhere(exit 137) = %+v, %v; want 10 requeued", res, err)
	}
	// Each requeued task's record is reset: it has not ended.
	for _, id := range render {
		if r, err := q.Result(t.Context(), id); !errors.Is(err, errcode.NotFound) {
			t.Errorf("after requeue, task %s has record %v, %v; want none", id, r, err)
		}
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 10 {
		t.Errorf("after requeuing 10 dead letters the queue holds %d (%v)", n, err)
	}
	res, err = q.Admin().PurgeWhere(t.Context(), jobq.Filter{ErrorContains: "exited"})
	if err != nil || res.Done != 20 {
		t.Errorf("PurgeWhere(the rest) = %+v, %v; want 20 purged", res, err)
	}
}

func TestBulkCancelAndPurgeQueued(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	var thumbs []string
	for i := range 12 {
		tk := &jobq.Task{Command: fmt.Sprintf("echo %d", i)}
		if i%2 == 0 {
			tk.Kind = "thumbnail"
		}
		r, err := q.Push(t.Context(), tk)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Kind != "" {
			thumbs = append(thumbs, r.ID)
		}
	}
	e := receiveOne(t, q) // one task in flight is never matched
	res, err := q.Admin().CancelWhere(t.Context(), jobq.Filter{All: true, DryRun: true})
	if err != nil || res.Matched != 11 || res.Done != 0 {
		t.Fatalf("CancelWhere(All, dry run) = %+v, %v; want the 11 queued matched", res, err)
	}
	res, err = q.Admin().CancelWhere(t.Context(), jobq.Filter{Kind: "thumbnail", BatchSize: 2})
	want := int64(6)
	if e.Task.Kind == "thumbnail" {
		want = 5
	}
	if err != nil || res.Done != want || res.Pending != 0 {
		t.Fatalf("CancelWhere(kind thumbnail) = %+v, %v; want %d removed", res, err, want)
	}
	for _, id := range thumbs {
		r, err := q.Result(t.Context(), id)
		if id == e.Task.ID {
			continue
		}
		if err != nil || r.State != "cancelled" {
			t.Errorf("task %s after CancelWhere: %v, %v; want cancelled", id, r, err)
		}
	}
	res, err = q.Admin().PurgeWhere(t.Context(), jobq.Filter{State: "queued", All: true})
	if err != nil || res.Done != 11-want {
		t.Errorf("PurgeWhere(queued, All) = %+v, %v; want %d", res, err, 11-want)
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 1 {
		t.Errorf("after purging the queued tasks %d are left (%v); want the one in flight", n, err)
	}
}

func TestBulkUnsupportedAndEmulated(t *testing.T) {
	t.Parallel()
	q := openMem(t, "unsupported=bulk-actions")
	if _, err := q.Admin().RequeueWhere(t.Context(), jobq.Filter{}); !errors.Is(err, errcode.Unimplemented) {
		t.Errorf("RequeueWhere where bulk actions are unsupported: %v; want Unimplemented", err)
	}

	// Emulated with a peek window of 4: passes repeat while they see new
	// dead letters, until ones that do not match fill the window; the
	// match behind them is left, and the run says it is partial.
	q = openMem(t, "emulated=bulk-actions&max_peek=4")
	deadLetters(t, q, 9)
	res, err := q.Admin().RequeueWhere(t.Context(), jobq.Filter{Kind: "render", DryRun: true})
	if err != nil || res.Scanned != 4 || res.Matched != 2 || res.Partial == "" {
		t.Errorf("emulated dry run = %+v, %v; want the window of 4 scanned, 2 matched, partial", res, err)
	}
	res, err = q.Admin().RequeueWhere(t.Context(), jobq.Filter{Kind: "render"})
	if err != nil || res.Done != 2 || res.Scanned != 6 || res.Partial == "" {
		t.Errorf("emulated RequeueWhere(kind render) = %+v, %v; want 2 requeued of 6 seen over passes, partial", res, err)
	}
}

// notPager hides a driver's Pager.
type notPager struct{ driver.Driver }

func TestBulkNativeNeedsPager(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "no-pager"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(notPager{d}, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = q.Admin().RequeueWhere(t.Context(), jobq.Filter{DryRun: true})
	if !errors.Is(err, errcode.Internal) || !strings.Contains(err.Error(), "driver.Pager") {
		t.Errorf("RequeueWhere on a native declaration without a Pager: %v; want Internal naming driver.Pager", err)
	}
}

func TestBulkExitCodeNeedsRecordsOrHistory(t *testing.T) {
	t.Parallel()
	q := openMem(t, "unsupported=results,in-place-update")
	for name, call := range map[string]func() error{
		"requeue": func() error {
			_, err := q.Admin().RequeueWhere(t.Context(), jobq.Filter{ExitCode: intp(137)})
			return err
		},
		"purge": func() error {
			_, err := q.Admin().PurgeWhere(t.Context(), jobq.Filter{ExitCode: intp(137)})
			return err
		},
	} {
		if err := call(); !errors.Is(err, errcode.Unimplemented) || !strings.Contains(err.Error(), "filter on the error text instead") {
			t.Errorf("%s by exit code without records or attempt histories: %v; want Unimplemented pointing at the error text", name, err)
		}
	}
	// The error text still filters there.
	if _, err := q.Admin().RequeueWhere(t.Context(), jobq.Filter{ErrorContains: "status 137", DryRun: true}); err != nil {
		t.Errorf("requeue by error text: %v", err)
	}
}
