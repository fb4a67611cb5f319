package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestReceiverBacksOffWhenLooksFindNothingToClaim: a receiver whose looks
// say a message is visible but whose claims get nothing (a key at its cap;
// a standby process behind 1,000 leased messages, which the registration's
// look answers with "look now") backs off, to a look every 100 ms under
// key policies, rather than claiming every millisecond: tens of claims in
// three seconds, not thousands.
func TestReceiverBacksOffWhenLooksFindNothingToClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, raw string) *Driver // returns the receiving driver
	}{
		{name: "key at its cap", setup: func(t *testing.T, raw string) *Driver {
			d := openURL(t, raw)
			setCap(t, d, "k", 1)
			pushKeyed(t, d, "k", 2)
			if got := receive(t, d, 1, time.Minute); len(got) != 1 {
				t.Fatalf("claimed %d; want 1", len(got))
			}
			return d
		}},
		{name: "standby behind 1,000 leased, keyed queue", setup: func(t *testing.T, raw string) *Driver {
			d := openURL(t, raw)
			setCap(t, d, "other", 5)
			msgs := make([]*driver.Message, 1100)
			for i := range msgs {
				msgs[i] = msg(fmt.Sprintf("m%04d", i))
			}
			if _, err := d.Push(ctxT(t), msgs); err != nil {
				t.Fatal(err)
			}
			for got := 0; got < len(msgs); {
				r, err := d.Receive(ctxT(t), driver.ReceiveParams{Max: 100, Visibility: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				got += len(r)
			}
			standby := openURL(t, raw)
			standby.listeners = 0 // every seat taken
			return standby
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.setup(t, newQueueURL(t, "poll=1s"))
			before := r.pool.Stat().AcquireCount()
			got, err := r.Receive(ctxT(t), driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: 3 * time.Second})
			if err != nil || len(got) != 0 {
				t.Fatalf("Receive = %d messages, %v; want none", len(got), err)
			}
			// Backing off from 1 ms, doubling to keyedRecheck (100 ms):
			// about 36 looks of one or two statements; spinning: one look
			// per millisecond.
			looks := r.pool.Stat().AcquireCount() - before
			t.Logf("%d statements in a 3 s receive", looks)
			if looks > 200 {
				t.Errorf("%d statements in a 3 s receive that found nothing to claim; want a back-off (36 looks)", looks)
			}
		})
	}
}

// TestSettlementWakesCappedReceiver: a receiver that backs off while its
// key is at the cap is woken by a settlement in its process that frees a
// slot, with a result record or without, and claims the key's next
// message then, not at its next look.
func TestSettlementWakesCappedReceiver(t *testing.T) {
	t.Parallel()
	for _, withRecord := range []bool{false, true} {
		t.Run(fmt.Sprintf("record=%v", withRecord), func(t *testing.T) {
			t.Parallel()
			d := openDriver(t, "poll=1h")
			d.keyedRecheck = time.Hour // only the wake-up can end the back-off early
			setCap(t, d, "k", 1)
			pushKeyed(t, d, "k", 2)
			first := receive(t, d, 1, time.Minute)
			if len(first) != 1 {
				t.Fatalf("claimed %d; want 1", len(first))
			}
			out := receiveInBackground(ctxT(t), d)
			// Let its sleeps grow past what the test waits below: 1 ms
			// doubled at each look, the looks come at about 4.1 s and 8.2 s.
			time.Sleep(5 * time.Second)
			select {
			case r := <-out:
				t.Fatalf("Receive returned %d messages, %v while the key was at its cap", len(r.recs), r.err)
			default:
			}
			done := driver.CompleteParams{Lease: first[0].Lease}
			if withRecord {
				done.Result = rec(first[0].ID, driver.ResultSucceeded, time.Hour)
			}
			for _, err := range d.Complete(ctxT(t), []driver.CompleteParams{done}) {
				if err != nil {
					t.Fatal(err)
				}
			}
			select {
			case r := <-out:
				if r.err != nil || len(r.recs) != 1 || r.recs[0].ID != "k-1" {
					t.Fatalf("Receive = %v, %v; want k-1", r.recs, r.err)
				}
			case <-time.After(2500 * time.Millisecond): // before its next look, at about 8.2 s
				t.Fatal("the settlement that freed the cap's slot did not wake the receiver")
			}
		})
	}
}

// TestSettlementsLeaveIdleReceiversAlone: on a queue with key policies,
// settlements wake only receivers that found messages held back, not
// those idle with nothing visible, which stay asleep: the settlements'
// statements alone. (Each settlement woke an idle receiver, which
// claimed and read the next visibility in vain.)
func TestSettlementsLeaveIdleReceiversAlone(t *testing.T) {
	t.Parallel()
	d := openDriver(t, "poll=1h")
	setCap(t, d, "elsewhere", 5)
	const n = 20
	msgs := make([]*driver.Message, n)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("m%02d", i))
	}
	if _, err := d.Push(ctxT(t), msgs); err != nil {
		t.Fatal(err)
	}
	leased := receive(t, d, n, time.Hour)
	if len(leased) != n {
		t.Fatalf("claimed %d; want %d", len(leased), n)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	outs := []chan received{receiveInBackground(ctx, d), receiveInBackground(ctx, d)}
	for d.idle.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // past their first short sleeps
	before := d.pool.Stat().AcquireCount()
	for _, r := range leased {
		for _, err := range d.Complete(ctxT(t), []driver.CompleteParams{{Lease: r.Lease}}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	got := d.pool.Stat().AcquireCount() - before
	t.Logf("%d statements for %d completions", got, n)
	if got > n+4 {
		t.Errorf("%d statements for %d completions with two receivers idle; want about %d (the completions')", got, n, n)
	}
	cancel()
	for _, out := range outs {
		<-out
	}
}

// TestRateWindowFrees: a receiver whose look found messages held back
// learns when the first full rate window admits again (its oldest
// admission's expiry), and nothing when no rate key is at its limit, so
// that it looks then rather than up to keyedRecheck later; a key at its
// concurrency cap gives no time (a settlement frees it).
func TestRateWindowFrees(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policy   driver.Policy
		claims   int           // of the key's messages, before the question
		min, max time.Duration // 0, 0: no time
	}{
		{"rate key at its limit", driver.Policy{Kind: driver.RatePolicy, Key: "k", Limit: 1, Period: time.Minute}, 1, 58 * time.Second, time.Minute},
		{"rate key under its limit", driver.Policy{Kind: driver.RatePolicy, Key: "k", Limit: 2, Period: time.Minute}, 1, 0, 0},
		{"key at its cap", driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "k", Limit: 1}, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openURL(t, newQueueURL(t))
			if err := d.SetPolicy(ctxT(t), tt.policy); err != nil {
				t.Fatal(err)
			}
			msgs := []*driver.Message{msg("a"), msg("b"), msg("c")}
			for _, m := range msgs {
				if tt.policy.Kind == driver.RatePolicy {
					m.RateLimitKey = "k"
				} else {
					m.ConcurrencyKey = "k"
				}
			}
			if _, err := d.Push(ctxT(t), msgs); err != nil {
				t.Fatal(err)
			}
			if got := receive(t, d, tt.claims, time.Minute); len(got) != tt.claims {
				t.Fatalf("claimed %d; want %d", len(got), tt.claims)
			}
			d.invalidatePolicies()
			if _, _, err := d.currentPolicies(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			if got := d.rateWindowFrees(ctxT(t)); got < tt.min || got > tt.max {
				t.Errorf("rateWindowFrees() = %v; want %v to %v", got, tt.min, tt.max)
			}
		})
	}
}
