// Package cli is the jobq command tree (cobra). It parses, calls the jobq
// and worker packages, and prints; no queue logic lives here. cmd/jobq is
// its main package.
package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/queueurl"
	"github.com/jobq/jobq/internal/redact"
)

// app holds what every command shares: the global flags, the streams, the
// logger.
type app struct {
	queue     string // from the command line: the first argument or --queue
	queueFile string // --queue-file
	// resolved is the queue URL once queueURL has found it.
	resolved  string
	connStr   string
	stash     string
	verbose   int
	quiet     int
	logFormat string

	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
	// baseEnv is the environment as the command started; tasks get this
	// one, less what worker.Withheld names (unless --pass-env gives it
	// back).
	baseEnv []string
	// tel is the OpenTelemetry SDK the OTEL_* variables ask for (otel.go),
	// started by open; metricsReader is the worker's --metrics-addr reader.
	tel           *telemetry
	metricsReader *sdkmetric.ManualReader
}

// Main runs the jobq command with args (without the program name) on the
// process's standard streams and returns the exit code.
func Main(args []string) int {
	ctx := context.Background()
	return Run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
}

// Run runs the jobq command with args and the given streams and returns the
// exit code (see ExitOK, ExitFailure, ExitUsage).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, baseEnv: os.Environ()}
	var queue string // the ai4s-jobq-style first argument
	root := a.rootCommand(&queue)
	var rest []string
	queue, rest = splitQueueArg(root, args)
	root.SetArgs(rest)
	root.SetIn(stdin)
	// cobra prints help, usage and some errors itself ("Unknown help
	// topic"); they may quote the command line.
	root.SetOut(redactWriter{stdout})
	root.SetErr(redactWriter{stderr})
	cmd, err := root.ExecuteContextC(ctx)
	if terr := a.tel.shutdown(); terr != nil && a.log != nil {
		a.log.Warn("could not export the last telemetry", "error", terr)
	}
	if err != nil {
		code := exitCode(err)
		var ee *exitError
		if !errors.As(err, &ee) {
			// cobra's own errors (unknown flag or command, bad flag value)
			// are usage errors; anything else a command returned unwrapped
			// is a failure.
			if isCobraUsage(err) {
				code = ExitUsage
			}
		}
		// jobq's own errors already start with "jobq". Every message is
		// redacted: cobra's quote the command line ("unknown command
		// postgres://u:PW@..."), and backends' may quote a URL or a
		// connection string.
		msg := a.withQueueHints(redact.String(argumentNotCommand(cmd, err.Error())))
		if !strings.HasPrefix(msg, "jobq") {
			msg = "jobq: " + msg
		}
		fmt.Fprintln(stderr, msg)
		if code == ExitUsage && isCobraUsage(err) && !strings.Contains(msg, "--help' for usage") {
			usageHint(stderr, cmd, err)
		}
		return code
	}
	return ExitOK
}

// strictHelp makes 'jobq help TOPIC' of an unknown topic a usage error
// (exit 2) naming the commands; cobra's help command printed "Unknown help
// topic" and the usage, and exited 0.
func strictHelp(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() != "help" {
			continue
		}
		run := c.Run
		c.Run = nil
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if found, rest, err := root.Find(args); found == nil || err != nil || len(rest) > 0 || (len(args) > 0 && found == root) {
				return usageError("jobq: no help for %q: use one of %s", strings.Join(args, " "), subcommandNames(root))
			}
			run(cmd, args)
			return nil
		}
	}
}

// usageHint follows a command-line error from cobra with where to look:
// the usage line of the command that refused its arguments ("accepts 1
// arg(s), received 0" does not say which), and that command's --help,
// which lists its flags where the top-level help does not.
func usageHint(w io.Writer, cmd *cobra.Command, err error) {
	if cmd == nil {
		fmt.Fprintln(w, "Run 'jobq --help' for usage.")
		return
	}
	if isArgCount(err) || isExtraArg(cmd, err.Error()) {
		fmt.Fprintf(w, "Usage: %s\n", queueUseLine(cmd))
	}
	fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmd.CommandPath())
}

// isExtraArg recognises cobra.NoArgs's error: an argument given to a
// command that has no subcommands and takes no arguments, which cobra
// calls an "unknown command".
func isExtraArg(cmd *cobra.Command, msg string) bool {
	return cmd != nil && cmd.HasParent() && !cmd.HasSubCommands() && strings.HasPrefix(msg, "unknown command ")
}

