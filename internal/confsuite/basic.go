package confsuite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/wire"
)

// checkCapabilities: the declaration is complete, stable and explains every
// degradation.
func checkCapabilities(c *C) {
	q := c.open()
	caps := q.Capabilities()
	for _, f := range driver.AllFeatures {
		s, ok := caps.Features[f]
		switch {
		case !ok:
			c.Errorf("feature %s is not declared; a driver must declare every feature in driver.AllFeatures", f)
		case s.Level != driver.Native && strings.TrimSpace(s.Fallback) == "":
			c.Errorf("feature %s is %s but its Fallback is empty; say what happens instead", f, s.Level)
		}
	}
	if c.h.MaxMessageBytes != 0 && caps.MaxMessageBytes != c.h.MaxMessageBytes {
		c.Errorf("MaxMessageBytes is %d, the harness expects %d", caps.MaxMessageBytes, c.h.MaxMessageBytes)
	}
	if caps.MaxMessageBytes < 0 || caps.MaxVisibility < 0 || caps.MaxPeek < 0 || caps.MaxReceiveBatch < 0 || caps.MaxPushBatch < 0 {
		c.Errorf("negative limit in %+v", caps)
	}
	if mv := caps.MaxVisibility; mv > 0 && mv < c.vis() {
		c.Errorf("MaxVisibility %v is below the suite's visibility %v; set Harness.Visibility", mv, c.vis())
	}
	if mv := caps.MaxVisibility; mv > 0 {
		_, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: mv + time.Second})
		c.expectCode(err, errcode.InvalidArgument, fmt.Sprintf("Receive with a visibility over the declared maximum %v", mv))
	}
	if scheme := hooks.Scheme(q); c.h.byDriver() {
		c.Logf("the queue was made from a driver value (Harness.NewDriver); no URL scheme to check")
	} else if _, ok := jobq.DefaultURLMux().Opener(scheme); !ok {
		c.Errorf("scheme %q opened a queue but the default URLMux has no opener for it", scheme)
	}
	// A native transactional push means a driver.TxPusher: PushTx reaches
	// the driver, which refuses a transaction of the wrong type; otherwise
	// PushTx is Unimplemented.
	_, err := q.PushTx(c.ctx(), struct{}{}, []*jobq.Task{task("push-tx probe")}, jobq.PushOptions{})
	if caps.Level(driver.TransactionalPush) == driver.Native {
		c.expectCode(err, errcode.InvalidArgument, "PushTx with a transaction of the wrong type on a backend declaring transactional-push native")
	} else {
		c.expectCode(err, errcode.Unimplemented, "PushTx on a backend not declaring transactional-push native")
	}
	c.checkDeclaredInterfaces(q)
	// Capabilities must not change while the queue is open.
	if again := q.Capabilities(); !reflect.DeepEqual(caps, again) {
		c.Errorf("Capabilities changed between calls: %+v then %+v", caps, again)
	}
}

// checkUnknownParameter: an unknown query parameter fails Open with
// InvalidArgument naming it, without leaking the URL's password.
func checkUnknownParameter(c *C) {
	if c.newURL == nil {
		c.skipNeeds("driver.Opener", "the harness gives driver values and no queue URL (Harness.NewQueueURL), and query parameters are the opener's")
	}
	raw := c.newURL()
	u, err := url.Parse(raw)
	if err != nil {
		c.Fatalf("harness URL does not parse: %v", err)
	}
	const bogus = "conformance_bogus_param"
	v := u.Query()
	v.Set(bogus, "1")
	u.RawQuery = v.Encode()
	q, err := jobq.Open(c.ctx(), u.String())
	if err == nil {
		_ = q.Close()
		c.Fatalf("Open accepted the unknown query parameter %s; drivers must reject unknown parameters (driver.Params.Done)", bogus)
	}
	c.expectCode(err, errcode.InvalidArgument, "open with an unknown parameter")
	if !strings.Contains(err.Error(), bogus) {
		c.Errorf("the error does not name the unknown parameter %s: %v", bogus, err)
	}
	if pw, ok := u.User.Password(); ok && len(pw) >= 3 && strings.Contains(err.Error(), pw) {
		c.Errorf("the error shows the URL's password; redact it with redact.URL")
	}
}

