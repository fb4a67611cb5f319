package jobq

// The task on the wire, compatible with ai4s-jobq (see docs/wire-format.md).
//
// Schema v1, as ai4s-jobq writes it with Python's json.dumps:
//
//	{"version": 1, "reply_requested": false, "kwargs": "<kwargs JSON>", "num_retries": 0, "id": "<md5>"}
//
// Schema v2 adds these optional members, written in this order after
// num_retries and only when set (zero values are left out):
//
//	"kind": string                         Task.Kind
//	"priority": int                        Task.Priority
//	"not_before": "RFC 3339 UTC time"      Task.NotBefore (nanoseconds when non-zero)
//	"gate_cmd": string                     Task.GateCmd
//	"concurrency_key": string              Task.ConcurrencyKey
//	"rate_limit_key": string               Task.RateLimitKey
//	"retry_backoff": {"base": secs, "cap": secs}  Task.RetryBackoff (seconds, to the millisecond)
//	"time_limit": secs                     Task.TimeLimit (seconds, to the millisecond)
//	"metadata": {string: string}           Task.Metadata, keys sorted
//	"stash": {"url": s, "sha256": s, "size": n}   Task.Stash
//	"attempts": [{"delivery": n, "outcome": s, "worker": s, "host": s,
//	              "detail": s, "start": t, "end": t, "exit_code": n}]
//	                                       Task.Attempts (attempts.go)
//
// The id is the MD5 hex of the object without "id", so it covers every
// member. Members jobq does not know (ai4s-jobq's "min_version", say) are
// kept from a decoded message and written back, in order, just before "id".

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/pyjson"
)

// Schema versions.
const (
	schemaV1 = 1
	schemaV2 = 2
)

// encodeTask validates t and returns its message body: schema v1, exactly
// as ai4s-jobq writes it, when t uses only what v1 can express, schema v2
// otherwise. When t.ID is empty it is set to the deterministic ID (see
// TaskID). A task decoded by UnmarshalTask and left unchanged (apart from
// NumRetries, ReplyRequested and the v2 fields) keeps its kwargs and unknown
// members byte for byte.
func encodeTask(t *Task) ([]byte, error) { return marshalTask(t, wireOmit{}) }

// wireOmit lists the v2 members a backend makes redundant, because writing
// them would not change how the task runs there: a priority the backend
// ignores, a delay the backend applies itself. Leaving them out keeps such
// tasks v1, which ai4s-jobq workers can run.
type wireOmit struct {
	priority  bool
	notBefore bool
}

// omitFor returns what a backend with caps makes redundant.
func omitFor(caps driver.Capabilities) wireOmit {
	return wireOmit{
		priority:  caps.Features[driver.Priority].Level == driver.Unsupported,
		notBefore: caps.Features[driver.DelayedPush].Level == driver.Native,
	}
}

// apply returns t without the members o leaves out (t itself when none).
func (o wireOmit) apply(t *Task) *Task {
	if (!o.priority || t.Priority == 0) && (!o.notBefore || t.NotBefore.IsZero()) {
		return t
	}
	c := *t
	if o.priority {
		c.Priority = 0
	}
	if o.notBefore {
		c.NotBefore = time.Time{}
	}
	return &c
}

func marshalTask(t *Task, omit wireOmit) ([]byte, error) {
	prefix, err := wirePrefix(omit.apply(t))
	if err != nil {
		return nil, err
	}
	if t.ID == "" {
		t.ID = md5Hex(append(prefix, '}'))
	} else if !pyjson.ValidText(t.ID) {
		return nil, errorf(errcode.InvalidArgument, "encode", "task ID %q is not valid UTF-8", t.ID)
	}
	out := append(prefix, `, "id": `...)
	out = pyjson.AppendString(out, t.ID)
	return append(out, '}'), nil
}

// taskID returns the deterministic ID of t without changing t: the MD5 hex
// of its encoding without the "id" member, which is how ai4s-jobq computes
// it. Two tasks with the same content have the same ID, which backends with
// duplicate detection use to drop repeated pushes.
func taskID(t *Task) (string, error) {
	prefix, err := wirePrefix(t)
	if err != nil {
		return "", err
	}
	return md5Hex(append(prefix, '}')), nil
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	var h [2 * md5.Size]byte
	hex.Encode(h[:], sum[:])
	return string(h[:])
}

