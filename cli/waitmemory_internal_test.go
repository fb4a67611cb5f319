package cli

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// TestWaitKeepsNoRecordsOfPrintedTasks: once a task's outcome is printed,
// the wait keeps what its failure summary needs, not the record's output
// tail, attempts or value, so its memory does not grow with what the tasks
// printed. Not parallel: it reads the heap.
func TestWaitKeepsNoRecordsOfPrintedTasks(t *testing.T) {
	const n = 200
	big := strings.Repeat("x", 256<<10)
	one := 1
	w := &waiter{a: &app{stdout: io.Discard}, ended: map[string]*jobq.Result{}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		r := &jobq.Result{ID: fmt.Sprintf("t%d", i), State: driver.ResultSucceeded, Output: big + fmt.Sprint(i),
			Attempts: []jobq.Attempt{{Detail: big + fmt.Sprint(i)}}}
		if i%2 == 1 {
			r.State, r.ExitCode, r.Error = driver.ResultDeadLettered, &one, "command exited with status 1"
		}
		if err := w.print(r); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Keeping the records would hold n × 512 KiB (100 MiB).
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 8<<20 {
		t.Errorf("the heap grew by %d MiB after printing %d outcomes; want the outputs and attempts let go", grown>>20, n)
	}
	failed := w.failed([]string{"t0", "t1"})
	if len(failed) != 1 || outcomeLine(failed[0]) != `t1 dead-lettered exit=1 error="command exited with status 1"` {
		t.Errorf("failed = %v; want t1's outcome", failed)
	}
	if p := w.pending([]string{"t0", "t1", "t-other"}); len(p) != 1 || p[0] != "t-other" {
		t.Errorf("pending = %v; want [t-other]", p)
	}
}
