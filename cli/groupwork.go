package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// groupWorkJSON is the "work" member of a group's --json document: what
// its ended tasks cost in worker time (jobq.Admin.GroupWork), in seconds.
type groupWorkJSON struct {
	Records     int64   `json:"records"`
	DoneS       float64 `json:"done_s"`
	LostS       float64 `json:"lost_s"`
	SavedS      float64 `json:"saved_s"`
	Preemptions int64   `json:"preemptions"`
}

// loadWork reads the group's work totals from its result records; it
// leaves them out (nil) where the queue keeps no records it can list.
func (g *groupView) loadWork(ctx context.Context) {
	ws, err := g.q.Admin().GroupWork(ctx, g.name)
	if err != nil {
		g.work = nil
		return
	}
	g.work = ws[0]
}

// workJSON is g's work totals as JSON; nil when unknown.
func (g *groupView) workJSON() *groupWorkJSON {
	w := g.work
	if w == nil {
		return nil
	}
	return &groupWorkJSON{Records: w.Records, DoneS: w.Done.Seconds(), LostS: w.Lost.Seconds(), SavedS: w.Saved.Seconds(), Preemptions: w.Preemptions}
}

// workLine is g's work totals on one line; "" when unknown. ended is how
// many of the group's tasks ended: when fewer records were read, the line
// says why its totals leave the others out, rather than let "0s done"
// stand for a group whose tasks ran.
func workLine(w *jobq.GroupWork, ended int64) string {
	if w == nil {
		return ""
	}
	from := countOf(w.Records, "record")
	if missing := unrecorded(w, ended); missing > 0 {
		verb := "have"
		if missing == 1 {
			verb = "has"
		}
		from += fmt.Sprintf("; %s of the group %s no record in it: the same task ran again since in another group, its record expired or was purged, or the results policy keeps none",
			countOf(missing, "ended task"), verb)
	}
	return fmt.Sprintf("work: %s done, %s lost to preemptions and stops, %s saved by checkpoints, %s (from %s)",
		roundDuration(w.Done), roundDuration(w.Lost), roundDuration(w.Saved), countOf(w.Preemptions, "preemption"), from)
}

// unrecorded is how many of a group's ended tasks have no record under
// it (a task keeps only its latest record); 0 when w is unknown.
func unrecorded(w *jobq.GroupWork, ended int64) int64 {
	if w == nil {
		return 0
	}
	return max(ended-w.Records, 0)
}

// printGroupsWork is `groups --work`: the groups with their work totals,
// added up in one pass over their records.
func (a *app) printGroupsWork(ctx context.Context, q *jobq.Queue, gs []*driver.GroupCounters, asJSON bool) error {
	names := make([]string, len(gs))
	for i, g := range gs {
		names[i] = g.Name
	}
	ws, err := q.Admin().GroupWork(ctx, names...)
	if err != nil {
		return featureFailure(err)
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		for i, g := range gs {
			j := toGroupJSON(g)
			j.Work = (&groupView{work: ws[i]}).workJSON()
			if err := enc.Encode(j); err != nil {
				return failure(err)
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	// RECORDS says how many ended tasks the work columns cover: fewer than
	// ended when tasks ran again since in another group (see workLine).
	fmt.Fprintln(tw, "GROUP\tPUSHED\tSUCCEEDED\tDEAD-LETTERED\tCANCELLED\tOPEN\tWORK DONE\tWORK LOST\tSAVED BY CHECKPOINTS\tPREEMPTIONS\tRECORDS")
	for i, g := range gs {
		w := ws[i]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\n", g.Name, g.Pushed, g.Succeeded, g.DeadLettered, g.Cancelled, g.Open(),
			roundDuration(w.Done), roundDuration(w.Lost), roundDuration(w.Saved), w.Preemptions, w.Records)
	}
	if err := tw.Flush(); err != nil {
		return failure(err)
	}
	return nil
}
