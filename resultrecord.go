package jobq

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/pyjson"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/stash"
)

// A result record's details travel in driver.ResultRecord.Data as one JSON
// object, written with the wire format's encoder:
//
//	{"v": 1, "delivery_count": n, "exit_code": n, "error": s, "output": s,
//	 "value": s, "value_stash": {"url": s, "sha256": s, "size": n},
//	 "started": t, "finished": t, "worker": s, "host": s, "env": s,
//	 "attempts": [...]}
//
// Only "v" is always present. A succeeded record leaves out of "attempts"
// the success that its other members describe (impliedAttempt): for a task
// that succeeded at once that was half the record. decodeRecord puts it
// back. "value" is a Go handler's JSON return value
// as a string, so that its bytes come back unchanged; a value larger than
// maxInlineValue is kept in the queue's stash instead, where one is
// configured, and "value_stash" points at it. "attempts" is the wire
// format's attempt history (attempts.go).

// recordVersion is the version of the record encoding this jobq writes
// and the newest it reads.
const recordVersion = 1

// maxRecordOutput bounds the output tail a record keeps of a task that did
// not succeed.
const maxRecordOutput = maxDetailBytes

// maxSuccessOutput bounds the output tail a record keeps of a task that
// succeeded: its output is rarely read, and a sweep of many tasks would
// otherwise keep a full tail of each.
const maxSuccessOutput = 1 << 10

// maxInlineValue is the largest handler value a record holds itself where
// the queue has a stash; larger ones go to the stash.
const maxInlineValue = 64 << 10

// recordDetails are the decoded contents of a record's Data.
type recordDetails struct {
	deliveries      int
	exitCode        *int
	errText, output string
	value           json.RawMessage
	valueRef        *StashRef // where a stashed value is; value is then nil
	started, ended  time.Time
	worker, host    string
	env             string
	group           string
	attempts        []Attempt
}

// impliedAttempt is the attempt a record of state describes without
// listing it: for a success, the last delivery, run by the record's worker
// from its start to its finish; ok is false for another state, or when the
// record has no delivery count or start to describe it by.
func (d *recordDetails) impliedAttempt(state driver.ResultState) (a Attempt, ok bool) {
	if state != driver.ResultSucceeded || d.deliveries < 1 || d.started.IsZero() || d.ended.IsZero() {
		return a, false
	}
	return Attempt{Delivery: d.deliveries, Worker: d.worker, Host: d.host, Env: d.env, Start: d.started, End: d.ended, Outcome: OutcomeSuccess}, true
}

// implies reports whether a is the attempt d describes in a record of
// state (impliedAttempt).
func (d *recordDetails) implies(state driver.ResultState, a Attempt) bool {
	want, ok := d.impliedAttempt(state)
	return ok && a.Delivery == want.Delivery && a.Outcome == want.Outcome && a.Worker == want.Worker && a.Host == want.Host && a.Env == want.Env &&
		a.Start.Equal(want.Start) && a.End.Equal(want.End) && a.ExitCode == nil && a.Detail == "" && a.RetryDelay == 0 &&
		a.Lost == 0 && a.Saved == 0
}