// needsV2 reports whether t uses anything schema v1 cannot express.
func needsV2(t *Task) bool {
	return t.Kind != "" || t.Priority != 0 || !t.NotBefore.IsZero() || t.GateCmd != "" ||
		t.ConcurrencyKey != "" || t.RateLimitKey != "" || len(t.Metadata) > 0 || t.Stash != nil || len(t.Attempts) > 0 ||
		!t.RetryBackoff.IsZero() || t.TimeLimit != 0
}

// wirePrefix validates t and returns its encoding without the "id" member
// and without the closing brace.
func wirePrefix(t *Task) ([]byte, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return appendPrefix(t)
}

// appendPrefix is wirePrefix without the validation: for the ID of a
// decoded task, whose kwargs and members are written back as received.
func appendPrefix(t *Task) ([]byte, error) {
	kwargs, err := kwargsText(t)
	if err != nil {
		return nil, err
	}
	version := schemaV1
	if needsV2(t) {
		version = schemaV2
	}
	b := make([]byte, 0, len(kwargs)+len(kwargs)/8+128)
	b = append(b, `{"version": `...)
	b = strconv.AppendInt(b, int64(version), 10)
	b = append(b, `, "reply_requested": `...)
	b = strconv.AppendBool(b, t.ReplyRequested)
	b = append(b, `, "kwargs": `...)
	b = pyjson.AppendString(b, kwargs)
	b = append(b, `, "num_retries": `...)
	b = strconv.AppendInt(b, int64(t.NumRetries), 10)
	if version == schemaV2 {
		b = appendV2(b, t)
	}
	if t.kwargs != nil {
		b = append(b, t.kwargs.extra...)
	}
	return b, nil
}

func appendV2(b []byte, t *Task) []byte {
	if t.Kind != "" {
		b = append(b, `, "kind": `...)
		b = pyjson.AppendString(b, t.Kind)
	}
	if t.Priority != 0 {
		b = append(b, `, "priority": `...)
		b = strconv.AppendInt(b, int64(t.Priority), 10)
	}
	if !t.NotBefore.IsZero() {
		b = append(b, `, "not_before": `...)
		b = appendTime(b, t.NotBefore)
	}
	for _, f := range []struct{ name, value string }{
		{"gate_cmd", t.GateCmd},
		{"concurrency_key", t.ConcurrencyKey},
		{"rate_limit_key", t.RateLimitKey},
	} {
		if f.value != "" {
			b = append(b, `, "`+f.name+`": `...)
			b = pyjson.AppendString(b, f.value)
		}
	}
	if !t.RetryBackoff.IsZero() {
		rb := t.RetryBackoff.filled()
		b = append(b, `, "retry_backoff": {"base": `...)
		b = appendSeconds(b, rb.Base)
		b = append(b, `, "cap": `...)
		b = appendSeconds(b, rb.Cap)
		b = append(b, '}')
	}
	if t.TimeLimit != 0 {
		b = append(b, `, "time_limit": `...)
		b = appendSeconds(b, t.TimeLimit)
	}
	if len(t.Metadata) > 0 {
		keys := make([]string, 0, len(t.Metadata))
		for k := range t.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `, "metadata": {`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = pyjson.AppendString(b, k)
			b = append(b, ": "...)
			b = pyjson.AppendString(b, t.Metadata[k])
		}
		b = append(b, '}')
	}
	if s := t.Stash; s != nil {
		b = append(b, `, "stash": {"url": `...)
		b = pyjson.AppendString(b, s.URL)
		b = append(b, `, "sha256": `...)
		b = pyjson.AppendString(b, s.SHA256)
		b = append(b, `, "size": `...)
		b = strconv.AppendInt(b, s.Size, 10)
		b = append(b, '}')
	}
	if len(t.Attempts) > 0 {
		b = appendAttempts(b, t.Attempts)
	}
	return b
}

