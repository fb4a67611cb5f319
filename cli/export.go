package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

func (a *app) resultsCommand() *cobra.Command {
	var group, state, since string
	var jsonl, asJSON bool
	cmd := &cobra.Command{
		Use:   "results (--jsonl | --json) [--group G] [--state S] [--since T]",
		Short: "Stream the result records of the queue as JSON lines, for pandas or DuckDB",
		Long: `Stream every result record the queue keeps (its retention) as one JSON
object per line: the members of 'result --json' (id, state, exit_code,
error, output, value, started, finished, worker, host, delivery_count,
attempts, expires_at) plus group and recorded. Records are read a page at
a time, so memory stays the same for a million records as for ten.
--json is the same as --jsonl, as with 'wait --json' and 'groups --json',
which print JSON lines too.

--group keeps the tasks of a group, --state one end (succeeded,
dead-lettered, cancelled, or cancel-requested), --since the records
written since T (a duration back from now, such as 2h, or an RFC 3339
time). On Storage Queue and Service Bus each record is a blob read with
a request of its own: hundreds of records per second there.`,
		Example: `  jobq sqlite://./work.db results --jsonl > results.jsonl
  jobq sqlite://./work.db results --jsonl --group sweep-1 --state dead-lettered | jq -r .id
  duckdb -c "SELECT state, count(*) FROM read_json_auto('results.jsonl') GROUP BY state"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !jsonl && !asJSON {
				return usageError("results prints JSON lines only: add --jsonl (or --json, the same)")
			}
			if err := deadLetteredAlias(state); err != nil {
				return err
			}
			f := driver.ResultFilter{Group: group, State: driver.ResultState(state)}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				f.Since = t
			}
			ctx := cmd.Context()
			return a.readQueue(ctx, func(q *jobq.Queue) error {
				if err := checkResults(q, "results"); err != nil {
					return err
				}
				return a.exportResults(ctx, q, f)
			})
		},
	}
	cmd.Flags().BoolVar(&jsonl, "jsonl", false, "print one JSON object per record (the only format)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the same as --jsonl")
	cmd.Flags().StringVar(&group, "group", "", "only the records of the tasks of this group")
	cmd.Flags().StringVar(&state, "state", "", "only records in this state: succeeded, dead-lettered, cancelled or cancel-requested")
	cmd.Flags().StringVar(&since, "since", "", "only records written since T: a duration back from now (2h, 3d) or an RFC 3339 time")
	return cmd
}

// exportJSON is one line of results --jsonl.
type exportJSON struct {
	resultJSON
	Group    string    `json:"group"`
	Recorded time.Time `json:"recorded"`
}

// exportResults streams q's records that pass f to standard output.
func (a *app) exportResults(ctx context.Context, q *jobq.Queue, f driver.ResultFilter) error {
	w := bufio.NewWriterSize(a.stdout, 64<<10)
	enc := json.NewEncoder(w)
	err := q.Admin().ExportResults(ctx, f, func(r *jobq.Result) error {
		return enc.Encode(exportJSON{resultJSON: toResultJSON(r), Group: r.Group, Recorded: r.Recorded.UTC()})
	})
	if ferr := w.Flush(); err == nil && ferr != nil {
		err = ferr
	}
	if err != nil {
		return resultFailure(err)
	}
	return nil
}

// parseSince reads --since: a duration back from now, or an RFC 3339
// time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var d time.Duration
	if err := durationFlag(&d).Set(s); err != nil {
		return time.Time{}, usageError("--since %q is neither a duration back from now (2h, 3d) nor an RFC 3339 time (2026-11-28T09:00:00Z)", s)
	}
	return now.Add(-d), nil
}