// encode writes d as the Data of a record of state.
func (d *recordDetails) encode(state driver.ResultState) []byte {
	// About the members' names, two times and the numbers, besides the
	// strings: one allocation for a record.
	b := make([]byte, 0, 192+len(d.errText)+len(d.output)+len(d.value)+len(d.worker)+len(d.host)+len(d.env)+len(d.group)+len(d.attempts)*96)
	b = append(b, `{"v": `...)
	b = strconv.AppendInt(b, recordVersion, 10)
	if d.deliveries > 0 {
		b = append(b, `, "delivery_count": `...)
		b = strconv.AppendInt(b, int64(d.deliveries), 10)
	}
	if d.exitCode != nil {
		b = append(b, `, "exit_code": `...)
		b = strconv.AppendInt(b, int64(*d.exitCode), 10)
	}
	for _, f := range []struct{ name, value string }{
		{"error", d.errText}, {"output", d.output}, {"value", string(d.value)}, {"worker", d.worker}, {"host", d.host}, {"env", d.env}, {"group", d.group},
	} {
		if f.value != "" {
			b = append(b, `, "`+f.name+`": `...)
			b = pyjson.AppendString(b, f.value)
		}
	}
	if ref := d.valueRef; ref != nil {
		b = append(b, `, "value_stash": {"url": `...)
		b = pyjson.AppendString(b, ref.URL)
		b = append(b, `, "sha256": `...)
		b = pyjson.AppendString(b, ref.SHA256)
		b = append(b, `, "size": `...)
		b = strconv.AppendInt(b, ref.Size, 10)
		b = append(b, '}')
	}
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"started", d.started}, {"finished", d.ended}} {
		if !f.t.IsZero() {
			b = append(b, `, "`+f.name+`": `...)
			b = appendTime(b, f.t)
		}
	}
	as := d.attempts
	if n := len(as); n > 0 && d.implies(state, as[n-1]) {
		as = as[:n-1]
	}
	if len(as) > 0 {
		b = appendAttempts(b, as)
	}
	return append(b, '}')
}

// result turns a stored record into a Result, fetching a stashed value.
func (q *Queue) result(ctx context.Context, op string, rec *driver.ResultRecord) (*Result, error) {
	r, ref, err := decodeRecord(rec)
	if err != nil || ref == nil {
		return r, err
	}
	st, err := q.stash.store(ctx, ref.URL)
	if err == nil {
		r.Value, err = stash.Load(ctx, st, ref.URL, ref.SHA256, ref.Size)
	}
	if err != nil {
		return nil, &Error{Code: errcode.Of(err), Op: op, Queue: q.url, Err: err,
			Msg: fmt.Sprintf("task %s ended (%s), but its value, kept in stash object %s, could not be read: %v", rec.ID, rec.State, redact.URL(ref.URL), err)}
	}
	return r, nil
}

// decodeRecord turns a stored record into a Result, and the reference of
// its value when that is in a stash.
func decodeRecord(rec *driver.ResultRecord) (*Result, *StashRef, error) {
	r := &Result{ID: rec.ID, State: rec.State, ExpiresAt: rec.ExpiresAt, Recorded: rec.UpdatedAt}
	if len(rec.Data) == 0 {
		return r, nil, nil
	}
	d := recordDecoder{id: rec.ID}
	doc, err := pyjson.Parse(rec.Data)
	if err != nil || doc.Kind != pyjson.Object {
		return nil, nil, d.damaged("its details are not a JSON object")
	}
	var ref *StashRef
	names, vals := doc.Members()
	for i, name := range names {
		if err := d.member(r, &ref, name, vals[i]); err != nil {
			return nil, nil, err
		}
	}
	// The success the record leaves out (encode); records written before
	// it did list it, and then their last attempt is of the last delivery.
	details := recordDetails{deliveries: r.DeliveryCount, started: r.Started, ended: r.Finished, worker: r.Worker, host: r.Host, env: r.Env}
	if a, ok := details.impliedAttempt(r.State); ok && (len(r.Attempts) == 0 || r.Attempts[len(r.Attempts)-1].Delivery < a.Delivery) {
		r.Attempts = append(r.Attempts, a)
	}
	return r, ref, nil
}

// recordDecoder decodes the members of the details of task id's result
// record.
type recordDecoder struct{ id string }

