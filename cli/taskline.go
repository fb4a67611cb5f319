package cli

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/pyjson"
)

// lineOpts is what push's flags add to every task built from a -c value or
// a line of standard input.
type lineOpts struct {
	env     []jobq.EnvVar // -e, in command-line order, each name once
	dirsync string        // --bg-dirsync-to; empty is null
	cwd     string        // --cwd (jobq only)
}

// errNotUTF8 marks a line that is not UTF-8 text.
var errNotUTF8 = errors.New("it is not valid UTF-8 text (a task can only carry UTF-8; check the file's encoding, e.g. with iconv)")

// parseTaskLine turns one -c value or one line of standard input into a
// task, by ai4s-jobq's rules, so that both tools push the same bytes and
// IDs:
//
//   - A line is used exactly as read, its trailing newline included; a blank
//     line is the command "\n" (bash runs it as a no-op that succeeds).
//   - A line starting with '{' (first byte, no leading space) is a JSON object
//     of kwargs, kept in its key order: -e variables update its "env" object
//     (added at the end when missing), then "bg_dirsync_to" is added when
//     missing. --cwd adds "cwd" when missing.
//   - Anything else is a command: kwargs {"cmd": LINE, "bg_dirsync_to": DIR or
//     null, "env": {-e...}}.
func parseTaskLine(line string, o lineOpts) (*jobq.Task, error) {
	if !utf8.ValidString(line) {
		return nil, errNotUTF8
	}
	if !strings.HasPrefix(line, "{") {
		return commandTask(line, o), nil
	}
	v, err := pyjson.ParseString(line)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON task: %w (a line starting with '{' must be a JSON object such as {\"cmd\": \"echo hi\"}; to push a shell command that starts with '{', start the line with a space)", err)
	}
	if err := checkShellFields(v); err != nil {
		return nil, err
	}
	keys, vals := v.Members()
	keys, vals = append([]string(nil), keys...), append([]pyjson.Value(nil), vals...)
	var after, afterGroups []string
	if _, shell := v.Get("cmd"); shell {
		// A shell task's dependencies are jobq's, kept beside the message:
		// never in the kwargs an ai4s-jobq worker reads.
		if keys, vals, after, err = takeNames(keys, vals, "after"); err != nil {
			return nil, err
		}
		if keys, vals, afterGroups, err = takeNames(keys, vals, "after_group"); err != nil {
			return nil, err
		}
	}
	if i := indexOf(keys, "env"); i < 0 {
		keys, vals = append(keys, "env"), append(vals, envValue(o.env))
	} else if vals[i], err = mergeEnv(vals[i], o.env); err != nil {
		return nil, err
	}
	if indexOf(keys, "bg_dirsync_to") < 0 {
		keys, vals = append(keys, "bg_dirsync_to"), append(vals, dirsyncValue(o.dirsync))
	}
	return &jobq.Task{Payload: encodeKwargs(pyjson.Value{Kind: pyjson.Object, Keys: keys, Vals: vals}, o.cwd), After: after, AfterGroups: afterGroups}, nil
}

// takeNames removes member key from an object's keys and vals and returns
// its value: a string or an array of strings (task IDs, or groups).
func takeNames(keys []string, vals []pyjson.Value, key string) ([]string, []pyjson.Value, []string, error) {
	i := indexOf(keys, key)
	if i < 0 {
		return keys, vals, nil, nil
	}
	v := vals[i]
	keys, vals = append(keys[:i:i], keys[i+1:]...), append(vals[:i:i], vals[i+1:]...)
	bad := fmt.Errorf("%q must be a string or a list of strings, such as [\"ID1\", \"ID2\"]", key)
	switch v.Kind {
	case pyjson.String:
		return keys, vals, []string{v.Str}, nil
	case pyjson.Array:
		names := make([]string, len(v.Vals))
		for j, e := range v.Vals {
			if e.Kind != pyjson.String {
				return nil, nil, nil, bad
			}
			names[j] = e.Str
		}
		return keys, vals, names, nil
	}
	return nil, nil, nil, bad
}

