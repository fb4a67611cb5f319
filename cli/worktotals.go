package cli

import (
	"cmp"
	"io"
	"slices"
	"time"

	"github.com/jobq/jobq"
)

// envTotals are the work totals of the workers of one environment.
type envTotals struct {
	env                    string
	workers                int
	preemptions            int64
	done, lost, saved      time.Duration
	tasksDone, tasksFailed int64
}

// workTotals sums the workers' work totals per environment label, sorted
// by label; the last row, "all", is the queue's total.
func workTotals(ws []*jobq.WorkerInfo) []envTotals {
	by := map[string]*envTotals{}
	all := envTotals{env: "all"}
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	for _, w := range ws {
		env := cmp.Or(w.Env, w.Host, "-")
		t := by[env]
		if t == nil {
			t = &envTotals{env: env}
			by[env] = t
		}
		for _, t := range []*envTotals{t, &all} {
			t.workers++
			t.preemptions += w.Preemptions
			t.done += sec(w.WorkSeconds)
			t.lost += sec(w.LostSeconds)
			t.saved += sec(w.SavedSeconds)
			t.tasksDone += w.Done
			t.tasksFailed += w.Failed
		}
	}
	out := make([]envTotals, 0, len(by)+1)
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b envTotals) int { return cmp.Compare(a.env, b.env) })
	return append(out, all)
}

// printWorkTotals writes the per-environment table of work done, lost to
// preemptions and stops, and saved by checkpoints.
func printWorkTotals(out io.Writer, ws []*jobq.WorkerInfo) error {
	if len(ws) == 0 {
		return nil
	}
	tab := newTable(out, "\nENVIRONMENT", "WORKERS", "TASKS DONE", "FAILED", "PREEMPTIONS", "WORK DONE", "WORK LOST", "SAVED BY CHECKPOINTS")
	for _, t := range workTotals(ws) {
		tab.row(t.env, t.workers, t.tasksDone, t.tasksFailed, t.preemptions,
			roundDuration(t.done), roundDuration(t.lost), roundDuration(t.saved))
	}
	return tab.flush()
}
