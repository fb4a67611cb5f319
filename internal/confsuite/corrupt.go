package confsuite

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/wire"
)

// corruptCase is one damaged message the CorruptRecord check stores among
// good ones.
type corruptCase struct {
	name string
	// write stores the damaged message (the task t, or raw bytes).
	write func(q *handle, t *jobq.Task) error
	// delivered: the message is decodable and reaches the receiver, which
	// fails it with binary output; it must end dead-lettered after exactly
	// deliveries deliveries (its num_retries plus one: no run more, none
	// fewer). Otherwise it must be quarantined at once and never returned.
	delivered  bool
	deliveries int
}

// binaryOutput is what a failing task might print: NUL, invalid UTF-8 and
// a multi-byte character, for the reason and detail of its dead letter.
const binaryOutput = "out\x00put \xff\xfe 日本語\n"

// errBinary is a failure's cause with the same bytes.
var errBinary = errors.New("exit 1: out\x00put \xff\xfe 日本語")

// corruptCases lists the cases the harness supports.
func (c *C) corruptCases() []corruptCase {
	var cases []corruptCase
	cases = append(cases, corruptCase{
		name: "failing task prints NUL and invalid UTF-8",
		write: func(q *handle, t *jobq.Task) error {
			_, err := q.Push(c.ctx(), t)
			return err
		},
		delivered: true, deliveries: 1,
	})
	if c.canPushRaw() {
		raw := func(body []byte) func(q *handle, t *jobq.Task) error {
			return func(q *handle, _ *jobq.Task) error {
				_, err := c.pushRaw(q, body)
				return err
			}
		}
		cases = append(cases,
			corruptCase{name: "body is binary garbage", write: raw([]byte("\x00\xff\xfe not a task { \xe6\x97"))},
			// Another tool wrote a priority jobq would refuse at push: the
			// task still runs, and its whole budget with it.
			corruptCase{name: "body is a task with a priority out of range, with retries", delivered: true, deliveries: 3,
				write: raw([]byte(`{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"echo priority out of range\"}", "num_retries": 2, "retry_backoff": {"base": 0.001, "cap": 0.001}, "priority": 5000, "id": "conformance-priority-out-of-range"}`))},
			corruptCase{name: "body is a task with a priority out of range, with one retry", delivered: true, deliveries: 2,
				write: raw([]byte(`{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"echo priority out of range, one retry\"}", "num_retries": 1, "retry_backoff": {"base": 0.001, "cap": 0.001}, "priority": 5000, "id": "conformance-priority-out-of-range-1"}`))},
			// Its dead letter must be storable whatever the engine makes of
			// the bytes (a text column refuses 0xbe).
			corruptCase{name: "body is a task whose ID is not valid UTF-8",
				write: raw([]byte("{\"version\": 1, \"reply_requested\": false, \"kwargs\": \"{\\\"cmd\\\": \\\"echo bad id\\\"}\", \"num_retries\": 0, \"id\": \"key\xbe-key\"}"))},
		)
	}
	for _, k := range c.h.Corruptions {
		cases = append(cases, corruptCase{name: k.Name, write: func(q *handle, t *jobq.Task) error {
			body, err := wire.Marshal(t)
			if err != nil {
				return err
			}
			return k.Write(c.ctx(), q.ref, body)
		}})
	}
	return cases
}

// checkCorruptRecord: a damaged message, whether its body or a field the
// engine stores beside it, is quarantined once (or, when it decodes, can be
// failed whatever its task printed), and the good messages around it are
// all delivered: nothing lost, nothing looping.
func checkCorruptRecord(c *C) {
	for _, k := range c.corruptCases() {
		c.corruptCase(k)
		if c.Failed() {
			return
		}
	}
}

// corruptGood is how many good tasks corruptCase pushes on each side of
// the damaged one.
const corruptGood = 3

// corruptCase: a damaged message between good ones is quarantined (or, if
// it can be delivered, fails through its budget) without holding up or
// losing the good ones, and nothing comes back afterwards.
func (c *C) corruptCase(k corruptCase) {
	q := c.open()
	if level(q, driver.DeadLetter) == driver.Unsupported {
		c.Skipf("the backend has no dead-letter store to quarantine damaged messages in")
	}
	want := c.pushAroundDamaged(q, k)
	bad := c.receiveBesideDamaged(q, k, want)
	c.failDamagedToTheEnd(q, k, bad)
	c.expectQuarantined(q, k)
}

