package jobq_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/wire"
)

func TestAttemptsWireRoundTrip(t *testing.T) {
	t.Parallel()
	code := 3
	start := time.Date(2026, 11, 21, 12, 0, 0, 123, time.UTC)
	tests := []struct {
		name     string
		attempts []jobq.Attempt
	}{
		{"full", []jobq.Attempt{{Delivery: 1, Worker: "w1", Host: "h", Start: start, End: start.Add(time.Second), Outcome: jobq.OutcomeFailure, ExitCode: &code, Detail: "exit 3"}}},
		{"inferred", []jobq.Attempt{{Delivery: 2, Outcome: jobq.OutcomeLeaseExpired}}},
		{"preempted", []jobq.Attempt{{Delivery: 1, Outcome: jobq.OutcomePreempted, Env: "Standard_D2s_v5/westeurope", Start: start, End: start.Add(time.Hour),
			Lost: 90 * time.Second, Saved: 58*time.Minute + 500*time.Millisecond}}},
		{"several", []jobq.Attempt{{Delivery: 1, Outcome: jobq.OutcomeGateMiss, Worker: "ü"}, {Delivery: 2, Outcome: jobq.OutcomeRequeued}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := &jobq.Task{Command: "echo hi", Attempts: tt.attempts}
			b, err := wire.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			out, err := wire.Unmarshal(b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if out.Version != 2 || !reflect.DeepEqual(out.Attempts, tt.attempts) {
				t.Fatalf("round trip of %s: version %d, attempts %+v; want version 2, %+v", b, out.Version, out.Attempts, tt.attempts)
			}
		})
	}
}

func TestAttemptsWireErrors(t *testing.T) {
	t.Parallel()
	base := `{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 0, "attempts": %s, "id": "i"}`
	for _, bad := range []string{`5`, `[1]`, `[{"delivery": "one"}]`, `[{"start": "yesterday"}]`, `[{"outcome": 2}]`, `[{"env": 1}]`, `[{"lost": "long"}]`} {
		if _, err := wire.Unmarshal([]byte(fmt.Sprintf(base, bad))); errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("attempts %s: error %v; want InvalidArgument", bad, err)
		}
	}
}

// TestAttemptHistory follows one task through a failure, a lost lease, a
// gate miss and a dead-lettering on the mem backend.
func TestAttemptHistory(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "mem://attempts-"+rand.Text())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "flaky", NumRetries: 5, RetryBackoff: jobq.Backoff{Base: time.Millisecond, Cap: time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	recv := func(vis time.Duration) *jobq.Envelope { return receiveFor(t, q, vis) }
	code := 2
	e := recv(time.Minute)
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "w1", Outcome: jobq.OutcomeFailure, ExitCode: &code})
	if _, err := e.Fail(ctx, errors.New("exit 2"), ""); err != nil {
		t.Fatal(err)
	}
	_ = recv(50 * time.Millisecond) // delivery 2: its worker "dies"
	time.Sleep(100 * time.Millisecond)
	e = recv(time.Minute)
	if got, want := outcomes(e.Attempts()), []string{"1:failure", "2:lease-expired"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("delivery 3 sees attempts %v; want %v", got, want)
	}
	if got := hooks.LostDeliveries(e); !reflect.DeepEqual(got, []int{2}) {
		t.Errorf("LostDeliveries = %v; want [2]", got)
	}
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "w3", Outcome: jobq.OutcomeGateMiss})
	if err := e.Requeue(ctx, 0); err != nil {
		t.Fatal(err)
	}
	e = recv(time.Minute)
	hooks.RecordAttempt(e, jobq.Attempt{Worker: "w4", Outcome: jobq.OutcomeFailure})
	if err := e.DeadLetter(ctx, "given up", ""); err != nil {
		t.Fatal(err)
	}
	dead, err := q.Admin().DeadLetters(ctx, 10)
	if err != nil || len(dead) != 1 || dead[0].Task == nil {
		t.Fatalf("dead letters %v, %v; want the task", dead, err)
	}
	want := []string{"1:failure", "2:lease-expired", "3:gate-miss", "4:failure"}
	if got := outcomes(dead[0].Task.Attempts); !reflect.DeepEqual(got, want) {
		t.Errorf("dead letter's history %v; want %v", got, want)
	}
	if a := dead[0].Task.Attempts[0]; a.Worker != "w1" || a.ExitCode == nil || *a.ExitCode != 2 {
		t.Errorf("first attempt %+v; want worker w1, exit code 2", a)
	}
}

// TestAttemptHistoryBounded: the history keeps the last 10 attempts.
const maxAttemptHistory = 10

func TestAttemptHistoryBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "mem://attempts-bounded-"+rand.Text())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "gated"}); err != nil {
		t.Fatal(err)
	}
	var e *jobq.Envelope
	for i := range maxAttemptHistory + 5 {
		if e, err = q.Receive(ctx, jobq.ReceiveOptions{Wait: time.Second}); err != nil {
			t.Fatal(err)
		}
		if n := len(e.Attempts()); n != min(i, maxAttemptHistory) {
			t.Fatalf("delivery %d sees %d attempts; want %d", i+1, n, min(i, maxAttemptHistory))
		}
		hooks.RecordAttempt(e, jobq.Attempt{Outcome: jobq.OutcomeGateMiss})
		if err := e.Requeue(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPutBacksKeepOneEntry: a task put back unrun (a pause, a per-worker
// limit) is recorded, so the next receiver does not take the put-back
// delivery for a lost worker; put-backs in a row keep one entry, the
// latest, and one after a lost delivery or another outcome gets its own.
func TestPutBacksKeepOneEntry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "mem://attempts-putback-"+rand.Text())
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "paused"}); err != nil {
		t.Fatal(err)
	}
	recv := func(vis time.Duration) *jobq.Envelope { return receiveFor(t, q, vis) }
	putBack := func(e *jobq.Envelope) {
		t.Helper()
		hooks.RecordAttempt(e, jobq.Attempt{Worker: "w", Outcome: jobq.OutcomePutBack, Detail: "paused: key k"})
		if err := e.Requeue(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		act  func(e *jobq.Envelope) // what this delivery does
		want []string               // the history the next delivery sees
	}{
		{putBack, []string{"1:put-back"}},
		{putBack, []string{"2:put-back"}},
		{putBack, []string{"3:put-back"}},
		{func(e *jobq.Envelope) { time.Sleep(100 * time.Millisecond) }, []string{"3:put-back", "4:lease-expired"}}, // its worker "dies"
		{putBack, []string{"3:put-back", "4:lease-expired", "5:put-back"}},
		{func(e *jobq.Envelope) {
			hooks.RecordAttempt(e, jobq.Attempt{Worker: "w", Outcome: jobq.OutcomeGateMiss})
			if err := e.Requeue(ctx, 0); err != nil {
				t.Fatal(err)
			}
		}, []string{"3:put-back", "4:lease-expired", "5:put-back", "6:gate-miss"}},
		{putBack, []string{"3:put-back", "4:lease-expired", "5:put-back", "6:gate-miss", "7:put-back"}},
	}
	e := recv(50 * time.Millisecond)
	for i, st := range steps {
		st.act(e)
		e = recv(50 * time.Millisecond)
		if got := outcomes(e.Attempts()); !reflect.DeepEqual(got, st.want) {
			t.Fatalf("after step %d, delivery %d sees %v; want %v", i+1, e.DeliveryCount, got, st.want)
		}
		if i < 3 {
			if lost := hooks.LostDeliveries(e); len(lost) != 0 {
				t.Fatalf("after put-backs, delivery %d infers lost deliveries %v; want none", e.DeliveryCount, lost)
			}
		}
	}
}

// receiveFor receives one message of q leased for vis, waiting up to 5 s.
func receiveFor(t *testing.T, q *jobq.Queue, vis time.Duration) *jobq.Envelope {
	t.Helper()
	e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: vis, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// outcomes lists as as "delivery:outcome".
func outcomes(as []jobq.Attempt) (out []string) {
	for _, a := range as {
		out = append(out, fmt.Sprintf("%d:%s", a.Delivery, a.Outcome))
	}
	return out
}

// TestHistoryTrimmedToFit: where the history would push a task over the
// backend's size limit, its oldest attempts go and the latest stays, so
// the next receiver does not take the delivery for a lost one.
func TestHistoryTrimmedToFit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "mem://attempts-trim-"+rand.Text()+"?max_message_bytes=2000")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo " + strings.Repeat("x", 1600)}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		e := receiveFor(t, q, time.Minute)
		if lost := hooks.LostDeliveries(e); len(lost) != 0 {
			t.Fatalf("delivery %d infers lost deliveries %v after recorded attempts; want none", e.DeliveryCount, lost)
		}
		if i > 0 {
			if as := e.Attempts(); len(as) == 0 || as[len(as)-1].Delivery != e.DeliveryCount-1 {
				t.Fatalf("delivery %d sees history %v; want the last delivery's attempt kept", e.DeliveryCount, outcomes(as))
			}
		}
		hooks.RecordAttempt(e, jobq.Attempt{Worker: "w", Outcome: jobq.OutcomeGateMiss, Detail: strings.Repeat("d", 40)})
		if err := e.Requeue(ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
}
