package cli

import (
	"github.com/spf13/cobra"
)

// requireSubcommands makes every command group below root (dlq, policy,
// schedule, ...) refuse what is not one of its subcommands. cobra checks
// the command name only at the top level: below it, a group that runs
// nothing prints its help for any argument and exits 0, so `jobq Q dlq
// remove 1` did nothing and looked like success.
func requireSubcommands(root *cobra.Command) {
	for _, c := range root.Commands() {
		requireSubcommands(c)
		if c.HasSubCommands() && !c.Runnable() {
			c.RunE = groupRunE
		}
	}
}

// groupRunE runs a command group given no known subcommand: an argument is
// an unknown command, none is a missing one; both are usage errors (exit
// 2). With none the group's help goes to stderr first, as it would with
// --help.
func groupRunE(cmd *cobra.Command, args []string) error {
	names := subcommandNames(cmd)
	if len(args) == 0 {
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return usageError("jobq: %q needs a subcommand: %s", cmd.CommandPath(), names)
	}
	return usageError("jobq: unknown command %q for %q; use %s; run '%s --help' for usage",
		args[0], cmd.CommandPath(), names, cmd.CommandPath())
}

// subcommandNames lists a group's subcommands for a message: "add, list
// or rm".
func subcommandNames(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return orList(names)
}