// kwargsText returns the kwargs JSON string of t: the received one when t
// was decoded and its kwargs are unchanged, a fresh Python-style encoding
// otherwise.
func kwargsText(t *Task) (string, error) {
	if r := t.kwargs; r != nil && r.command == t.Command && r.cwd == t.Cwd && r.dirsync == t.DirSyncTo &&
		r.payload == string(t.Payload) && slices.Equal(r.env, t.Env) {
		return r.text, nil
	}
	if t.Command == "" {
		v, err := pyjson.Parse(t.Payload)
		if err != nil {
			return "", errorf(errcode.InvalidArgument, "encode", "task payload is not valid JSON: %v", err)
		}
		if v.Kind != pyjson.Object {
			return "", errorf(errcode.InvalidArgument, "encode", "task payload must be a JSON object")
		}
		text := string(pyjson.AppendValue(nil, v))
		// Workers read a payload with a "cmd" member as a shell task: one
		// they could not read is refused here rather than stored.
		if _, shell := v.Get("cmd"); shell {
			var e *Error
			if err := decodeKwargsValue(&Task{}, &rawKwargs{text: text}, v); errors.As(err, &e) {
				return "", errorf(errcode.InvalidArgument, "encode", "task payload has a \"cmd\" member, so workers read it as a shell task, but %s", strings.TrimPrefix(e.Msg, "task "))
			}
		}
		return text, nil
	}
	// ai4s-jobq's push -c CMD [-e K=V] [--bg-dirsync-to DIR]:
	// {"cmd": CMD, "bg_dirsync_to": DIR or null, "env": {...}}.
	b := make([]byte, 0, len(t.Command)+len(t.DirSyncTo)+64)
	b = append(b, `{"cmd": `...)
	b = pyjson.AppendString(b, t.Command)
	if t.DirSyncTo == "" {
		b = append(b, `, "bg_dirsync_to": null, "env": {`...)
	} else {
		b = append(b, `, "bg_dirsync_to": `...)
		b = pyjson.AppendString(b, t.DirSyncTo)
		b = append(b, `, "env": {`...)
	}
	for i, e := range pyEnv(t.Env) {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = pyjson.AppendString(b, e.Name)
		b = append(b, ": "...)
		b = pyjson.AppendString(b, e.Value)
	}
	b = append(b, '}')
	if t.Cwd != "" {
		b = append(b, `, "cwd": `...)
		b = pyjson.AppendString(b, t.Cwd)
	}
	return string(append(b, '}')), nil
}

// pyEnv collapses repeated names as Python's dict(env_vars) does: the first
// position, the last value.
func pyEnv(env []EnvVar) []EnvVar {
	dup := false
	for i := range env {
		for j := i + 1; j < len(env) && !dup; j++ {
			dup = env[i].Name == env[j].Name
		}
	}
	if !dup {
		return env
	}
	out := make([]EnvVar, 0, len(env))
	at := map[string]int{}
	for _, e := range env {
		if i, ok := at[e.Name]; ok {
			out[i].Value = e.Value
			continue
		}
		at[e.Name] = len(out)
		out = append(out, e)
	}
	return out
}

// unmarshalTask decodes a message body written by jobq or ai4s-jobq: schema
// v0 (no reply_requested), v1, v2, and ai4s-jobq's legacy objects without a
// version. Kwargs with a "cmd" member make a shell task (Command, Env in
// order, Cwd); any other kwargs object becomes Payload. The task remembers
// its kwargs text and unknown members, so MarshalTask re-encodes an
// unchanged task to the same bytes. Input that is not a task is an *Error
// with code InvalidArgument saying what is wrong; receivers dead-letter such
// messages as poison.
func unmarshalTask(body []byte) (*Task, error) {
	doc, err := pyjson.Parse(body)
	if err != nil {
		return nil, decodeError("message body is not JSON: %v", err)
	}
	if doc.Kind != pyjson.Object {
		return nil, decodeError("message body is a JSON %s, not a task object", kindName(doc.Kind))
	}
	t := &Task{Version: schemaV1}
	legacy, err := decodeVersion(t, doc)
	if err != nil {
		return nil, err
	}
	raw := &rawKwargs{}
	var seen taskMembers
	keys, vals := doc.Members()
	for i, k := range keys {
		if err := decodeMember(t, raw, &seen, k, vals[i]); err != nil {
			return nil, err
		}
	}
	if err := seen.check(t, legacy); err != nil {
		return nil, err
	}
	if err := decodeKwargs(t, raw); err != nil {
		return nil, err
	}
	t.kwargs = raw
	if err := fillTaskID(t); err != nil {
		return nil, err
	}
	return t, nil
}

