package cli_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/cli"
)

// TestUnknownSubcommand: below the top level, an unknown subcommand is a
// usage error naming the group's subcommands, and a group given none exits
// 2 after its help; neither touches the queue.
func TestUnknownSubcommand(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	tests := []struct {
		args    []string
		wantErr string
	}{
		{[]string{"schedule", "remove", "every"}, `unknown command "remove" for "jobq schedule"; use add, list, pause, resume or rm; run 'jobq schedule --help' for usage`},
		{[]string{"dlq", "bogus"}, `unknown command "bogus" for "jobq dlq"; use list, purge or requeue`},
		{[]string{"dlq", "remove", "1"}, `unknown command "remove" for "jobq dlq"`},
		{[]string{"policy", "del", "x"}, `unknown command "del" for "jobq policy"; use list, set or unset`},
		{[]string{"dlq"}, `"jobq dlq" needs a subcommand: list, purge or requeue`},
		{[]string{"schedule"}, `"jobq schedule" needs a subcommand: add, list, pause, resume or rm`},
		{[]string{"policy"}, `"jobq policy" needs a subcommand: list, set or unset`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, append([]string{q}, tt.args...)...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, errOut, cli.ExitUsage, tt.wantErr)
			}
			if out != "" {
				t.Errorf("stdout %q; want nothing", out)
			}
			if strings.Contains(errOut, "Run 'jobq --help'") {
				t.Errorf("stderr %q points at the top-level help", errOut)
			}
		})
	}
	// --help is still help, exit 0.
	if code, out, _ := run(t, q, "dlq", "--help"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("dlq --help: exit %d, %q", code, out)
	}
}

// TestUsageHintNamesCommand: a wrong argument count or a bad flag points at
// the usage line and the --help of the command that refused it, not at the
// top-level help (which lists no subcommand's arguments or flags); an
// argument-count error ("accepts 1 arg(s), received 0") quotes the usage
// line, which names the argument that is missing.
func TestUsageHintNamesCommand(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"result"}, []string{"Usage: jobq QUEUE result ID", "Run 'jobq result --help' for usage."}},
		{[]string{"wait"}, []string{"Usage: jobq QUEUE wait ID...", "Run 'jobq wait --help' for usage."}},
		{[]string{"show", "a", "b"}, []string{"Usage: jobq QUEUE show ID", "Run 'jobq show --help' for usage."}},
		{[]string{"policy", "unset"}, []string{"Usage: jobq QUEUE policy unset KIND [KEY]", "Run 'jobq policy unset --help' for usage."}},
		{[]string{"push", "--bogus"}, []string{"unknown flag: --bogus", "Run 'jobq push --help' for usage."}},
		{[]string{"dlq", "list", "-n", "x"}, []string{"Run 'jobq dlq list --help' for usage."}},
		{[]string{"frobnicate"}, []string{"Run 'jobq --help' for usage."}},
		// An argument to a command that takes none: cobra calls it an
		// unknown command; the usage line shows there is none to give.
		{[]string{"workers", "extra"}, []string{`unexpected argument "extra" for "jobq workers", which takes none`, "Usage: jobq QUEUE workers [", "Run 'jobq workers --help' for usage."}},
		{[]string{"stats", "redis://u:pw@127.0.0.1:1/0"}, []string{"which takes none; the queue goes before the command: jobq QUEUE stats", "Usage: jobq QUEUE stats"}},
		{[]string{"requeue", "0123"}, []string{"Usage: jobq QUEUE requeue [--all", "Run 'jobq requeue --help' for usage."}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, _, errOut := run(t, append([]string{q}, tt.args...)...)
			if code != cli.ExitUsage {
				t.Fatalf("exit %d, stderr %q; want exit %d", code, errOut, cli.ExitUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q; want %q", errOut, w)
				}
			}
			if strings.Contains(errOut, "pw") {
				t.Errorf("stderr %q shows the password", errOut)
			}
			if tt.args[0] != "frobnicate" && strings.Contains(errOut, "Run 'jobq --help'") {
				t.Errorf("stderr %q points at the top-level help", errOut)
			}
		})
	}
}