// member sets the member name of a record's details on r, or on *ref for
// a stashed value. It ignores a member it does not know.
func (d recordDecoder) member(r *Result, ref **StashRef, name string, v pyjson.Value) error {
	switch name {
	case "v":
		return d.version(v)
	case "delivery_count":
		return d.int(name, v, &r.DeliveryCount)
	case "exit_code":
		var code int
		if err := d.int(name, v, &code); err != nil {
			return err
		}
		r.ExitCode = &code
	case "error":
		return d.str(name, v, &r.Error)
	case "output":
		return d.str(name, v, &r.Output)
	case "value":
		var s string
		if err := d.str(name, v, &s); err != nil {
			return err
		}
		r.Value = json.RawMessage(s)
	case "worker":
		return d.str(name, v, &r.Worker)
	case "host":
		return d.str(name, v, &r.Host)
	case "env":
		return d.str(name, v, &r.Env)
	case "group":
		return d.str(name, v, &r.Group)
	case "started":
		return d.time(name, v, &r.Started)
	case "finished":
		return d.time(name, v, &r.Finished)
	case "value_stash":
		var err error
		if *ref, err = decodeStashRef(v); err != nil {
			return d.damaged("%v", err)
		}
	case "attempts":
		as, err := decodeAttempts(v)
		if err != nil {
			return d.damaged("%v", err)
		}
		r.Attempts = as
	}
	return nil
}

// version checks that this jobq reads the record's version "v".
func (d recordDecoder) version(v pyjson.Value) error {
	n, err := wireInt("v", v)
	if err != nil {
		return d.bad("v", "an integer")
	}
	if n > recordVersion {
		return errorf(errcode.Internal, "result", "the result record of task %s has version %d; this jobq reads up to %d (upgrade jobq)", d.id, n, recordVersion)
	}
	return nil
}

// int reads the integer member name into dst.
func (d recordDecoder) int(name string, v pyjson.Value, dst *int) error {
	n, err := wireInt(name, v)
	if err != nil {
		return d.bad(name, "an integer")
	}
	*dst = int(n)
	return nil
}

// str reads the string member name into dst.
func (d recordDecoder) str(name string, v pyjson.Value, dst *string) error {
	if v.Kind != pyjson.String {
		return d.bad(name, "a string")
	}
	*dst = v.Str
	return nil
}

// time reads the RFC 3339 time member name into dst.
func (d recordDecoder) time(name string, v pyjson.Value, dst *time.Time) error {
	if v.Kind != pyjson.String {
		return d.bad(name, "an RFC 3339 time")
	}
	t, err := time.Parse(time.RFC3339Nano, v.Str)
	if err != nil {
		return d.bad(name, "an RFC 3339 time")
	}
	*dst = t
	return nil
}

// bad is the error of a member name that is not what it must be (want).
func (d recordDecoder) bad(name, want string) error {
	return d.damaged("%q must be %s", name, want)
}

// damaged is the error of a record whose details do not decode.
func (d recordDecoder) damaged(format string, args ...any) error {
	return errorf(errcode.Internal, "result", "the result record of task %s is damaged: "+format, append([]any{d.id}, args...)...)
}

// pendingRecord is a result record whose details are not encoded yet. A
// completion's record is encoded by the settler's flusher (settle.go), not
// on the task's own goroutine: that goroutine starts with a small stack,
// and the encoder's frames made the runtime grow (copy) it for every task,
// which cost more than the encoding itself.
//
// Its record and the first attempt of its history live in it, so that a
// record costs one allocation besides its encoding.
type pendingRecord struct {
	id           string
	state        driver.ResultState
	at, expires  time.Time
	details      recordDetails
	firstAttempt [1]Attempt // backs details.attempts when it holds one attempt
	rec          driver.ResultRecord
}

// record encodes p; nil for a nil p.
func (p *pendingRecord) record() *driver.ResultRecord {
	if p == nil {
		return nil
	}
	p.rec = driver.ResultRecord{ID: p.id, State: p.state, UpdatedAt: p.at, ExpiresAt: p.expires, Data: p.details.encode(p.state)}
	return &p.rec
}