// decodeVersion sets t.Version from the "version" member of doc. legacy is
// true when there is none: ai4s-jobq reads such a task as v1 with 5
// retries.
func decodeVersion(t *Task, doc pyjson.Value) (legacy bool, err error) {
	v, ok := doc.Get("version")
	if !ok {
		return true, nil
	}
	n, err := wireInt("version", v)
	if err != nil {
		return false, err
	}
	if n < 0 || n > schemaV2 {
		return false, decodeError("task schema version %d is not supported; this jobq reads versions 0, 1 and 2 (upgrade jobq to read newer tasks)", n)
	}
	t.Version = int(n)
	return false, nil
}

// taskMembers records which of a task's required members were present.
type taskMembers struct {
	kwargs, retries, reply bool
}

// decodeMember decodes member k of a task object into t, keeping the text
// of kwargs and of members this version does not know in raw.
func decodeMember(t *Task, raw *rawKwargs, seen *taskMembers, k string, v pyjson.Value) error {
	switch k {
	case "version":
	case "kwargs":
		if v.Kind != pyjson.String {
			return decodeError(`task "kwargs" is a JSON %s; it must be a string holding a JSON object`, kindName(v.Kind))
		}
		seen.kwargs, raw.text = true, v.Str
	case "num_retries":
		n, err := wireRetries(v)
		seen.retries, t.NumRetries = true, n
		return err
	case "reply_requested":
		if v.Kind != pyjson.Bool {
			return decodeError(`task "reply_requested" is a JSON %s; it must be true or false`, kindName(v.Kind))
		}
		seen.reply = true
		t.ReplyRequested = v.Bool && t.Version != 0 // v0 has no replies
	case "id":
		return decodeOptString(k, v, &t.ID)
	default:
		return decodeOther(t, raw, k, v)
	}
	return nil
}

// decodeOther decodes a v2 member into t, or keeps a member this version
// does not know in raw.extra, so that it is written back unchanged.
func decodeOther(t *Task, raw *rawKwargs, k string, v pyjson.Value) error {
	if t.Version == schemaV2 {
		known, err := decodeV2(t, k, v)
		if known || err != nil {
			return err
		}
	}
	raw.extra = append(raw.extra, ", "...)
	raw.extra = pyjson.AppendString(raw.extra, k)
	raw.extra = append(raw.extra, ": "...)
	raw.extra = pyjson.AppendValue(raw.extra, v)
	return nil
}

// check fails when a required member was missing, and gives a legacy task
// without "num_retries" ai4s-jobq's 5 retries.
func (seen taskMembers) check(t *Task, legacy bool) error {
	switch {
	case !seen.kwargs:
		return decodeError(`task has no "kwargs" member`)
	case !seen.retries && legacy:
		t.NumRetries = 5
	case !seen.retries:
		return decodeError(`task has no "num_retries" member`)
	case !seen.reply && t.Version >= schemaV1 && !legacy:
		return decodeError(`task of schema version %d has no "reply_requested" member`, t.Version)
	}
	return nil
}

// fillTaskID computes t.ID when the message did not carry one, from the
// bytes the message would have with it (as received, unvalidated: a value
// that jobq would not write, such as a num_retries beyond 32 bits or a
// NaN in a payload, does not stop the task from being read and run, as it
// does not when the message has an ID).
func fillTaskID(t *Task) error {
	if t.ID != "" {
		return nil
	}
	prefix, err := appendPrefix(t)
	if err != nil {
		return decodeError("task cannot be re-encoded to compute its ID: %v", err)
	}
	t.ID = md5Hex(append(prefix, '}'))
	return nil
}

// decodeKwargs fills the shell fields or Payload of t from the kwargs text.
func decodeKwargs(t *Task, raw *rawKwargs) error {
	kw, err := pyjson.ParseString(raw.text)
	if err != nil {
		return decodeError("task kwargs are not JSON: %v", err)
	}
	if kw.Kind != pyjson.Object {
		return decodeError("task kwargs are a JSON %s; they must be an object", kindName(kw.Kind))
	}
	return decodeKwargsValue(t, raw, kw)
}