// commandTask is the task of a line that is a shell command.
func commandTask(line string, o lineOpts) *jobq.Task {
	if line == "" {
		// Task.Command cannot be empty; the kwargs object carries it.
		return &jobq.Task{Payload: encodeKwargs(pyjson.Value{Kind: pyjson.Object,
			Keys: []string{"cmd", "bg_dirsync_to", "env"},
			Vals: []pyjson.Value{{Kind: pyjson.String}, dirsyncValue(o.dirsync), envValue(o.env)},
		}, o.cwd)}
	}
	return &jobq.Task{Command: line, Env: o.env, DirSyncTo: o.dirsync, Cwd: o.cwd}
}

// checkShellFields checks the kwargs v of a shell task (one with "cmd") as
// a worker reads them: refused here rather than stored for every worker to
// refuse.
func checkShellFields(v pyjson.Value) error {
	cmd, ok := v.Get("cmd")
	if !ok {
		return nil
	}
	if cmd.Kind != pyjson.String {
		return fmt.Errorf(`"cmd" must be a string, got a JSON %s`, kindWord(cmd.Kind))
	}
	for _, name := range []string{"bg_dirsync_to", "cwd"} {
		if f, ok := v.Get(name); ok && f.Kind != pyjson.String && f.Kind != pyjson.Null {
			return fmt.Errorf(`%q must be a string or null, got a JSON %s`, name, kindWord(f.Kind))
		}
	}
	return nil
}

// mergeEnv checks a JSON task's "env" object and updates it with the -e
// variables add, each replacing the value of its name or added at the end.
func mergeEnv(env pyjson.Value, add []jobq.EnvVar) (pyjson.Value, error) {
	if env.Kind != pyjson.Object {
		return env, fmt.Errorf(`"env" must be a JSON object of variables, got a JSON %s`, kindWord(env.Kind))
	}
	names, values := env.Members()
	names, values = append([]string(nil), names...), append([]pyjson.Value(nil), values...)
	for j, val := range values {
		if val.Kind == pyjson.Array || val.Kind == pyjson.Object {
			return env, fmt.Errorf(`"env" value of %s must be a string, got a JSON %s`, names[j], kindWord(val.Kind))
		}
		if names[j] == "" || strings.ContainsAny(names[j], "=\x00") {
			return env, fmt.Errorf(`"env" name %q is invalid: it must be non-empty without '=' or NUL`, names[j])
		}
	}
	for _, e := range add {
		if k := indexOf(names, e.Name); k >= 0 {
			values[k] = pyjson.Value{Kind: pyjson.String, Str: e.Value}
		} else {
			names, values = append(names, e.Name), append(values, pyjson.Value{Kind: pyjson.String, Str: e.Value})
		}
	}
	return pyjson.Value{Kind: pyjson.Object, Keys: names, Vals: values}, nil
}

// encodeKwargs writes kwargs as Python does, adding "cwd" when cwd is set
// and kwargs have none.
func encodeKwargs(kw pyjson.Value, cwd string) []byte {
	if cwd != "" && indexOf(kw.Keys, "cwd") < 0 {
		kw.Keys = append(kw.Keys, "cwd")
		kw.Vals = append(kw.Vals, pyjson.Value{Kind: pyjson.String, Str: cwd})
	}
	return pyjson.AppendValue(nil, kw)
}

func envValue(env []jobq.EnvVar) pyjson.Value {
	v := pyjson.Value{Kind: pyjson.Object}
	for _, e := range env {
		v.Keys = append(v.Keys, e.Name)
		v.Vals = append(v.Vals, pyjson.Value{Kind: pyjson.String, Str: e.Value})
	}
	return v
}

func dirsyncValue(dir string) pyjson.Value {
	if dir == "" {
		return pyjson.Value{Kind: pyjson.Null}
	}
	return pyjson.Value{Kind: pyjson.String, Str: dir}
}

func indexOf(keys []string, k string) int {
	for i, key := range keys {
		if key == k {
			return i
		}
	}
	return -1
}

func kindWord(k pyjson.Kind) string {
	return [...]string{pyjson.Null: "null", pyjson.Bool: "boolean", pyjson.Number: "number",
		pyjson.String: "string", pyjson.Array: "array", pyjson.Object: "object"}[k]
}