// checkPushReceiveComplete: the basic round trip, and that Complete
// really deletes.
func checkPushReceiveComplete(c *C) {
	q := c.open()
	t := task("round trip")
	id := c.push(q, t)[0]
	before := time.Now()
	e := c.receive(q, c.vis())
	if e.Task.ID != id || e.Task.Command != t.Command {
		c.Errorf("received task %s %q, pushed %s %q", e.Task.ID, e.Task.Command, id, t.Command)
	}
	if e.DeliveryCount != 1 {
		c.Errorf("first delivery has DeliveryCount %d, want 1", e.DeliveryCount)
	}
	if e.MessageID == "" {
		c.Errorf("envelope has no MessageID")
	}
	if exp := e.Expiry(); exp.Before(before) || exp.After(time.Now().Add(c.vis()+5*time.Second)) {
		c.Errorf("lease expiry %v is not about %v after the receive at %v", exp, c.vis(), before)
	}
	c.complete(e)
	c.expectCode(e.Complete(c.ctx()), errcode.FailedPrecondition, "second Complete of one envelope")
	c.receiveNone(q, time.Time{}, "the message was completed")
	// Past the old lease's expiry the message must still be gone.
	time.Sleep(time.Until(e.Expiry()) + 100*time.Millisecond)
	c.receiveNone(q, time.Time{}, "the message was completed and its old lease has expired")
	if st, err := q.Admin().Stats(c.ctx()); err != nil {
		c.Errorf("stats: %v", err)
	} else if level(q, driver.ExactCount) == driver.Native && st.Ready+st.InFlight+st.Delayed != 0 {
		c.Errorf("stats after completing the only message: %+v, want all zero", st)
	}
}

// checkBatchPushReceive: PushBatch stores every task, in order, and
// ReceiveBatch claims each once, never more than asked.
func checkBatchPushReceive(c *C) {
	q := c.open()
	if envs, err := q.ReceiveBatch(c.ctx(), 5, jobq.ReceiveOptions{Visibility: c.vis()}); err != nil || len(envs) != 0 {
		c.Errorf("ReceiveBatch on an empty queue returned %d messages, error %v; want none and no error", len(envs), err)
	}
	const n = 12
	ts := make([]*jobq.Task, n)
	for i := range ts {
		ts[i] = task(fmt.Sprintf("batch %d", i))
	}
	res, err := q.PushBatch(c.ctx(), ts, jobq.PushOptions{})
	if err != nil {
		c.Fatalf("push batch: %v", err)
	}
	if len(res) != n {
		c.Fatalf("PushBatch returned %d results for %d tasks", len(res), n)
	}
	want := map[string]bool{}
	mids := map[string]bool{}
	for i, r := range res {
		if r.ID == "" || r.ID != ts[i].ID {
			c.Errorf("result %d has ID %q, task has %q", i, r.ID, ts[i].ID)
		}
		if r.Duplicate {
			c.Errorf("result %d is marked duplicate, but every task is distinct", i)
		}
		if r.MessageID != "" && mids[r.MessageID] {
			c.Errorf("MessageID %q reported twice", r.MessageID)
		}
		mids[r.MessageID] = true
		want[r.ID] = true
	}
	got := map[string]int{}
	var envs []*jobq.Envelope
	ok := c.poll(func() bool {
		batch, err := q.ReceiveBatch(c.ctx(), 5, jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: time.Second})
		if err != nil {
			c.Fatalf("receive batch: %v", err)
		}
		if len(batch) > 5 {
			c.Errorf("ReceiveBatch(5) returned %d messages", len(batch))
		}
		for _, e := range batch {
			got[e.Task.ID]++
			envs = append(envs, e)
		}
		return len(envs) >= n
	})
	if !ok {
		c.Errorf("received %d of %d pushed tasks", len(envs), n)
	}
	for id, k := range got {
		if !want[id] {
			c.Errorf("received task %s, which was not pushed", id)
		}
		if k != 1 {
			c.Errorf("task %s received %d times while its lease was held", id, k)
		}
	}
	for _, e := range envs {
		c.complete(e)
	}
	c.receiveNone(q, time.Time{}, "every message was completed")
}

// checkUnicode: non-ASCII text, quotes, escapes, environment variables and
// JSON payloads survive the round trip unchanged.
func checkUnicode(c *C) {
	q := c.open()
	shell := &jobq.Task{
		Command: "printf '%s\\n' \"héllo wörld — 日本語 🚀 \\\"quoted\\\" back\\\\slash\ttab\"",
		Env: []jobq.EnvVar{
			{Name: "GREETING", Value: "grüß dich 👋"},
			{Name: "EMPTY", Value: ""},
			{Name: "QUOTES", Value: `a"b'c\d`},
			{Name: "NEWLINE", Value: "one\ntwo"},
		},
		Cwd: "/tmp/ünïcode dir",
	}
	payload := &jobq.Task{Payload: json.RawMessage(`{"text": "日本語 🚀 \"q\"", "n": 1, "nested": {"a": [1, 2.5, null, true]}}`)}
	c.push(q, shell, payload)
	for range 2 {
		e := c.receive(q, c.longVis(q))
		var want *jobq.Task
		switch e.Task.ID {
		case shell.ID:
			want = shell
		case payload.ID:
			want = payload
		default:
			c.Fatalf("received unknown task %s", e.Task.ID)
		}
		if e.Task.Command != want.Command {
			c.Errorf("command changed:\n got %q\nwant %q", e.Task.Command, want.Command)
		}
		if !slices.Equal(e.Task.Env, want.Env) {
			c.Errorf("env changed:\n got %q\nwant %q", e.Task.Env, want.Env)
		}
		if e.Task.Cwd != want.Cwd {
			c.Errorf("cwd changed: got %q, want %q", e.Task.Cwd, want.Cwd)
		}
		if !jsonEqual(e.Task.Payload, want.Payload) {
			c.Errorf("payload changed:\n got %s\nwant %s", e.Task.Payload, want.Payload)
		}
		c.complete(e)
	}
}