// decodeKwargsValue is decodeKwargs of the kwargs object kw, parsed from
// raw.text.
func decodeKwargsValue(t *Task, raw *rawKwargs, kw pyjson.Value) error {
	cmd, shell := kw.Get("cmd")
	if !shell {
		t.Payload = json.RawMessage(raw.text)
		raw.payload = raw.text
		return nil
	}
	if cmd.Kind != pyjson.String {
		return decodeError(`task kwargs "cmd" must be a string (found a JSON %s)`, kindName(cmd.Kind))
	}
	t.Command = cmd.Str
	raw.shell = true
	if d, ok := kw.Get("bg_dirsync_to"); ok && d.Kind != pyjson.Null {
		if d.Kind != pyjson.String {
			return decodeError(`task kwargs "bg_dirsync_to" is a JSON %s; it must be a string or null`, kindName(d.Kind))
		}
		t.DirSyncTo = d.Str
	}
	if env, ok := kw.Get("env"); ok && env.Kind != pyjson.Null {
		if env.Kind != pyjson.Object {
			return decodeError(`task kwargs "env" is a JSON %s; it must be an object of strings`, kindName(env.Kind))
		}
		names, values := env.Members()
		t.Env = make([]EnvVar, len(names))
		for i, name := range names {
			s, ok := pyStr(values[i])
			if !ok {
				return decodeError(`task environment variable %q is a JSON %s; it must be a string`, name, kindName(values[i].Kind))
			}
			t.Env[i] = EnvVar{Name: name, Value: s}
		}
	}
	if cwd, ok := kw.Get("cwd"); ok && cwd.Kind != pyjson.Null {
		if cwd.Kind != pyjson.String {
			return decodeError(`task kwargs "cwd" is a JSON %s; it must be a string`, kindName(cwd.Kind))
		}
		t.Cwd = cwd.Str
	}
	raw.command, raw.cwd, raw.dirsync = t.Command, t.Cwd, t.DirSyncTo
	raw.env = slices.Clone(t.Env)
	return nil
}

// pyStr converts a scalar env value as ai4s-jobq's worker does (str(v)).
func pyStr(v pyjson.Value) (string, bool) {
	switch v.Kind {
	case pyjson.String:
		return v.Str, true
	case pyjson.Number:
		return string(pyjson.AppendNumber(nil, v.Str)), true
	case pyjson.Bool:
		if v.Bool {
			return "True", true
		}
		return "False", true
	case pyjson.Null:
		return "None", true
	}
	return "", false
}

// decodeV2 reads one schema v2 member into t, reporting whether k is one.
func decodeV2(t *Task, k string, v pyjson.Value) (bool, error) {
	switch k {
	case "kind":
		return true, decodeOptString(k, v, &t.Kind)
	case "priority":
		if v.Kind == pyjson.Null {
			return true, nil
		}
		n, err := wireInt(k, v)
		t.Priority = int(n)
		return true, err
	case "not_before":
		return true, decodeNotBefore(t, v)
	case "gate_cmd":
		return true, decodeOptString(k, v, &t.GateCmd)
	case "concurrency_key":
		return true, decodeOptString(k, v, &t.ConcurrencyKey)
	case "rate_limit_key":
		return true, decodeOptString(k, v, &t.RateLimitKey)
	case "metadata":
		return true, decodeMetadata(t, v)
	case "stash":
		if v.Kind == pyjson.Null {
			return true, nil
		}
		ref, err := decodeStashRef(v)
		t.Stash = ref
		return true, err
	case "attempts":
		as, err := decodeAttempts(v)
		t.Attempts = as
		return true, err
	case "retry_backoff":
		if v.Kind == pyjson.Null {
			return true, nil
		}
		b, err := decodeBackoff(v)
		t.RetryBackoff = b
		return true, err
	case "time_limit":
		if v.Kind == pyjson.Null {
			return true, nil
		}
		d, err := wireSeconds(k, v)
		t.TimeLimit = d
		return true, err
	}
	return false, nil
}

// decodeOptString reads the string member k into dst; null leaves dst as
// it is.
func decodeOptString(k string, v pyjson.Value, dst *string) error {
	switch v.Kind {
	case pyjson.String:
		*dst = v.Str
	case pyjson.Null:
	default:
		return notAString(k, v.Kind) // out of line, so that this inlines
	}
	return nil
}

func notAString(k string, kind pyjson.Kind) error {
	return decodeError("task %q is a JSON %s; it must be a string", k, kindName(kind))
}