// argumentNotCommand words cobra.NoArgs's error for what it is: 'jobq Q
// stats extra' gave an argument stats does not take, not a command.
func argumentNotCommand(cmd *cobra.Command, msg string) string {
	if !isExtraArg(cmd, msg) {
		return msg
	}
	msg = "unexpected argument " + strings.TrimPrefix(msg, "unknown command ") + ", which takes none"
	if strings.Contains(msg, "://") {
		msg += "; the queue goes before the command: jobq QUEUE " + strings.TrimPrefix(cmd.CommandPath(), "jobq ")
	}
	return msg
}

// isArgCount recognises cobra's errors for a wrong number of arguments.
func isArgCount(err error) bool {
	s := err.Error()
	return strings.Contains(s, " arg(s)")
}

// isCobraUsage recognises the errors cobra and pflag return for a bad
// command line.
func isCobraUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "bad flag syntax", "if any flags in the group"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

const rootLong = `jobq runs distributed work queues on engines you already have: an embedded
SQLite file, Postgres, Redis, Azure Storage Queue or Azure Service Bus.

The queue comes first, as in ai4s-jobq, then the command:

  jobq 'sqlite://./work.db?queue=default' push -c "echo hi"
  jobq 'sqlite://./work.db?queue=default' worker -n 4

The queue may also be given with --queue, --queue-file PATH (a file holding
the URL), $JOBQ_QUEUE, $JOBQ_QUEUE_FILE or, as in ai4s-jobq,
$JOBQ_STORAGE_QUEUE. A password on the command line is visible to every
local user in ps: put a URL that holds one in $JOBQ_QUEUE or in a file of
mode 0600. Queue forms:
  sqlite://PATH?queue=NAME           embedded SQLite file (no server)
  postgres://USER@HOST/DB?queue=NAME Postgres
  redis://HOST:PORT/DB?queue=NAME    Redis
  azqueue://ACCOUNT/QUEUE, or ACCOUNT/QUEUE   Azure Storage Queue
  sb://NAMESPACE/QUEUE               Azure Service Bus
Run 'jobq backends' for the schemes this build supports and what each can do.

Durations take Go syntax plus days and weeks: 90s, 10m, 1h30m, 2d, 1w.

Exit codes: 0 success; 1 a task, the worker or the backend failed;
2 usage or configuration error; 3 a preemption notice stopped the worker.`