// TestResultsJSONSpelling: results takes --json, as wait and groups do for
// their JSON lines, and prints exactly what --jsonl prints; with neither it
// is a usage error naming both.
func TestResultsJSONSpelling(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	if code, _, errOut := run(t, q, "push", "-c", "true"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, q, "pull"); code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errOut)
	}
	code, jsonl, errOut := run(t, q, "results", "--jsonl")
	if code != 0 || strings.Count(jsonl, "\n") != 1 {
		t.Fatalf("results --jsonl: exit %d, %q, %s; want one line", code, jsonl, errOut)
	}
	if code, out, errOut := run(t, q, "results", "--json"); code != 0 || out != jsonl {
		t.Errorf("results --json: exit %d, %q, %s; want %q", code, out, errOut, jsonl)
	}
	if code, _, errOut := run(t, q, "results"); code != cli.ExitUsage || !strings.Contains(errOut, "add --jsonl (or --json") {
		t.Errorf("results: exit %d, %s; want exit 2 naming --jsonl and --json", code, errOut)
	}
}

// TestHeartbeatFlagsContradict: --heartbeat with --no-heartbeat is a usage
// error naming both, for worker and pull, before any task is taken; it
// ran with heartbeats off. --heartbeat=false with --no-heartbeat agree.
func TestHeartbeatFlagsContradict(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	if code, _, errOut := run(t, q, "push", "-c", "true"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	for _, cmd := range []string{"worker", "pull"} {
		for _, flags := range [][]string{{"--heartbeat", "--no-heartbeat"}, {"--no-heartbeat", "--heartbeat=true"}} {
			args := append([]string{q, cmd}, flags...)
			code, _, errOut := run(t, args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, "--heartbeat and --no-heartbeat contradict each other") {
				t.Errorf("%v: exit %d, stderr %q; want exit 2 naming both flags", args, code, errOut)
			}
		}
	}
	if code, out, _ := run(t, q, "size"); code != 0 || strings.TrimSpace(out) != "1" {
		t.Errorf("size after the refusals: exit %d, %q; want the task still queued", code, out)
	}
	if code, _, errOut := run(t, q, "pull", "--heartbeat=false", "--no-heartbeat"); code != 0 {
		t.Errorf("pull --heartbeat=false --no-heartbeat: exit %d: %s", code, errOut)
	}
}

// TestNoCommand: 'jobq' or 'jobq QUEUE' without a command is a usage error
// (exit 2, the help on stderr), as a group such as 'jobq dlq' without a
// subcommand is; it printed the help and exited 0. A mistyped command,
// which is taken for the queue, is named as an unknown command. --help is
// still exit 0, and a group's usage is its [command] line alone.
func TestNoCommand(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	tests := []struct {
		args     []string
		want     string
		wantHelp bool
	}{
		{nil, "jobq: no command given; for example", true},
		{[]string{q}, "jobq: no command given; for example", true},
		{[]string{"-v", q}, "jobq: no command given", true},
		{[]string{"psuh"}, `jobq: unknown command "psuh" (taken as the queue, but no command follows); use backends, cancel,`, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, tt.args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, and %q", code, out, errOut, tt.want)
			}
			if got := strings.Contains(errOut, "Available Commands"); got != tt.wantHelp {
				t.Errorf("help on stderr: %v; want %v", got, tt.wantHelp)
			}
		})
	}
	code, out, _ := run(t, "--help")
	if code != 0 || !strings.Contains(out, "Usage:\n  jobq [QUEUE] [command]\n\n") {
		t.Errorf("--help: exit %d, usage %q; want exit 0 and the [command] line alone", code, out)
	}
	if _, out, _ := run(t, "schedule", "--help"); !strings.Contains(out, "Usage:\n  jobq QUEUE schedule [command]\n\n") {
		t.Errorf("schedule --help: %q; want the [command] line alone", out)
	}
}

// TestHelpOfUnknownTopic: 'jobq help TOPIC' of a command that does not
// exist is a usage error naming the commands; it printed "Unknown help
// topic" and exited 0. Help on a real command is still exit 0.
func TestHelpOfUnknownTopic(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"help", "bogus"}, {"help", "dlq", "bogus"}} {
		code, out, errOut := run(t, args...)
		if code != cli.ExitUsage || out != "" || !strings.Contains(errOut, "no help for \""+strings.Join(args[1:], " ")+"\": use one of backends,") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming the commands", args, code, out, errOut)
		}
	}
	for _, args := range [][]string{{"help"}, {"help", "push"}, {"help", "dlq", "list"}} {
		if code, out, errOut := run(t, args...); code != 0 || !strings.Contains(out, "Usage:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and the help", args, code, out, errOut)
		}
	}
}