// decodeNotBefore reads the "not_before" member, an RFC 3339 time; null
// or "" leaves t.NotBefore zero.
func decodeNotBefore(t *Task, v pyjson.Value) error {
	var s string
	if err := decodeOptString("not_before", v, &s); err != nil || s == "" {
		return err
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return decodeError("task \"not_before\" %q is not an RFC 3339 time: %v", s, err)
	}
	t.NotBefore = at
	return nil
}

// decodeMetadata reads the "metadata" member, an object of strings; null
// leaves t.Metadata nil.
func decodeMetadata(t *Task, v pyjson.Value) error {
	if v.Kind == pyjson.Null {
		return nil
	}
	if v.Kind != pyjson.Object {
		return decodeError(`task "metadata" is a JSON %s; it must be an object of strings`, kindName(v.Kind))
	}
	names, values := v.Members()
	t.Metadata = make(map[string]string, len(names))
	for i, name := range names {
		if values[i].Kind != pyjson.String {
			return decodeError("task metadata %q is a JSON %s; it must be a string", name, kindName(values[i].Kind))
		}
		t.Metadata[name] = values[i].Str
	}
	return nil
}

// decodeBackoff reads the "retry_backoff" member.
func decodeBackoff(v pyjson.Value) (Backoff, error) {
	if v.Kind != pyjson.Object {
		return Backoff{}, decodeError(`task "retry_backoff" is a JSON %s; it must be an object {"base": seconds, "cap": seconds}`, kindName(v.Kind))
	}
	base, okB := v.Get("base")
	cp, okC := v.Get("cap")
	if !okB || !okC {
		return Backoff{}, decodeError(`task "retry_backoff" must have both "base" and "cap" (seconds)`)
	}
	var b Backoff
	var err error
	if b.Base, err = wireSeconds("retry_backoff base", base); err != nil {
		return Backoff{}, err
	}
	if b.Cap, err = wireSeconds("retry_backoff cap", cp); err != nil {
		return Backoff{}, err
	}
	if b.Base == 0 || b.Base > b.Cap {
		return Backoff{}, decodeError(`task "retry_backoff" base %v and cap %v must be positive, with the base at most the cap`, b.Base, b.Cap)
	}
	return b, nil
}

// appendTime writes t as a JSON string in RFC 3339 with nanoseconds, in
// UTC. The format's characters need no escaping, so it is appended as is,
// without the copy a formatted string costs.
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendSeconds writes d as a JSON number of seconds, to the millisecond
// (a positive d shorter than a millisecond is written as one).
func appendSeconds(b []byte, d time.Duration) []byte {
	ms := d.Round(time.Millisecond).Milliseconds()
	if d > 0 && ms == 0 {
		ms = 1
	}
	return pyjson.AppendFloat(b, float64(ms)/1000)
}

// wireSeconds reads a duration written by appendSeconds (any JSON number
// of seconds from 0 to ten years, rounded to the millisecond).
func wireSeconds(name string, v pyjson.Value) (time.Duration, error) {
	if v.Kind != pyjson.Number {
		return 0, decodeError("task %q is a JSON %s; it must be a number of seconds", name, kindName(v.Kind))
	}
	f, err := strconv.ParseFloat(v.Str, 64)
	if err != nil || f != f || f < 0 || f > maxBackoff.Seconds() {
		return 0, decodeError("task %q is %s; it must be a number of seconds from 0 to %v", name, v.Str, maxBackoff)
	}
	return time.Duration(math.Round(f*1000)) * time.Millisecond, nil
}

func decodeStashRef(v pyjson.Value) (*StashRef, error) {
	if v.Kind != pyjson.Object {
		return nil, decodeError(`task "stash" is a JSON %s; it must be an object with url, sha256 and size`, kindName(v.Kind))
	}
	ref := &StashRef{}
	u, okU := v.Get("url")
	h, okH := v.Get("sha256")
	n, okN := v.Get("size")
	if !okU || !okH || !okN || u.Kind != pyjson.String || h.Kind != pyjson.String || u.Str == "" || h.Str == "" {
		return nil, decodeError(`task "stash" must have a non-empty string "url" and "sha256" and an integer "size"`)
	}
	size, err := wireIntBits("stash size", n, 64)
	if err != nil {
		return nil, err
	}
	ref.URL, ref.SHA256, ref.Size = u.Str, h.Str, size
	return ref, nil
}