// pushAroundDamaged pushes good tasks, the damaged one, and more good
// tasks; it returns the good tasks' IDs.
func (c *C) pushAroundDamaged(q *handle, k corruptCase) map[string]bool {
	var ids []string
	for i := range corruptGood {
		ids = append(ids, c.push(q, task(fmt.Sprintf("before %s %d", k.name, i)))...)
	}
	bad := task("damaged: " + k.name)
	bad.NumRetries = 0
	// A deliverable damaged message is failed through its budget; its
	// retries come at once (their timing is checkRetryBackoff's), by the
	// backoff its body carries, so that no queue policy (and no
	// driver.PolicyStore) is needed.
	bad.RetryBackoff = quickRetry
	if err := k.write(q, bad); err != nil {
		c.Fatalf("%s: store the damaged message: %v", k.name, err)
	}
	for i := range corruptGood {
		ids = append(ids, c.push(q, task(fmt.Sprintf("after %s %d", k.name, i)))...)
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	return want
}

// receiveBesideDamaged receives until every good task is completed (and,
// when the damage can be delivered, the damaged one once, failed); it
// returns how often the damaged one was delivered.
func (c *C) receiveBesideDamaged(q *handle, k corruptCase, want map[string]bool) int {
	got := map[string]int{}
	badDeliveries := 0
	deadline := time.Now().Add(c.patience())
	for len(got) < len(want) || (k.delivered && badDeliveries == 0) {
		if time.Now().After(deadline) {
			c.Fatalf("%s: after %v, received %d of the %d good tasks (and the damaged one %d times); a damaged message must not hold up or lose the others",
				k.name, c.patience(), len(got), len(want), badDeliveries)
		}
		envs, err := q.ReceiveBatch(c.ctx(), 2*corruptGood+1, jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: time.Second})
		if err != nil {
			c.Fatalf("%s: receive beside a damaged message: %v", k.name, err)
		}
		for _, e := range envs {
			if want[e.Task.ID] {
				got[e.Task.ID]++
				c.complete(e)
				continue
			}
			badDeliveries++
			c.settleDamaged(k, e)
		}
	}
	return badDeliveries
}

// settleDamaged settles a delivery of the damaged message: one that must
// be quarantined is an error; one that may be delivered fails with binary
// output.
func (c *C) settleDamaged(k corruptCase, e *jobq.Envelope) {
	if !k.delivered {
		c.Errorf("%s: the damaged message was returned (task %s, delivery %d); it must be quarantined", k.name, e.Task.ID, e.DeliveryCount)
		_ = e.Complete(c.ctx())
		return
	}
	if _, err := e.Fail(c.ctx(), errBinary, strings.Repeat(binaryOutput, 100)); err != nil {
		c.Fatalf("%s: Fail must settle whatever the task printed and whatever the message holds: %v", k.name, err)
	}
}

// failDamagedToTheEnd fails a deliverable damaged message each time it
// comes back, until it stops coming: it must come exactly as often as its
// retry budget allows, neither dead-lettered early nor run once more.
func (c *C) failDamagedToTheEnd(q *handle, k corruptCase, badDeliveries int) {
	for k.delivered {
		// A retry still owed may wait out a backoff the queue could not
		// shorten; once none is owed, one lease's wait shows there is none.
		wait := c.vis()
		if badDeliveries < k.deliveries {
			wait = c.patience()
		}
		e, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.longVis(q), Wait: wait})
		if errors.Is(err, jobq.ErrEmpty) {
			if badDeliveries < k.deliveries {
				c.Errorf("%s: the failed message was delivered %d times, then no more; its retry budget allows %d runs", k.name, badDeliveries, k.deliveries)
			}
			return
		}
		if err != nil {
			c.Fatalf("%s: receive: %v", k.name, err)
		}
		badDeliveries++
		if badDeliveries > k.deliveries {
			_ = e.Complete(c.ctx())
			c.Fatalf("%s: the failed message was delivered %d times; its retry budget allows %d", k.name, badDeliveries, k.deliveries)
		}
		if _, err := e.Fail(c.ctx(), errBinary, binaryOutput); err != nil {
			c.Fatalf("%s: Fail: %v", k.name, err)
		}
	}
}

// expectQuarantined: the damaged message is dead-lettered once, with a
// reason that says why, and nothing comes back after the leases it could
// have held run out.
func (c *C) expectQuarantined(q *handle, k corruptCase) {
	d := c.listDead(q, 1)[0]
	if d.Reason == "" || !utf8.ValidString(d.Reason) || !utf8.ValidString(d.Detail) {
		c.Errorf("%s: dead letter reason %q / detail %q: want a reason, both valid UTF-8", k.name, d.Reason, d.Detail)
	}
	if k.delivered {
		if !strings.Contains(d.Reason, "exit 1: out") {
			c.Errorf("%s: dead letter reason %q does not carry the failure", k.name, d.Reason)
		}
	} else if r := strings.ToLower(d.Reason); !strings.Contains(r, "poison") && !strings.Contains(r, "corrupt") {
		c.Errorf("%s: dead letter reason %q does not say the message is poison or corrupt", k.name, d.Reason)
	}
	time.Sleep(c.vis() + c.tolerance())
	if e, err := q.Receive(c.ctx(), jobq.ReceiveOptions{Visibility: c.vis()}); err == nil {
		c.Errorf("%s: task %s (delivery %d) came back after everything was settled", k.name, e.Task.ID, e.DeliveryCount)
		_ = e.Complete(c.ctx())
	} else if !errors.Is(err, jobq.ErrEmpty) {
		c.Fatalf("%s: receive: %v", k.name, err)
	}
	if n := len(c.listDead(q, 1)); n != 1 {
		c.Errorf("%s: %d dead letters, want the damaged message once", k.name, n)
	}
	if rs := q.logs.find(slog.LevelWarn, "could not dead-letter"); len(rs) > 0 {
		c.Errorf("%s: %d dead-letterings failed (first: %s); whatever bytes the message holds, its dead letter must be storable", k.name, len(rs), rs[0])
	}
}
