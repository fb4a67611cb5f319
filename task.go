package jobq

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/pyjson"
)

// maxNumRetries is the largest Task.NumRetries: the wire format carries it
// as a 32-bit integer, which is what every reader (jobq's and ai4s-jobq's
// backends) can count down.
const maxNumRetries = math.MaxInt32

// EnvVar is one environment variable of a shell task. Task.Env is a slice,
// not a map, because the order is part of the wire format (ai4s-jobq keeps
// command-line order) and so of the task's ID.
type EnvVar struct {
	Name  string
	Value string
}

// StashRef points at a payload kept in a stash (claim check) because the task
// was larger than the backend's message limit.
type StashRef struct {
	// URL is where the full encoded task is stored, for example
	// gs://bucket/prefix/<sha256>.
	URL string `json:"url"`
	// SHA256 is the hex SHA-256 of the stored bytes.
	SHA256 string `json:"sha256"`
	// Size is the stored size in bytes.
	Size int64 `json:"size"`
}

// Task is the unit of work that is queued.
//
// A shell task sets Command (and optionally Env and Cwd); a task for a Go
// handler sets Payload to any JSON object instead, which is the task's kwargs
// on the wire. A Task that uses only what ai4s-jobq's schema v1 can express
// (Command, Env, Cwd, Payload, NumRetries, ReplyRequested) is encoded
// byte-for-byte as ai4s-jobq encodes it; anything else makes it schema v2.
type Task struct {
	// ID identifies the task. Leave it empty to get the deterministic ID: the
	// MD5 of the encoded task without its id, as ai4s-jobq computes it, so
	// the same task pushed twice has the same ID.
	ID string
	// Command is the shell command (run with bash -c).
	Command string
	// Env holds environment variables for the command, in order.
	Env []EnvVar
	// Cwd is the command's working directory; empty means the worker's.
	Cwd string
	// DirSyncTo is ai4s-jobq's bg_dirsync_to: a directory the worker copies
	// the task's $AMLT_DIRSYNC_DIR into, in the background while the
	// command runs and once more when it ends. Empty means none (null on
	// the wire). Shell tasks only.
	DirSyncTo string
	// Payload is the kwargs JSON object for a non-shell task. Must be empty
	// when Command is set. An object with a "cmd" member is a shell task's
	// kwargs, which workers read as such (how an empty command is pushed):
	// encoding refuses one they could not read, such as a "cwd" that is
	// not a string.
	Payload json.RawMessage
	// NumRetries is how many times the task may be retried after a failure
	// before it is dead-lettered: 0 to 2147483647 (the wire format carries it
	// as a 32-bit integer). ai4s-jobq's default is 0.
	NumRetries int
	// ReplyRequested is carried for compatibility with ai4s-jobq.
	ReplyRequested bool

	// Kind names the Go handler that runs the task (worker.Mux routes on
	// it); a shell task needs none. Schema v2.
	Kind string

	// Priority orders claims, driver.MinPriority..driver.MaxPriority, higher first. Schema v2.
	Priority int
	// NotBefore delays the task's first delivery until then, by the clock
	// of the machine that pushes it: the task waits NotBefore minus that
	// machine's now, counted on the engine's clock. Schema v2.
	NotBefore time.Time
	// GateCmd is a command a worker runs before the task; the task runs only
	// on a worker where it succeeds. Schema v2.
	GateCmd string
	// ConcurrencyKey and RateLimitKey name queue policies that limit how many
	// tasks with the key run at once and how often they start. Schema v2.
	ConcurrencyKey string
	RateLimitKey   string
	// RetryBackoff delays each retry after a failure: Base doubled per
	// failed attempt, up to Cap, with jitter. Zero takes the queue's
	// retry-backoff policy, or the default (10s up to 10m). Schema v2.
	RetryBackoff Backoff
	// TimeLimit stops an attempt that runs longer (terminated, then
	// killed) and counts it as a failure; it overrides the worker's
	// Options.TaskTimeLimit. Zero means the worker's. Schema v2.
	TimeLimit time.Duration

	// Group names the campaign (a sweep) the task belongs to, so that it
	// can be followed as a whole (Admin.Group). It is kept beside the
	// message, never in it: it changes neither the body nor the ID, and
	// ai4s-jobq workers never see it. Empty means none; a received task
	// has the group it was pushed with. Backends without the groups
	// feature refuse it.
	Group string

	// After names tasks (by ID) that must all succeed before this one
	// runs, and AfterGroups groups that must all end with every task
	// succeeded. Until then the task is held, unclaimable; if a parent is
	// dead-lettered or cancelled (or a group ends with such a task), the
	// task is cancelled with a reason naming it. Like Group they are kept
	// beside the message, never in it: the body and the ID are the same
	// with or without them. At most driver.MaxAfter names in all; backends
	// without the dependencies feature refuse them. A received task has
	// neither: it was released because they were met.
	After       []string
	AfterGroups []string

	// Metadata is free-form labels, kept with the task. Schema v2.
	Metadata map[string]string
	// Attempts is the task's attempt history (the last 10 attempts), kept
	// in the message where the backend updates messages in place; read it
	// with Envelope.Attempts, which adds the deliveries whose lease expired.
	// Schema v2.
	Attempts []Attempt
	// Stash is set on the wire form of a task whose payload was moved to a
	// stash. Tasks handed to users are always resolved, with Stash nil.
	Stash *StashRef

	// Version is the schema version the task was decoded from (0, 1 or 2);
	// ignored when encoding, which picks the lowest version that can express
	// the task.
	Version int

	// kwargs is the kwargs string exactly as received, with the fields it
	// was decoded into, so that re-encoding a received task (to decrement its
	// retries) reproduces the original bytes.
	kwargs *rawKwargs
}