// wireRetries reads the "num_retries" member: any JSON integer, since
// Python (ai4s-jobq's --num-retries) writes integers of any size. A
// negative one is 0; one beyond int is the largest int. A budget beyond
// maxNumRetries cannot be written back (Validate refuses it), so a worker
// counts it from the delivery count instead of dead-lettering a task that
// ai4s-jobq would run.
func wireRetries(v pyjson.Value) (int, error) {
	if v.Kind != pyjson.Number {
		return 0, decodeError("task \"num_retries\" is a JSON %s; it must be an integer", kindName(v.Kind))
	}
	n, err := strconv.Atoi(v.Str)
	switch {
	case err == nil:
		return max(n, 0), nil
	case errors.Is(err, strconv.ErrRange) && strings.HasPrefix(v.Str, "-"):
		return 0, nil
	case errors.Is(err, strconv.ErrRange):
		return math.MaxInt, nil
	}
	return 0, decodeError("task \"num_retries\" is %s; it must be an integer", v.Str)
}

// wireInt reads an integer member.
func wireInt(name string, v pyjson.Value) (int64, error) { return wireIntBits(name, v, 32) }

func wireIntBits(name string, v pyjson.Value, bits int) (int64, error) {
	if v.Kind != pyjson.Number {
		return 0, decodeError("task %q is a JSON %s; it must be an integer", name, kindName(v.Kind))
	}
	n, err := strconv.ParseInt(v.Str, 10, bits)
	if err != nil {
		return 0, decodeError("task %q is %s; it must be an integer that fits in %d bits", name, v.Str, bits)
	}
	return n, nil
}

func kindName(k pyjson.Kind) string {
	switch k {
	case pyjson.Null:
		return "null"
	case pyjson.Bool:
		return "boolean"
	case pyjson.Number:
		return "number"
	case pyjson.String:
		return "string"
	case pyjson.Array:
		return "array"
	default:
		return "object"
	}
}

func decodeError(format string, args ...any) *Error {
	return &Error{Code: errcode.InvalidArgument, Op: "decode", Msg: fmt.Sprintf(format, args...)}
}

// featureV2 is the key of the once-per-queue warning about v2 bodies on a
// queue ai4s-jobq workers may read.
const featureV2 driver.Feature = "schema-v2"

// marshal encodes t for q: v2 members that q's backend makes redundant are
// left out (see wireOmit), and a task that still needs schema v2 on a queue
// ai4s-jobq can read draws one WARN per queue (see warnV2).
func (q *Queue) marshal(t *Task) ([]byte, error) {
	omit := omitFor(q.caps)
	body, err := marshalTask(t, omit)
	if err == nil && needsV2(omit.apply(t)) {
		q.warnV2(v2Fields(omit.apply(t)))
	}
	return body, err
}

// warnV2 logs, once per queue and only on a queue ai4s-jobq can read
// (Capabilities.SharedWithAI4SJobq), that its tasks use schema v2, on which
// ai4s-jobq workers stop.
func (q *Queue) warnV2(fields []string) {
	if !q.caps.SharedWithAI4SJobq {
		return
	}
	if q.firstWarning(featureV2) {
		q.log.Warn("jobq: tasks on this queue use schema v2, which ai4s-jobq workers cannot run (they exit with \"Unsupported Task version 2\"); run only jobq workers on it",
			"queue", q.url, "fields", strings.Join(fields, ","))
	}
}

// v2Fields names the v2 members t uses.
func v2Fields(t *Task) []string {
	var f []string
	for _, m := range []struct {
		name string
		set  bool
	}{
		{"kind", t.Kind != ""}, {"priority", t.Priority != 0}, {"not_before", !t.NotBefore.IsZero()}, {"gate_cmd", t.GateCmd != ""},
		{"concurrency_key", t.ConcurrencyKey != ""}, {"rate_limit_key", t.RateLimitKey != ""},
		{"metadata", len(t.Metadata) > 0}, {"stash", t.Stash != nil}, {"attempts", len(t.Attempts) > 0},
		{"retry_backoff", !t.RetryBackoff.IsZero()}, {"time_limit", t.TimeLimit != 0},
	} {
		if m.set {
			f = append(f, m.name)
		}
	}
	return f
}
