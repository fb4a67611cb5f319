package jobq

import (
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/pyjson"
)

// AttemptOutcome says how one attempt at a task ended.
type AttemptOutcome string

// The outcomes an attempt history records.
const (
	// OutcomeFailure: the task ran and failed (ExitCode says how, for shell
	// tasks).
	OutcomeFailure AttemptOutcome = "failure"
	// OutcomeLeaseExpired: the delivery ended without a settlement: the
	// worker died or hung mid-task and its lease ran out. Inferred by the
	// next receiver from a delivery count higher than the recorded
	// attempts, so Worker, Host and the times are unknown.
	OutcomeLeaseExpired AttemptOutcome = "lease-expired"
	// OutcomeGateMiss: the task's gate command failed on the worker.
	OutcomeGateMiss AttemptOutcome = "gate-miss"
	// OutcomeRequeued: the worker was stopped (a signal, its time limit)
	// and put the task back.
	OutcomeRequeued AttemptOutcome = "requeued"
	// OutcomeSuccess: the task ran and succeeded. A completed task leaves
	// the queue, so this only appears where a success was requeued.
	OutcomeSuccess AttemptOutcome = "success"
	// OutcomeCancelled: the task was stopped by Admin.Cancel while it ran.
	OutcomeCancelled AttemptOutcome = "cancelled"
	// OutcomePreempted: the worker's machine was being preempted (a
	// preemption notice); the task was put back without spending a retry.
	// Lost and Saved say what the preemption cost and what checkpoints
	// kept.
	OutcomePreempted AttemptOutcome = "preempted"
	// OutcomeSnoozed: the task asked to run later (worker.Snooze, or a shell
	// task's exit status 75) and was requeued without spending a retry.
	OutcomeSnoozed AttemptOutcome = "snoozed"
	// OutcomePutBack: the worker put the task back unrun, because the
	// queue, the task's kind or its key was paused, or a per-worker
	// concurrency or rate limit was reached. Put-backs in a row keep one
	// entry, the latest, so that a long pause does not crowd the history
	// out.
	OutcomePutBack AttemptOutcome = "put-back"
)

// maxAttemptHistory bounds the attempt history a message carries (not the
// number of attempts a task gets; that is Task.NumRetries): the oldest
// attempts are dropped first.
const maxAttemptHistory = 10

// maxAttemptDetail bounds one attempt's detail, so that the history cannot
// push a message over its backend's size limit.
const maxAttemptDetail = 200

// Attempt is one recorded attempt at a task.
type Attempt struct {
	// Delivery is the delivery count of the attempt (1 for the first).
	Delivery int
	// Worker and Host identify who ran it; empty when unknown.
	Worker string
	Host   string
	// Start and End bound the attempt; zero when unknown.
	Start, End time.Time
	Outcome    AttemptOutcome
	// ExitCode is the shell command's exit status for a failure; nil when
	// there is none (a Go handler's error, a signal).
	ExitCode *int
	// Detail is a short note: the error, the gate, the signal.
	Detail string
	// RetryDelay is how long the retry that followed this failure waited
	// (the retry backoff); zero when there was none.
	RetryDelay time.Duration
	// Env is the worker's environment label (worker.Options.EnvLabel:
	// the cloud VM size and region, or the host name); empty when unknown.
	Env string
	// Lost is the work an attempt that was stopped before its end (a
	// preemption, a stop, a time limit) lost: the time since its last
	// checkpoint, or since its start when it saved none. Zero otherwise.
	Lost time.Duration
	// Saved is the work a checkpoint of this attempt kept for the next
	// one: the time from the attempt's start to its last checkpoint. Zero
	// when it saved none.
	Saved time.Duration
}