func jsonEqual(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// sizedTask returns a shell task whose encoding is exactly size bytes.
func sizedTask(c *C, size int) *jobq.Task {
	c.Helper()
	const prefix = "echo ünïcödé 🚀 "
	enc := func(n int) int {
		b, err := wire.Marshal(&jobq.Task{Command: prefix + strings.Repeat("x", n)})
		if err != nil {
			c.Fatalf("encode a %d-byte task: %v", size, err)
		}
		return len(b)
	}
	n := max(0, size-enc(0))
	for range 5 {
		got := enc(n)
		if got == size {
			return &jobq.Task{Command: prefix + strings.Repeat("x", n)}
		}
		n += size - got
		if n < 0 {
			break
		}
	}
	c.Fatalf("cannot build a task of exactly %d encoded bytes", size)
	return nil
}

// checkSizeLimit: a task of exactly the declared limit round-trips; one
// byte more is TooLarge, names the limit, and stores nothing.
func checkSizeLimit(c *C) {
	q := c.open()
	limit := q.Capabilities().MaxMessageBytes
	size := limit
	if limit == 0 {
		size = 256 << 10
		c.Logf("no size limit declared; checking a %d-byte task", size)
	}
	t := sizedTask(c, size)
	c.push(q, t)
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != t.ID || e.Task.Command != t.Command {
		c.Errorf("a %d-byte task came back changed (%d-byte command, want %d)", size, len(e.Task.Command), len(t.Command))
	}
	c.complete(e)
	if limit == 0 {
		return
	}
	big := sizedTask(c, limit+1)
	_, err := q.Push(c.ctx(), big)
	c.expectCode(err, errcode.TooLarge, fmt.Sprintf("push of a task one byte over the %d-byte limit", limit))
	if err != nil && !errors.Is(err, errcode.TooLarge) {
		c.Errorf("errors.Is(err, errcode.TooLarge) is false for %v", err)
	}
	if err != nil && !strings.Contains(err.Error(), strconv.Itoa(limit)) {
		c.Errorf("the TooLarge error does not name the limit %d: %v", limit, err)
	}
	c.receiveNone(q, time.Time{}, "the over-limit push failed")
}

// maxLimitCheck bounds how many messages checkBatchLimits pushes.
const maxLimitCheck = 10000

// checkBatchLimits: the portable layer splits a PushBatch larger than
// MaxPushBatch into several driver calls and clamps receives and peeks to
// the declared limits, so callers never see those limits as errors.
func checkBatchLimits(c *C) {
	q := c.open()
	caps := q.Capabilities()
	if caps.MaxPushBatch == 0 && caps.MaxReceiveBatch == 0 && caps.MaxPeek == 0 {
		c.Skipf("no batch limits declared")
	}
	n := max(caps.MaxPushBatch, caps.MaxReceiveBatch, caps.MaxPeek) + 1
	if n > maxLimitCheck {
		c.Skipf("the declared batch limits need %d messages, more than this check pushes (%d)", n, maxLimitCheck)
	}
	ts := make([]*jobq.Task, n)
	for i := range ts {
		ts[i] = task(fmt.Sprintf("limits %d", i))
	}
	res, err := q.PushBatch(c.ctx(), ts, jobq.PushOptions{})
	if err != nil {
		c.Fatalf("PushBatch of %d tasks (MaxPushBatch %d): %v", n, caps.MaxPushBatch, err)
	}
	if len(res) != n {
		c.Fatalf("PushBatch of %d tasks returned %d results", n, len(res))
	}
	if level(q, driver.ExactCount) == driver.Native {
		c.expectStats(q, want{ready: int64(n)})
	}
	if mp := caps.MaxPeek; mp > 0 && level(q, driver.Peek) != driver.Unsupported {
		ps, err := q.Admin().Peek(c.ctx(), mp+1)
		if err != nil || len(ps) > mp {
			c.Errorf("Peek(%d) with MaxPeek %d returned %d messages, error %v", mp+1, mp, len(ps), err)
		}
	}
	if mr := caps.MaxReceiveBatch; mr > 0 {
		envs, err := q.ReceiveBatch(c.ctx(), mr+1, jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: c.patience()})
		if err != nil || len(envs) == 0 || len(envs) > mr {
			c.Errorf("ReceiveBatch(%d) with MaxReceiveBatch %d returned %d messages, error %v", mr+1, mr, len(envs), err)
		}
		for _, e := range envs {
			c.complete(e)
		}
	}
	if _, err := q.Admin().Clear(c.ctx()); err != nil {
		c.Errorf("clear: %v", err)
	}
}