func (a *app) rootCommand(positional *string) *cobra.Command {
	root := &cobra.Command{
		Use:           "jobq [QUEUE] COMMAND",
		Short:         "Push, run and inspect tasks on a work queue",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Example: `  jobq sqlite://./work.db push -c "echo hello"
  seq 100 | sed 's/^/echo task /' | jobq sqlite://./work.db push
  jobq sqlite://./work.db worker -n 4
  seq 10 | sed 's/^/.\/job /' | jobq sqlite://./work.db push --wait
  JOBQ_QUEUE=sqlite://./work.db jobq stats`,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if q := *positional; q != "" {
				if a.queue != "" && a.queue != q {
					return usageError("two queues given: %s as the first argument and %s with --queue; give one", redact.URL(q), redact.URL(a.queue))
				}
				a.queue = q
			}
			if a.queue != "" && a.queueFile != "" {
				return usageError("two queues given: %s on the command line and --queue-file %s; give one", redact.URL(a.queue), a.queueFile)
			}
			if err := a.setup(); err != nil {
				return err
			}
			a.warnSecretsInArgs()
			return nil
		},
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	// Usage lines show where the queue goes: jobq QUEUE push ...
	// A group (root, dlq, policy, schedule) runs only to refuse being run
	// without a subcommand: its usage is the [command] line alone.
	root.SetUsageTemplate(strings.NewReplacer(
		"Usage:{{if .Runnable}}", "Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}",
		"{{.UseLine}}", "{{queueUseLine .}}",
		"{{.CommandPath}} [command]", "{{queueCommandLine .}}",
	).Replace(root.UsageTemplate()))
	pf := root.PersistentFlags()
	pf.StringVar(&a.queue, "queue", "", "the queue URL (default: the first argument, else --queue-file, $JOBQ_QUEUE, $JOBQ_QUEUE_FILE, $JOBQ_STORAGE_QUEUE); a password in it is visible to every local user in ps: prefer $JOBQ_QUEUE or --queue-file")
	pf.StringVar(&a.queueFile, "queue-file", "", "read the queue URL from the file at `PATH` (default $JOBQ_QUEUE_FILE), which keeps a password in it out of ps; make it mode 0600")
	pf.StringVar(&a.connStr, "conn-str", "", "Azure connection string for azqueue:// and sb:// queues (default $JOBQ_CONNECTION_STRING, which keeps its key out of ps)")
	pf.StringVar(&a.stash, "stash", "", "where large task payloads go: azblob://account/container/prefix, gs://bucket/prefix or file:///dir (default $JOBQ_STASH)")
	pf.CountVarP(&a.verbose, "verbose", "v", "more logging (debug)")
	pf.CountVarP(&a.quiet, "quiet", "q", "less logging: -q warnings and errors, -qq errors only")
	pf.StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return asUsage(negativeValueHint(err)) })
	root.AddCommand(a.pushCommand(), a.workerCommand(), a.pullCommand(), a.peekCommand(), a.sizeCommand(),
		a.statsCommand(), a.workersCommand(), a.dashboardCommand(), a.clearCommand(), a.dlqCommand(), a.policyCommand(), a.pauseCommand(), a.resumeCommand(), a.scheduleCommand(), a.schedulerCommand(), a.showCommand(),
		a.resultCommand(), a.waitCommand(), a.cancelCommand(), a.requeueCommand(), a.purgeCommand(), a.backendsCommand(), a.conformanceCommand(),
		a.groupCommand(), a.groupsCommand(), a.resultsCommand(),
		a.versionCommand())
	requireSubcommands(root)
	strictHelp(root)
	// Bare 'jobq' or 'jobq QUEUE' names no command: a usage error, as for
	// a group such as 'jobq dlq' (subcommands.go), with the help on stderr.
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		if q := *positional; q != "" && !strings.ContainsAny(q, ":/") {
			// 'jobq psuh': a mistyped command is taken for the queue.
			return usageError("jobq: unknown command %q (taken as the queue, but no command follows); use %s", q, subcommandNames(cmd))
		}
		cmd.SetOut(cmd.ErrOrStderr())
		_ = cmd.Help()
		return usageError("jobq: no command given; for example jobq 'sqlite://./work.db?queue=default' push -c \"echo hi\"")
	}
	return root
}

