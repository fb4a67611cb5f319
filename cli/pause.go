package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/shellword"
)

const pauseLong = `A paused queue still takes pushes, but its workers take no new task:
within about 2 seconds every worker, on every machine, stops claiming and
finishes the tasks it holds. 'resume' lets them go on. 'stats' and
'workers' say since when the queue is paused and by whom.

--kind and --key pause only the tasks of that kind (push --kind) or with
that concurrency or rate-limit key; workers put such tasks back for about
10 seconds when they meet them, without spending a retry, and run the
others. 'resume' takes the same --kind and --key as the pause it lifts.

Backends that keep no policies refuse it; run 'jobq backends' for how long
each backend's workers take to see a pause (see docs/operations.md).`

func (a *app) pauseCommand() *cobra.Command {
	var o jobq.PauseOptions
	cmd := &cobra.Command{
		Use:   "pause [--kind K] [--key K]",
		Short: "Stop workers taking new tasks (pushes still go in) until 'resume'",
		Long:  pauseLong,
		Example: `  jobq sqlite://./work.db pause
  jobq sqlite://./work.db pause --kind render
  jobq 'redis://localhost:6379/0?queue=work' pause --key licence-server`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPauseScope(cmd, "pause", o); err != nil {
				return err
			}
			if err := driver.ValidateKey("pause --key", o.Key); err != nil {
				return usageError("%v; push refuses such a key, so this pause would never apply", err)
			}
			return a.withQueue(cmd.Context(), func(q *jobq.Queue) error {
				s, err := q.Admin().Pause(cmd.Context(), o)
				if err != nil {
					return policyFailure(err)
				}
				fmt.Fprintf(a.stdout, "paused %s (by %s); workers stop taking its tasks within about 2s; `%s` lifts it\n", s.Scope(), s.By, resumeCommand(s))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&o.Kind, "kind", "", "pause only tasks of this kind")
	cmd.Flags().StringVar(&o.Key, "key", "", "pause only tasks with this concurrency or rate-limit key")
	return cmd
}

func (a *app) resumeCommand() *cobra.Command {
	var o jobq.PauseOptions
	cmd := &cobra.Command{
		Use:   "resume [--kind K] [--key K]",
		Short: "Lift a pause: workers take its tasks again",
		Long:  pauseLong,
		Example: `  jobq sqlite://./work.db resume
  jobq sqlite://./work.db resume --kind render`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkPauseScope(cmd, "resume", o); err != nil {
				return err
			}
			return a.withQueue(cmd.Context(), func(q *jobq.Queue) error {
				had, err := q.Admin().Resume(cmd.Context(), o)
				if err != nil {
					return policyFailure(err)
				}
				what := driver.PauseState{TaskKind: o.Kind, Key: o.Key}.Scope()
				if !had {
					fmt.Fprintf(a.stdout, "%s was not paused%s\n", what, a.otherPauses(cmd.Context(), q))
					return nil
				}
				fmt.Fprintf(a.stdout, "resumed %s; workers take its tasks again within about 2s\n", what)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&o.Kind, "kind", "", "lift the pause of this task kind")
	cmd.Flags().StringVar(&o.Key, "key", "", "lift the pause of this concurrency or rate-limit key")
	return cmd
}

// otherPauses names the pauses a resume that lifted none left in place,
// each with the resume that lifts it ("; paused now: ..."), or "" when
// there are none (or they cannot be read): a pause of a kind and a key is
// lifted only by a resume naming both.
func (a *app) otherPauses(ctx context.Context, q *jobq.Queue) string {
	pols, err := q.Admin().Policies(ctx)
	if err != nil {
		return ""
	}
	var lifts []string
	for _, pol := range pols {
		s, err := driver.ParsePause(pol)
		if pol.Kind != driver.PausePolicy || err != nil {
			continue
		}
		args := "resume"
		if s.TaskKind != "" {
			args += " --kind " + shellword.Quote(s.TaskKind)
		}
		if s.Key != "" {
			args += " --key " + shellword.Quote(s.Key)
		}
		lifts = append(lifts, s.Scope()+" ("+a.commandHint(args)+")")
	}
	if len(lifts) == 0 {
		return ""
	}
	return "; paused now: " + strings.Join(lifts, "; ")
}

// checkPauseScope refuses an empty --kind or --key given on the command
// line: left empty (an unset shell variable, say), either would name the
// whole queue, and pause or resume it.
func checkPauseScope(cmd *cobra.Command, verb string, o jobq.PauseOptions) error {
	for _, f := range []struct{ name, val string }{{"kind", o.Kind}, {"key", o.Key}} {
		if cmd.Flags().Changed(f.name) && strings.TrimSpace(f.val) == "" {
			return usageError("%s --%s is empty; give the %s to %s, or leave out --%s to %s the whole queue", verb, f.name, f.name, verb, f.name, verb)
		}
	}
	return nil
}
