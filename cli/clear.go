package cli

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/jobq/jobq/internal/hooks"
	"github.com/spf13/cobra"
)

func (a *app) clearCommand() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "clear [--yes]",
		Short: "Delete every queued task (dead letters are kept)",
		Long: `Delete every ready and delayed task, and in-flight ones where the backend
can (their workers then lose the lease). Dead letters are kept: use
'jobq dlq purge --all' for those. Asks for confirmation on standard input
unless --yes.

Nothing is recorded for the tasks deleted, so their groups never end and
tasks held until they end (--after, a group's --then step) stay held: to
end those too, use 'jobq QUEUE purge --state queued --all' (each task is
recorded cancelled, and its dependants are cancelled in turn) or
'jobq QUEUE cancel --all'.`,
		Example: `  jobq sqlite://./work.db clear
  jobq sqlite://./work.db clear --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			q, err := a.open(ctx)
			if err != nil {
				return err
			}
			defer q.Close()
			if !yes {
				what := "every task"
				if n, err := q.Admin().Size(ctx); err == nil {
					what = fmt.Sprintf("%d tasks", n)
				}
				if err := a.confirm(fmt.Sprintf("Delete %s from %s (dead letters are kept)?", what, hooks.URL(q))); err != nil {
					return err
				}
			}
			n, err := q.Admin().Clear(ctx)
			if err != nil {
				return failure(err)
			}
			if n < 0 {
				fmt.Fprintln(a.stdout, "cleared (the backend does not say how many)")
			} else {
				fmt.Fprintf(a.stdout, "cleared %s\n", countOf(n, "task"))
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// errDeclined is returned when the user does not confirm.
var errDeclined = errors.New("not confirmed; nothing was changed (pass --yes to skip the question)")

// confirm asks a yes/no question on stderr and reads the answer from stdin.
func (a *app) confirm(question string) error {
	fmt.Fprintf(a.stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(a.stdin).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	fmt.Fprintln(a.stderr)
	return failure(errDeclined)
}