// setup builds the logger once the flags are parsed.
func (a *app) setup() error {
	level := slog.LevelInfo
	switch {
	case a.verbose > 0 && a.quiet > 0:
		return usageError("-v and -q contradict each other; use one")
	case a.verbose > 0:
		level = slog.LevelDebug
	case a.quiet == 1:
		level = slog.LevelWarn
	case a.quiet > 1:
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "text":
		a.log = slog.New(slog.NewTextHandler(redactWriter{a.stderr}, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(redactWriter{a.stderr}, opts))
	default:
		return usageError("--log-format %q is not supported: use text or json", a.logFormat)
	}
	slog.SetDefault(a.log)
	return nil
}

// queueURL resolves the queue, once: the first argument or --queue, then
// --queue-file, $JOBQ_QUEUE, $JOBQ_QUEUE_FILE, then ai4s-jobq's
// $JOBQ_STORAGE_QUEUE (its SERVICE/QUEUE or sb://NAMESPACE/QUEUE spec,
// though any queue URL works).
func (a *app) queueURL() (string, error) {
	if a.resolved != "" {
		return a.resolved, nil
	}
	q := a.queue
	var err error
	for _, src := range []struct {
		name, value string
		file        bool
	}{
		{"--queue-file", a.queueFile, true},
		{"$JOBQ_QUEUE", os.Getenv("JOBQ_QUEUE"), false},
		{"$JOBQ_QUEUE_FILE", os.Getenv("JOBQ_QUEUE_FILE"), true},
		{"$JOBQ_STORAGE_QUEUE", os.Getenv("JOBQ_STORAGE_QUEUE"), false},
	} {
		v := strings.TrimSpace(src.value)
		if q != "" || v == "" {
			continue
		}
		if q = v; src.file {
			if q, err = a.readQueueFile(src.name, v); err != nil {
				return "", err
			}
		}
	}
	if q == "" {
		return "", usageError("no queue given: put it first (jobq QUEUE COMMAND), or use --queue, --queue-file, $JOBQ_QUEUE, $JOBQ_QUEUE_FILE or $JOBQ_STORAGE_QUEUE; for example jobq 'sqlite://./work.db?queue=default' push -c \"echo hi\"")
	}
	a.resolved = q
	return q, nil
}

// readQueueFile reads the queue URL from the file at path, named by flag
// (--queue-file or $JOBQ_QUEUE_FILE), and warns when other users can read
// it. Its errors never quote the file's content.
func (a *app) readQueueFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageError("cannot read the queue URL from %s %s: %v; give a file holding the URL on one line", flag, path, err)
	}
	q := strings.TrimSpace(string(b))
	switch {
	case q == "":
		return "", usageError("%s %s is empty; write the queue URL in it, on one line", flag, path)
	case strings.ContainsAny(q, "\r\n"):
		return "", usageError("%s %s holds more than one line; write only the queue URL in it", flag, path)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o044 != 0 {
		a.log.Warn("the queue file can be read by other users; restrict it with chmod 600", "file", path, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
	}
	return q, nil
}

// warnSecretsInArgs warns, once, when the command line holds a credential
// (a password in the queue URL, a secret query parameter, a key in
// --conn-str): every local user can read a process's arguments with ps. The
// warning names the safer ways and never the secret; what counts as a
// credential is what jobq.Redact would hide.
func (a *app) warnSecretsInArgs() {
	if a.queue != "" && redact.String(a.queue) != a.queue {
		a.log.Warn("the queue URL on the command line holds a password or key, which every local user can read with ps; give it with $JOBQ_QUEUE, or --queue-file PATH (a file of mode 0600) or $JOBQ_QUEUE_FILE, instead")
	}
	if a.connStr != "" && redact.String(a.connStr) != a.connStr {
		a.log.Warn("the --conn-str on the command line holds a key, which every local user can read with ps; give it with $JOBQ_CONNECTION_STRING instead")
	}
}

// open opens the queue, turning an unknown scheme into a clear "backend not
// available" usage error.
func (a *app) open(ctx context.Context) (*jobq.Queue, error) {
	return a.openQueue(ctx, false, 0)
}

// openReadOnly opens the queue as open does, for a command that only reads
// it (jobq.Options.ReadOnly): it works where writes cannot (a read-only
// file or role, a full disk) and creates nothing.
func (a *app) openReadOnly(ctx context.Context) (*jobq.Queue, error) {
	return a.openQueue(ctx, true, 0)
}

// openWorker opens the queue as open does, for a worker that runs
// concurrency tasks at once (jobq.Options.Concurrency): a backend that
// pools connections keeps no more than the worker uses.
func (a *app) openWorker(ctx context.Context, concurrency int) (*jobq.Queue, error) {
	return a.openQueue(ctx, false, concurrency)
}

func (a *app) openQueue(ctx context.Context, readOnly bool, concurrency int) (*jobq.Queue, error) {
	raw, err := a.queueURL()
	if err != nil {
		return nil, err
	}
	norm := queueurl.Normalize(raw)
	if u, perr := url.Parse(norm); perr != nil || u.Scheme == "" {
		if perr != nil && strings.Contains(perr.Error(), "invalid URL escape") {
			// The escape may be part of a password: not quoted.
			return nil, usageError("%q does not parse as a URL: it has a %% not followed by two hex digits; write a %% as %%25 (in a password too)", redact.URL(raw))
		}
		if perr != nil && strings.Contains(perr.Error(), `invalid character " " in host name`) {
			// sqlite://my dir/q.db: a relative path's first directory is
			// the URL's host, where a space cannot be.
			return nil, usageError("%q does not parse as a URL: the part after :// cannot hold a space (for sqlite://, the first directory of a relative path): start the path with ./ (sqlite://./my dir/q.db)", redact.URL(raw))
		}
		var uerr *url.Error
		if errors.As(perr, &uerr) && strings.Contains(norm, "://") {
			// A URL with a scheme and a flaw (a port that is not a
			// number, a bracket missing): say which. The inner error
			// names the part at fault, not the whole URL, which holds
			// the password.
			return nil, usageError("%q does not parse as a URL: %v", redact.URL(raw), uerr.Err)
		}
		return nil, usageError("%q is not a queue: use a URL such as sqlite://./work.db?queue=default, or ACCOUNT/QUEUE for Azure Storage Queue (run 'jobq backends' for every scheme)", redact.URL(raw))
	} else if _, ok := jobq.DefaultURLMux().Opener(u.Scheme); !ok {
		return nil, usageError("backend not available: no backend for scheme %q is built into this jobq (available: %s); run 'jobq backends'",
			u.Scheme, strings.Join(jobq.DefaultURLMux().Schemes(), ", "))
	}
	// The connection string reaches the backend and the azblob stash as a
	// value: the process environment is left as it is.
	connStr := a.connStr
	if connStr == "" {
		connStr = os.Getenv("JOBQ_CONNECTION_STRING")
	}
	opts := jobq.Options{Logger: a.log, ConnectionString: connStr, ReadOnly: readOnly, Concurrency: concurrency}
	if err := a.setupTelemetry(ctx); err != nil {
		return nil, err
	}
	a.tel.options(&opts)
	if err := a.applyStash(&opts); err != nil {
		return nil, err
	}
	q, err := jobq.OpenWithOptions(ctx, norm, opts)
	if err != nil {
		if errcode.Of(err) == errcode.InvalidArgument {
			return nil, asUsage(err)
		}
		return nil, failure(err)
	}
	return q, nil
}

// splitQueueArg takes the queue from the first positional argument when it
// is not a command name (ai4s-jobq style: jobq QUEUE COMMAND), and returns
// it with the remaining arguments.
func splitQueueArg(root *cobra.Command, args []string) (string, []string) {
	valued := map[string]bool{}
	root.PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if f.NoOptDefVal == "" {
			valued["--"+f.Name] = true
			if f.Shorthand != "" {
				valued["-"+f.Shorthand] = true
			}
		}
	})
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			return "", args
		}
		if strings.HasPrefix(arg, "-") {
			if valued[arg] {
				i++ // its value follows
			}
			continue
		}
		if isCommand(root, arg) {
			return "", args
		}
		rest := append(append([]string{}, args[:i]...), args[i+1:]...)
		return arg, rest
	}
	return "", args
}