// rawKwargs remembers a decoded kwargs string and what it decoded to.
type rawKwargs struct {
	text    string
	command string
	env     []EnvVar
	cwd     string
	dirsync string
	payload string
	// shell is set when the kwargs have a "cmd" member, which may be the
	// empty string (ai4s-jobq pushes and runs `push -c ''`).
	shell bool
	// extra holds the members jobq does not know, Python-encoded as
	// `, "name": value` in their original order; they are written back
	// before "id".
	extra []byte
}

// IsShell reports whether the task is a shell command: Command is set, or
// the task was decoded from kwargs whose "cmd" is the empty string (which
// bash runs as a command that does nothing and succeeds).
func (t *Task) IsShell() bool { return t.Command != "" || t.emptyCommand() }

// emptyCommand reports whether t was decoded from kwargs with "cmd": ""
// and still has neither a command nor a payload.
func (t *Task) emptyCommand() bool {
	return t.Command == "" && len(t.Payload) == 0 && t.kwargs != nil && t.kwargs.shell
}

// EnvMap returns the task's environment as a map (later duplicates win).
func (t *Task) EnvMap() map[string]string {
	m := make(map[string]string, len(t.Env))
	for _, e := range t.Env {
		m[e.Name] = e.Value
	}
	return m
}

// Validate checks the task for values no backend can store or no worker
// can run, and returns an InvalidArgument error that names the field and
// says how to fix it. Every push runs it (MarshalTask does), so the CLI and
// every backend refuse the same tasks.
func (t *Task) Validate() error {
	if t == nil {
		return errorf(errcode.InvalidArgument, "validate", "task is nil")
	}
	for _, check := range taskChecks {
		if err := check(t); err != nil {
			return err
		}
	}
	return nil
}

// taskChecks are Validate's checks, in the order their errors are
// reported.
var taskChecks = [...]func(*Task) error{
	(*Task).checkShape,
	(*Task).checkRanges,
	(*Task).checkPayload,
	(*Task).checkEnvNames,
	(*Task).checkText,
}

// checkShape refuses a task that is neither a shell task nor a payload
// task, or mixes the two.
func (t *Task) checkShape() error {
	switch {
	case t.Command == "" && len(t.Payload) == 0 && !t.emptyCommand():
		return errorf(errcode.InvalidArgument, "validate", "task has neither a command nor a payload: set Task.Command (push -c CMD) or Task.Payload")
	case t.Command != "" && len(t.Payload) > 0:
		return errorf(errcode.InvalidArgument, "validate", "task has both a command and a payload; a shell task keeps its settings in Command, Env and Cwd")
	case len(t.Payload) > 0 && (t.Cwd != "" || len(t.Env) > 0):
		return errorf(errcode.InvalidArgument, "validate", "task has a payload and Cwd or Env, which are for shell tasks; a payload task keeps its settings in its payload")
	case t.DirSyncTo != "" && len(t.Payload) > 0:
		return errorf(errcode.InvalidArgument, "validate", "task has a payload and DirSyncTo; a payload task keeps bg_dirsync_to in its payload")
	}
	return nil
}

// checkRanges refuses numbers and durations out of range.
func (t *Task) checkRanges() error {
	switch {
	case t.NumRetries < 0 || t.NumRetries > maxNumRetries:
		return errorf(errcode.InvalidArgument, "validate", "num_retries is %d; it must be 0..%d", t.NumRetries, maxNumRetries)
	case t.Priority < driver.MinPriority || t.Priority > driver.MaxPriority:
		return errorf(errcode.InvalidArgument, "validate", "priority %d is out of range; use %d..%d (higher runs first)", t.Priority, driver.MinPriority, driver.MaxPriority)
	case t.TimeLimit < 0 || t.TimeLimit > maxBackoff:
		return errorf(errcode.InvalidArgument, "validate", "time limit %v is out of range; use 0 (the worker's) up to %v", t.TimeLimit, maxBackoff)
	}
	return t.RetryBackoff.validate("validate")
}