// appendAttempts writes the "attempts" v2 member.
func appendAttempts(b []byte, as []Attempt) []byte {
	b = append(b, `, "attempts": [`...)
	for i, a := range as {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, `{"delivery": `...)
		b = strconv.AppendInt(b, int64(a.Delivery), 10)
		b = append(b, `, "outcome": `...)
		b = pyjson.AppendString(b, string(a.Outcome))
		for _, f := range []struct{ name, value string }{{"worker", a.Worker}, {"host", a.Host}, {"detail", a.Detail}, {"env", a.Env}} {
			if f.value != "" {
				b = append(b, `, "`+f.name+`": `...)
				b = pyjson.AppendString(b, f.value)
			}
		}
		for _, f := range []struct {
			name string
			t    time.Time
		}{{"start", a.Start}, {"end", a.End}} {
			if !f.t.IsZero() {
				b = append(b, `, "`+f.name+`": `...)
				b = appendTime(b, f.t)
			}
		}
		if a.ExitCode != nil {
			b = append(b, `, "exit_code": `...)
			b = strconv.AppendInt(b, int64(*a.ExitCode), 10)
		}
		for _, f := range []struct {
			name string
			d    time.Duration
		}{{"retry_delay", a.RetryDelay}, {"lost", a.Lost}, {"saved", a.Saved}} {
			if f.d > 0 {
				b = append(b, `, "`+f.name+`": `...)
				b = appendSeconds(b, f.d)
			}
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// decodeAttempts reads the "attempts" v2 member.
func decodeAttempts(v pyjson.Value) ([]Attempt, error) {
	if v.Kind == pyjson.Null {
		return nil, nil
	}
	if v.Kind != pyjson.Array {
		return nil, decodeError(`task "attempts" is a JSON %s; it must be an array of objects`, kindName(v.Kind))
	}
	out := make([]Attempt, 0, len(v.Vals))
	for _, item := range v.Vals {
		if item.Kind != pyjson.Object {
			return nil, decodeError(`task "attempts" holds a JSON %s; each attempt must be an object`, kindName(item.Kind))
		}
		var a Attempt
		names, values := item.Members()
		for i, name := range names {
			if err := a.decodeMember(name, values[i]); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// decodeMember sets the attempt's member name from val; it ignores a
// member it does not know.
func (a *Attempt) decodeMember(name string, val pyjson.Value) error {
	switch name {
	case "delivery", "exit_code":
		n, err := wireInt("attempts "+name, val)
		if err != nil {
			return err
		}
		if name == "delivery" {
			a.Delivery = int(n)
		} else {
			code := int(n)
			a.ExitCode = &code
		}
	case "outcome", "worker", "host", "detail", "env":
		if val.Kind != pyjson.String {
			return decodeError(`task attempt %q is a JSON %s; it must be a string`, name, kindName(val.Kind))
		}
		*a.stringMember(name) = val.Str
	case "retry_delay", "lost", "saved":
		d, err := wireSeconds("attempts "+name, val)
		if err != nil {
			return err
		}
		*a.durationMember(name) = d
	case "start", "end":
		if val.Kind != pyjson.String {
			return decodeError(`task attempt %q is a JSON %s; it must be an RFC 3339 time`, name, kindName(val.Kind))
		}
		t, err := time.Parse(time.RFC3339Nano, val.Str)
		if err != nil {
			return decodeError("task attempt %q %q is not an RFC 3339 time: %v", name, val.Str, err)
		}
		if name == "start" {
			a.Start = t
		} else {
			a.End = t
		}
	}
	return nil
}

// stringMember is the field of the string member name.
func (a *Attempt) stringMember(name string) *string {
	switch name {
	case "outcome":
		return (*string)(&a.Outcome)
	case "worker":
		return &a.Worker
	case "host":
		return &a.Host
	case "env":
		return &a.Env
	}
	return &a.Detail
}

// durationMember is the field of the duration member name.
func (a *Attempt) durationMember(name string) *time.Duration {
	switch name {
	case "retry_delay":
		return &a.RetryDelay
	case "lost":
		return &a.Lost
	}
	return &a.Saved
}

// recordsAttempts reports whether this queue keeps attempt histories in its
// messages: it needs in-place update. On backends that ai4s-jobq workers may
// share (Capabilities.SharedWithAI4SJobq), tasks in its v1 format keep that
// format, so only v2 tasks carry a history there.
func (e *Envelope) recordsAttempts() bool {
	return keepsAttempts(e.q.caps, e.wire.Version)
}

// keepsAttempts reports whether a task of the given schema version carries
// an attempt history on a backend with caps: where messages can be updated
// in place, except for the v1 tasks of a queue shared with ai4s-jobq, which
// are never rewritten into v2.
func keepsAttempts(caps driver.Capabilities, version int) bool {
	if caps.Level(driver.InPlaceUpdate) != driver.Native {
		return false
	}
	return !caps.SharedWithAI4SJobq || version >= schemaV2
}

// recordAttempt notes how this delivery went; the next Requeue, Fail or
// DeadLetter stores it in the message's attempt history, where the backend
// can update messages in place (elsewhere it is dropped). Detail is cut to
// 200 bytes. The envelope keeps a itself (it replaces, never changes, the
// attempt it keeps), so the caller must not change it afterwards.
func (e *Envelope) recordAttempt(a *Attempt) {
	if a.Delivery == 0 {
		a.Delivery = e.DeliveryCount
	}
	if len(a.Detail) > maxAttemptDetail {
		a.Detail = truncate(a.Detail, maxAttemptDetail-3)
	}
	e.mu.Lock()
	e.attempt = a
	e.mu.Unlock()
}

// Attempts returns the message's attempt history, oldest first: the
// attempts recorded by earlier deliveries, then one lease-expired entry
// for every earlier delivery that ended without recording one (a worker
// lost mid-task). It is empty on backends without in-place update.
func (e *Envelope) Attempts() []Attempt {
	if !e.recordsAttempts() {
		return nil
	}
	return withExpired(e.wire.Attempts, e.DeliveryCount)
}

// lostDeliveries returns the earlier deliveries that ended without a
// settlement (lease expired) since the last recorded attempt, inferred
// from the delivery count; empty where histories are not kept.
func (e *Envelope) lostDeliveries() []int {
	if !e.recordsAttempts() {
		return nil
	}
	var out []int
	for d := lastRecorded(e.wire.Attempts, e.DeliveryCount) + 1; d < e.DeliveryCount; d++ {
		out = append(out, d)
	}
	return out
}

// lastRecorded is the delivery of the last recorded attempt, or 0 when the
// history predates a reset of the delivery count (a dead letter requeued).
func lastRecorded(as []Attempt, delivery int) int {
	if len(as) == 0 {
		return 0
	}
	last := as[len(as)-1].Delivery
	if last >= delivery {
		return 0
	}
	return last
}

// withExpired adds lease-expired entries for the deliveries between the
// last recorded attempt and the current one.
func withExpired(as []Attempt, delivery int) []Attempt {
	out := append([]Attempt(nil), as...)
	for d := lastRecorded(as, delivery) + 1; d < delivery; d++ {
		out = append(out, Attempt{Delivery: d, Outcome: OutcomeLeaseExpired})
	}
	return out
}

// withAttempt returns base with the history and the pending attempt
// appended, bounded to maxAttemptHistory; nil when nothing is to be recorded.
func (e *Envelope) withAttempt(base *Task) *Task {
	e.mu.Lock()
	a := e.attempt
	e.mu.Unlock()
	if a == nil || !e.recordsAttempts() {
		return nil
	}
	next := *base
	hist := withExpired(base.Attempts, e.DeliveryCount)
	if n := len(hist); a.Outcome == OutcomePutBack && n > 0 && hist[n-1].Outcome == OutcomePutBack && hist[n-1].Delivery == a.Delivery-1 {
		hist[n-1] = *a // the put-back of the delivery before: one entry for the run
	} else {
		hist = append(hist, *a)
	}
	if len(hist) > maxAttemptHistory {
		hist = hist[len(hist)-maxAttemptHistory:]
	}
	next.Attempts = hist
	return &next
}

// historyBody encodes base with the pending attempt, or returns nil when
// there is none. Where the result would exceed the backend's size limit
// the oldest attempts go first; when even the pending one alone does not
// fit, nil (the history is dropped rather than failing the settlement).
func (e *Envelope) historyBody(base *Task) []byte {
	next := e.withAttempt(base)
	if next == nil {
		return nil
	}
	for {
		b, err := encodeTask(next)
		if err != nil {
			return nil
		}
		if m := e.q.caps.MaxMessageBytes; m <= 0 || len(b) <= m {
			return b
		}
		if len(next.Attempts) <= 1 {
			return nil
		}
		// Over the limit: drop the oldest attempts, keeping the latest,
		// so that this delivery is not taken for a lost one.
		next.Attempts = next.Attempts[1:]
	}
}

// Attempts returns a peeked message's attempt history, with lease-expired
// entries for the earlier deliveries that recorded nothing (the current
// one, when the message is in flight, is still running). Empty where the
// backend keeps no histories.
func (p *PeekedTask) Attempts(q *Queue) []Attempt {
	if p.Task == nil || !keepsAttempts(q.caps, p.Task.Version) {
		return nil
	}
	next := p.DeliveryCount + 1
	if p.InFlight {
		next = p.DeliveryCount
	}
	return withExpired(p.Task.Attempts, next)
}

// Attempts returns a dead letter's attempt history, with lease-expired
// entries for the deliveries that recorded nothing before the last one
// (which ended in the dead-lettering). Empty where the backend keeps no
// histories.
func (d *DeadLetter) Attempts(q *Queue) []Attempt {
	if d.Task == nil || !keepsAttempts(q.caps, d.Task.Version) {
		return nil
	}
	as := d.Task.Attempts
	if n := len(as); n > 0 && as[n-1].Delivery == d.DeliveryCount {
		return withExpired(as, d.DeliveryCount+1)
	}
	return withExpired(as, d.DeliveryCount)
}