// recordOf builds the result record this envelope's settlement writes, or
// nil when the queue keeps no results. errText is the failure (or the
// cancel's reason); detail is a dead letter's detail, used as the output
// when SetResult gave none.
//
// The queue's results policy decides what is kept: under none no record
// of a success or a failure (a cancel is still recorded), under failed a
// success keeps a bare record (its state and times), and under all (the
// default) a success keeps the last maxSuccessOutput bytes of its output
// and a failure the last maxRecordOutput.
func (e *Envelope) recordOf(ctx context.Context, state driver.ResultState, errText, detail string) *pendingRecord {
	if e.q.results == nil {
		return nil
	}
	keep, _, mode := e.q.policies.get(ctx)
	switch {
	case mode == driver.ResultsNone && state != driver.ResultCancelled:
		return nil
	case mode == driver.ResultsFailed && state == driver.ResultSucceeded:
		now := time.Now()
		return &pendingRecord{id: e.Task.ID, state: state, at: now, expires: now.Add(keep), details: recordDetails{deliveries: e.DeliveryCount, ended: now, group: e.group}}
	}
	e.mu.Lock()
	pending, set := e.attempt, e.result
	e.mu.Unlock()
	p := &pendingRecord{id: e.Task.ID, state: state, details: recordDetails{deliveries: e.DeliveryCount, errText: settleText(errText, maxReasonBytes, false), group: e.group}}
	d := &p.details
	if e.recordsAttempts() {
		d.attempts = withExpired(e.wire.Attempts, e.DeliveryCount)
	}
	now := time.Now()
	d.ended = now
	if pending != nil {
		if d.attempts == nil {
			d.attempts = p.firstAttempt[:0]
		}
		d.attempts = append(d.attempts, *pending)
		d.started, d.worker, d.host, d.env, d.exitCode = pending.Start, pending.Worker, pending.Host, pending.Env, pending.ExitCode
		if !pending.End.IsZero() {
			d.ended = pending.End
		}
	}
	if len(d.attempts) > maxAttemptHistory {
		d.attempts = d.attempts[len(d.attempts)-maxAttemptHistory:]
	}
	d.output = detail
	if set != nil {
		if set.ExitCode != nil {
			d.exitCode = set.ExitCode
		}
		if set.Output != "" {
			d.output = set.Output
		}
		d.value = set.Value
		if len(d.value) > maxInlineValue {
			d.value, d.valueRef = e.q.stashValue(ctx, e.Task.ID, d.value)
		}
	}
	tail := maxRecordOutput
	if state == driver.ResultSucceeded {
		tail = maxSuccessOutput
	}
	d.output = settleText(d.output, tail, true)
	p.at, p.expires = now, now.Add(keep)
	return p
}

// newRecord builds a record of task id, expiring after the queue's
// retention.
func (q *Queue) newRecord(ctx context.Context, id string, state driver.ResultState, now time.Time, d *recordDetails) *driver.ResultRecord {
	p := pendingRecord{id: id, state: state, at: now, expires: now.Add(q.policies.retention(ctx)), details: *d}
	return p.record()
}

// poisonRecord is the record of a message dead-lettered as poison, when its
// task ID is known (the driver keeps it beside the body, or the body was a
// task whose stashed payload is gone); nil otherwise. An ID that is not
// valid UTF-8 (a damaged key) is recorded as storableID writes it.
func (q *Queue) poisonRecord(ctx context.Context, r *driver.Received, wire *Task, reason string) *driver.ResultRecord {
	id := storableID(r.ID)
	if wire != nil && wire.ID != "" {
		id = wire.ID
	}
	if q.results == nil || id == "" || q.policies.results(ctx) == driver.ResultsNone {
		return nil
	}
	return q.newRecord(ctx, id, driver.ResultDeadLettered, time.Now(), &recordDetails{deliveries: r.DeliveryCount, errText: reason})
}

// stashValue moves a large handler value to the queue's stash, returning
// the reference; without a stash, or when storing fails (logged), the
// value stays in the record.
func (q *Queue) stashValue(ctx context.Context, id string, v json.RawMessage) (json.RawMessage, *StashRef) {
	if q.stash.primary == nil {
		return v, nil
	}
	obj, err := q.stash.primary.Put(ctx, v)
	if err != nil {
		q.log.Warn("jobq: could not stash a large result value; the record keeps it", "task", id, "bytes", len(v), "error", err)
		return v, nil
	}
	return nil, &StashRef{URL: obj.URL, SHA256: obj.SHA256, Size: obj.Size}
}