// checkPayload refuses a payload that is not a JSON object, and a shell
// task's kwargs (a payload with "cmd") whose text a worker cannot run.
func (t *Task) checkPayload() error {
	if len(t.Payload) == 0 {
		return nil
	}
	if !isJSONObject(t.Payload) {
		return errorf(errcode.InvalidArgument, "validate", "task payload must be a JSON object: %s", notAnObject(t.Payload))
	}
	// JSON carries a NUL only as the escape \u0000, so a payload without
	// one needs no parsing (a false hit, an escaped backslash before
	// "u0000", only costs the parse).
	if !bytes.Contains(t.Payload, []byte(`\u0000`)) {
		return nil
	}
	v, err := pyjson.Parse(t.Payload)
	if err != nil {
		return nil // not JSON that pyjson reads: encoding reports it
	}
	if _, shell := v.Get("cmd"); !shell {
		return nil // a Go handler's payload may hold any JSON string
	}
	var kw Task
	if decodeKwargsValue(&kw, &rawKwargs{}, v) != nil {
		return nil // encoding reports what a worker could not read
	}
	return kw.checkShellText(`payload's "cmd"`, `payload's "cwd"`, `payload's "bg_dirsync_to"`, `payload's "env"`)
}

// checkEnvNames refuses environment variable names a process cannot have.
func (t *Task) checkEnvNames() error {
	for _, e := range t.Env {
		if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") {
			return errorf(errcode.InvalidArgument, "validate", "environment variable name %q is invalid: it must be non-empty without '=' or NUL", e.Name)
		}
	}
	return nil
}

// checkText refuses text fields that are not UTF-8 (Python strings cannot
// hold them, so no ai4s-jobq reader could decode the message) or that hold
// a NUL byte (no command line, environment or path can, and Postgres text
// cannot store one). Each string is checked on its own: two halves of a
// character split between a name and its value are two invalid strings,
// not one valid one.
func (t *Task) checkText() error {
	if err := t.checkShellText("command", "cwd", "bg_dirsync_to", "environment"); err != nil {
		return err
	}
	for _, f := range [...]struct{ name, value string }{
		{"ID", t.ID}, {"kind", t.Kind}, {"gate command", t.GateCmd},
		{"concurrency key", t.ConcurrencyKey}, {"rate-limit key", t.RateLimitKey},
	} {
		if err := checkTextField(f.name, f.value); err != nil {
			return err
		}
	}
	for k, v := range t.Metadata {
		if err := checkTextField("metadata name "+strconv.Quote(k), k); err != nil {
			return err
		}
		if err := checkTextField("metadata "+strconv.Quote(k)+"'s value", v); err != nil {
			return err
		}
	}
	if t.Stash != nil {
		if err := checkTextField("stash URL", t.Stash.URL); err != nil {
			return err
		}
		return checkTextField("stash checksum", t.Stash.SHA256)
	}
	return nil
}

// checkShellText is checkText of what a worker hands to the shell: the
// command, its directories and its environment, under the given names.
func (t *Task) checkShellText(command, cwd, dirsync, env string) error {
	for _, f := range [...]struct{ name, value string }{{command, t.Command}, {cwd, t.Cwd}, {dirsync, t.DirSyncTo}} {
		if err := checkTextField(f.name, f.value); err != nil {
			return err
		}
	}
	for _, e := range t.Env {
		if err := checkTextField(env+" variable name "+strconv.Quote(e.Name), e.Name); err != nil {
			return err
		}
		if err := checkTextField(env+" variable "+strconv.Quote(e.Name)+"'s value", e.Value); err != nil {
			return err
		}
	}
	return nil
}

// checkTextField refuses s, the task's field, unless it is UTF-8 text
// without NUL.
func checkTextField(field, s string) error {
	if !pyjson.ValidText(s) {
		return errorf(errcode.InvalidArgument, "validate", "task %s is not valid UTF-8; JSON messages can only carry UTF-8 text", field)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return errorf(errcode.InvalidArgument, "validate",
			"task %s contains a NUL character (\\u0000), which task text cannot carry (no command, environment variable or path can hold one): remove it (pass binary data base64-encoded, or in a file)", field)
	}
	return nil
}

// isJSONObject reports whether b is one valid JSON object. It allocates
// nothing, which matters when millions of tasks are pushed.
func isJSONObject(b []byte) bool {
	return json.Valid(b) && bytes.TrimLeft(b, " \t\r\n")[0] == '{'
}

// notAnObject says what b, which is not a JSON object, is instead.
func notAnObject(b []byte) string {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err.Error()
	}
	switch v.(type) {
	case nil:
		return "it is null"
	case bool:
		return "it is a boolean"
	case float64:
		return "it is a number"
	case string:
		return "it is a string"
	default:
		return "it is an array"
	}
}

// String returns a short description for logs: the ID and the command or
// payload, truncated.
func (t *Task) String() string {
	what := t.Command
	if what == "" {
		what = string(t.Payload)
	}
	if len(what) > 80 {
		what = what[:77] + "..."
	}
	return fmt.Sprintf("%s %q", t.ID, what)
}