func isCommand(root *cobra.Command, name string) bool {
	if name == "help" || name == "completion" {
		return true
	}
	for _, c := range root.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return true
		}
	}
	return false
}

// cobra's template functions are global; register ours once.
func init() {
	cobra.AddTemplateFunc("queueUseLine", queueUseLine)
	cobra.AddTemplateFunc("queueCommandLine", queueCommandLine)
}

// noQueue lists the commands that need no queue.
var noQueue = map[string]bool{"backends": true, "version": true, "help": true, "completion": true, "jobq": true}

// queueUseLine is a command's usage line with the queue in its place.
func queueUseLine(c *cobra.Command) string {
	line := c.UseLine()
	if noQueue[c.Name()] || (c.HasParent() && noQueue[c.Parent().Name()] && c.Parent().HasParent()) {
		return line
	}
	return strings.Replace(line, "jobq ", "jobq QUEUE ", 1)
}

// queueCommandLine is the usage line of a command with sub-commands.
func queueCommandLine(c *cobra.Command) string {
	if !c.HasParent() {
		return "jobq [QUEUE] [command]"
	}
	return strings.Replace(c.CommandPath(), "jobq ", "jobq QUEUE ", 1) + " [command]"
}

// redactWriter passes every write through redact.String, so that no
// credential reaches the terminal or a log file: slog and cobra write a
// whole record or message per call.
type redactWriter struct{ w io.Writer }

func (r redactWriter) Write(p []byte) (int, error) {
	if !bytes.ContainsAny(p, "@=%") {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, redact.String(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// negativeValue is the flag parser's complaint about a negative number or
// duration given as an argument (policy set max-depth -5).
var negativeValue = regexp.MustCompile(`^unknown shorthand flag: '\d' in (-\d\S*)$`)

// negativeValueHint adds to such a complaint how to pass the value.
func negativeValueHint(err error) error {
	m := negativeValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	return fmt.Errorf("%w: an argument that starts with '-' reads as a flag; put -- before it to pass %s as a value", err, m[1])
}
