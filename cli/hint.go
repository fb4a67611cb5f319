package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/spf13/pflag"

	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/internal/shellword"
)

// commandHint is a jobq command a message suggests running next, with the
// queue as the user gave it: on the command line, redacted and quoted for
// the shell; from the environment or a file, left out, since the next
// command reads it from there too.
func (a *app) commandHint(args string) string {
	if a.queue == "" {
		return "jobq " + args
	}
	return "jobq " + shellword.Quote(redact.URL(a.queue)) + " " + args
}

// withQueueHints puts the queue's URL (redacted) into the commands the
// library's messages suggest as `jobq QUEUE ...`, so that they can be run
// as they are printed.
func (a *app) withQueueHints(msg string) string {
	if a.queue == "" {
		return msg
	}
	return strings.ReplaceAll(msg, "`jobq QUEUE ", "`"+a.commandHint(""))
}

// resumePushHint is the command that pushes the input again from line
// from: from the file standard input was read from, where it was one,
// else from the same producer piped through tail.
func (a *app) resumePushHint(from int, flags string) string {
	push := a.commandHint("push" + flags)
	tail := "tail -n +" + strconv.Itoa(from)
	if name := stdinFile(a); name != "" {
		return fmt.Sprintf("%s %s | %s", tail, shellword.Quote(name), push)
	}
	return fmt.Sprintf("(the same input) | %s | %s", tail, push)
}

// stdinFile is the path of the regular file standard input reads, or "".
func stdinFile(a *app) string {
	f, ok := a.stdin.(*os.File)
	if !ok {
		return ""
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	name, err := filepath.EvalSymlinks("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil {
		return ""
	}
	return name
}

// flagsHint is the flags set on the command line, as they would be typed
// again (leading space included), for a hint that reruns the command: the
// same flags give the same tasks and so the same IDs. The queue's own
// flags are left out: commandHint places the queue.
func flagsHint(fs *pflag.FlagSet) string {
	var b strings.Builder
	// Redact hides passwords and the values of secret-looking variables.
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "queue" || f.Name == "queue-file" {
			return
		}
		values := []string{f.Value.String()}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			values = sv.GetSlice()
		}
		for _, v := range values {
			if f.Value.Type() == "bool" && v == "true" {
				b.WriteString(" --" + f.Name)
				continue
			}
			b.WriteString(" --" + f.Name + "=" + shellword.Quote(redact.String(v)))
		}
	})
	return b.String()
}

// toPerson reports whether standard error is a terminal and -q was not
// given: where progress and notes for a person waiting belong.
func (a *app) toPerson() bool {
	file, ok := a.stderr.(*os.File)
	return ok && a.quiet == 0 && isatty.IsTerminal(file.Fd())
}
