package redis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// bodyShapes are task IDs and bodies whose packing (body.go) has an edge:
// every envelope opening and ending bodypack.Pack knows, bodies that look like
// an envelope but are not one it can cut, and bodies it must leave alone.
func bodyShapes(t *testing.T) []*driver.Message {
	t.Helper()
	const v1 = `{"version": 1, "reply_requested": false, "kwargs": `
	wire := func(task *jobq.Task) *driver.Message { return wireMessage(t, task) }
	huge := json.RawMessage(`{"blob": "` + strings.Repeat("é\\\"x", 300_000) + `"}`)
	return []*driver.Message{
		wire(&jobq.Task{Payload: json.RawMessage(`{"n": 1}`)}),
		wire(&jobq.Task{Payload: json.RawMessage(`{"n": 2}`), ReplyRequested: true}),
		wire(&jobq.Task{Payload: json.RawMessage(`{"n": 3}`), NumRetries: 2}),
		wire(&jobq.Task{Payload: json.RawMessage(`{"n": 4}`), Kind: "render", Metadata: map[string]string{"k": "ü"}}),
		wire(&jobq.Task{Payload: json.RawMessage(`{"n": 5}`), Kind: "render", ReplyRequested: true}),
		wire(&jobq.Task{Payload: json.RawMessage(`{"text": "日本語 ✓ \"quoted\" \\ back"}`)}),
		wire(&jobq.Task{Payload: json.RawMessage(`{"n": 6}`), ID: `own "quoted" \ id`}),
		wire(&jobq.Task{Payload: json.RawMessage(`{"n": 7}`), ID: "FRAME-0123456789ABCDEF0123456789"}),
		wire(&jobq.Task{Payload: huge}),
		{ID: "v0-" + canonID(1), Body: []byte(`{"kwargs": "{}", "id": "v0-` + canonID(1) + `"}`)},
		// The ending names another ID than the task's: only the opening is cut.
		{ID: canonID(2), Body: []byte(v1 + `"{}", "num_retries": 0, "id": "` + canonID(3) + `"}`)},
		// The ID's digits appear in the kwargs too.
		{ID: canonID(4), Body: []byte(v1 + `"` + canonID(4) + `", "num_retries": 0, "id": "` + canonID(4) + `"}`)},
		{ID: "opening-only", Body: []byte(v1)},
		{ID: "ending-only", Body: []byte(`, "id": "ending-only"}`)},
		{ID: "ending-twice", Body: []byte(`, "num_retries": 0, "id": "ending-twice"}, "num_retries": 0, "id": "ending-twice"}`)},
		{ID: "opening-twice", Body: []byte(v1 + v1)},
		{ID: "version 3", Body: []byte(`{"version": 3, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": "version 3"}`)},
		{ID: "spacing", Body: []byte(`{"version":1,"reply_requested":false,"kwargs":"{}","num_retries":0,"id":"spacing"}`)},
		{ID: "invalid utf-8", Body: []byte(v1 + "\"\xff\xfe\x00\", \"id\": \"invalid utf-8\"}")},
		{ID: "", Body: []byte(v1 + `"{}", "num_retries": 0, "id": ""}`)},
		{ID: "", Body: []byte(`, "id": ""}`)},
		{ID: "plain", Body: []byte("plain text")},
		{ID: "empty", Body: []byte{}},
		{ID: "header letters", Body: []byte("b")},
	}
}

// canonID is a jobq-style task ID: 32 lowercase hex digits.
func canonID(n int) string { return strings.Repeat("0", 31) + string(rune('0'+n)) }

// TestBodiesRoundTrip pushes every body shape, alone (so that each one
// that packs is packed) and in one batch (where one that does not pack
// stores them all as they are), and checks that each comes back byte for
// byte from every path that reads a body: peek, claim, a requeue without
// a new body, the dead letters and their requeue, and that a replaced
// body that looks packable comes back as given.
func TestBodiesRoundTrip(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		name := "alone"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			ctx := testCtx(t)
			msgs := bodyShapes(t)
			want := map[string][]byte{} // message ID -> body
			var res []driver.PushResult
			if batch {
				res = push(t, d, msgs...)
			} else {
				for _, m := range msgs {
					res = append(res, push(t, d, m)...)
				}
			}
			for i, r := range res {
				if r.Duplicate {
					t.Fatalf("push of %q reported a duplicate", msgs[i].ID)
				}
				want[r.MessageID] = msgs[i].Body
			}
			check := func(what, mid string, got []byte) {
				t.Helper()
				if w, ok := want[mid]; !ok || !bytes.Equal(got, w) {
					t.Errorf("%s of message %s: body %.80q (%d bytes); want %.80q (%d bytes)", what, mid, got, len(got), w, len(w))
				}
			}
			peeked, err := d.Peek(ctx, 100)
			if err != nil || len(peeked) != len(msgs) {
				t.Fatalf("peek: %d messages, %v; want %d", len(peeked), err, len(msgs))
			}
			for _, p := range peeked {
				check("peek", p.MessageID, p.Body)
			}
			// Half requeued as they are, half dead-lettered as they are;
			// the first is requeued with a new body that would pack.
			recs := receive(t, d, 100, time.Minute)
			if len(recs) != len(msgs) {
				t.Fatalf("received %d; want %d", len(recs), len(msgs))
			}
			var requeue []driver.RequeueParams
			var dead []driver.DeadLetterParams
			for i, r := range recs {
				check("claim", r.Lease.MessageID, r.Body)
				switch {
				case i == 0:
					nb := []byte(`{"version": 1, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": "` + r.ID + `"}`)
					requeue = append(requeue, driver.RequeueParams{Lease: r.Lease, Body: nb})
					want[r.Lease.MessageID] = nb
				case i%2 == 0:
					requeue = append(requeue, driver.RequeueParams{Lease: r.Lease})
				default:
					dead = append(dead, driver.DeadLetterParams{Lease: r.Lease, Reason: "r"})
				}
			}
			if errs := d.Requeue(ctx, requeue); errs != nil {
				t.Fatalf("requeue: %v", errs)
			}
			if errs := d.DeadLetter(ctx, dead); errs != nil {
				t.Fatalf("dead letter: %v", errs)
			}
			letters, err := d.ListDead(ctx, 100)
			if err != nil || len(letters) != len(dead) {
				t.Fatalf("dead letters: %d, %v; want %d", len(letters), err, len(dead))
			}
			for _, l := range letters {
				check("dead letter", l.MessageID, l.Body)
			}
			if n, err := d.RequeueDead(ctx, nil); err != nil || int(n) != len(dead) {
				t.Fatalf("requeue dead: %d, %v; want %d", n, err, len(dead))
			}
			recs = receive(t, d, 100, time.Minute)
			if len(recs) != len(msgs) {
				t.Fatalf("received %d after requeues; want %d", len(recs), len(msgs))
			}
			for _, r := range recs {
				check("claim after requeue", r.Lease.MessageID, r.Body)
			}
		})
	}
}

// TestLayoutMarkUnderLoad lays a queue out as a release before packed
// bodies did (delayed messages, here all due, in P..'delayed'; max-depth
// in P..'pold'), then has several newer clients open it at once, each
// marking it, pushing and claiming while the others open. Every message,
// the old delayed ones and every push accepted, is claimed exactly once,
// with its body, and nothing is left behind in the old keys.
func TestLayoutMarkUnderLoad(t *testing.T) {
	t.Parallel()
	const old, clients, each, depth = 60, 4, 10, 62
	raw := newQueueURL(t, "")
	d := openURL(t, raw)
	ctx := testCtx(t)
	bodies := map[string][]byte{} // task ID -> body
	var msgs []*driver.Message
	for i := 0; i < old; i++ {
		m := wireMessage(t, &jobq.Task{Payload: json.RawMessage(`{"old": ` + strconv.Itoa(i) + `}`)})
		m.NotBefore = time.Now().Add(time.Hour)
		msgs = append(msgs, m)
		bodies[m.ID] = m.Body
	}
	push(t, d, msgs...)
	c, P := d.client, d.prefix
	for _, cmd := range [][]any{
		{"del", P + "delayed", P + "pold"},
		{"rename", P + "due", P + "delayed"},
		{"zunionstore", P + "delayed", 1, P + "delayed", "weights", 0}, // all due now
		{"set", P + "pold", depth},
	} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}

	var mu sync.Mutex
	claimed := map[string]int{}
	accepted := map[string][]byte{}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			dw := openURL(t, raw)
			for i := 0; i < each; i++ {
				m := wireMessage(t, &jobq.Task{Payload: json.RawMessage(`{"w": ` + strconv.Itoa(w) + `, "i": ` + strconv.Itoa(i) + `}`)})
				if _, err := dw.Push(ctx, []*driver.Message{m}); err == nil {
					mu.Lock()
					accepted[m.ID] = m.Body
					mu.Unlock()
				} else if errcode.Of(err) != errcode.ResourceExhausted {
					errs <- err
					return
				}
				recs, err := dw.Receive(ctx, driver.ReceiveParams{Max: 3, Visibility: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				var leases []driver.Lease
				mu.Lock()
				for _, r := range recs {
					claimed[r.ID]++
					if want, ok := bodies[r.ID]; ok && !bytes.Equal(r.Body, want) {
						errs <- fmt.Errorf("old delayed task %s: body %q; want %q", r.ID, r.Body, want)
					}
					leases = append(leases, r.Lease)
				}
				mu.Unlock()
				if e := dw.Complete(ctx, driver.Completions(leases...)); e != nil {
					errs <- fmt.Errorf("complete: %v", e)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Drain what is left.
	for {
		recs := receive(t, d, 100, time.Minute)
		if len(recs) == 0 {
			break
		}
		var leases []driver.Lease
		for _, r := range recs {
			claimed[r.ID]++
			leases = append(leases, r.Lease)
		}
		if e := d.Complete(ctx, driver.Completions(leases...)); e != nil {
			t.Fatal(e)
		}
	}
	for id, b := range accepted {
		bodies[id] = b
	}
	for id := range bodies {
		if claimed[id] != 1 {
			t.Errorf("task %s claimed %d times; want once", id, claimed[id])
		}
	}
	t.Logf("old %d, pushes accepted %d, claimed %d", old, len(accepted), len(claimed))
	if len(claimed) != len(bodies) {
		t.Errorf("claimed %d tasks; want %d", len(claimed), len(bodies))
	}
	if typ := c.Type(ctx, P+"delayed").Val(); typ != "string" {
		t.Errorf("the old delayed key is a %s; want the mark (string)", typ)
	}
	if n := c.ZCard(ctx, P+"due").Val(); n != 0 {
		t.Errorf("%d messages left in the due set", n)
	}
	if md, err := c.Get(ctx, P+"polm").Int(); err != nil || md != depth {
		t.Errorf("max-depth after the mark: %d, %v; want %d", md, err, depth)
	}
}

// TestLayoutMarkRestoredHealsOrphans: an older client's "policy unset
// max-depth" deletes the mark in P..'pold', and its delayed push then
// fails part way (at the mark in P..'delayed'), leaving a message that
// owns its task ID but is in no set. A newer client that opens the queue
// and finds the mark gone puts it back and makes such messages ready; if
// that open stops after putting the mark back, before its rescue has run
// (cutShort), the next open rescues them.
func TestLayoutMarkRestoredHealsOrphans(t *testing.T) {
	t.Parallel()
	for _, cutShort := range []bool{false, true} {
		t.Run(fmt.Sprintf("cut short %v", cutShort), func(t *testing.T) {
			t.Parallel()
			testHealsOrphans(t, cutShort)
		})
	}
}

func testHealsOrphans(t *testing.T, cutShort bool) {
	raw := newQueueURL(t, "")
	d := openURL(t, raw)
	ctx := testCtx(t)
	live := &driver.Message{ID: "live", Body: []byte("live"), NotBefore: time.Now().Add(time.Hour)}
	orphan := wireMessage(t, &jobq.Task{Payload: json.RawMessage(`{"orphan": 1}`)})
	res := push(t, d, live, orphan)
	c, P := d.client, d.prefix
	if err := c.ZRem(ctx, P+"ready", readyMemberOf(res[1].MessageID)).Err(); err != nil {
		t.Fatal(err)
	}
	// A dead letter that still owns its ID (as a quarantined key that was
	// not a hash does) stays dead.
	dead := push(t, d, &driver.Message{ID: "dead", Body: []byte("dead")})
	if err := c.ZRem(ctx, P+"ready", readyMemberOf(dead[0].MessageID)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx, P+"dead", goredis.Z{Score: 1, Member: dead[0].MessageID}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, P+"pold").Err(); err != nil {
		t.Fatal(err)
	}
	if r := push(t, d, orphan); !r[0].Duplicate {
		t.Fatal("the orphan's ID does not deduplicate; the test does not set up what it means to")
	}
	if cutShort {
		// An open that put the mark back and stopped there.
		if err := d.run(ctx, layoutScript, layoutNote).Err(); err != nil {
			t.Fatal(err)
		}
	}

	d2 := openURL(t, raw)
	if typ := c.Type(ctx, P+"pold").Val(); typ != "hash" {
		t.Errorf("after reopening, pold is a %s; want the mark (hash)", typ)
	}
	recs := receive(t, d2, 10, time.Minute)
	if len(recs) != 1 || recs[0].ID != orphan.ID || !bytes.Equal(recs[0].Body, orphan.Body) {
		t.Fatalf("after reopening, received %+v; want the orphaned task with its body", recs)
	}
	if s := stats(t, d2); s.Delayed != 1 || s.InFlight != 1 || s.Dead != 1 || s.Ready != 0 {
		t.Errorf("after reopening, stats %+v; want the delayed message and the dead letter left as they were", s)
	}
	if n := c.Exists(ctx, P+"rescue").Val(); n != 0 {
		t.Error("the rescue flag is still set after a rescue that ran to the end")
	}
}

// readyMemberOf is the ready-set member of a pushed message (scripts.go,
// ready_member).
func readyMemberOf(mid string) string { return strings.Repeat("0", 16-len(mid)) + mid + mid }

// TestLayoutOfANewerReleaseRefused: a queue whose layout mark names a key
// layout newer than this release's (field 'release' of P..'pold', set by
// the later release) is refused at open, saying so; one naming this
// release's layout or none opens.
func TestLayoutOfANewerReleaseRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		release int
		refused bool
	}{
		{layoutRelease, false},
		{layoutRelease + 1, true},
	} {
		t.Run(fmt.Sprintf("release %d", tc.release), func(t *testing.T) {
			t.Parallel()
			raw := newQueueURL(t, "")
			d := openURL(t, raw)
			ctx := testCtx(t)
			if err := d.client.HSet(ctx, d.prefix+"pold", "release", tc.release).Err(); err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			d2, err := (&Opener{}).Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
			if !tc.refused {
				if err != nil {
					t.Fatalf("open: %v; want it opened", err)
				}
				d2.Close()
				return
			}
			if err == nil {
				d2.Close()
				t.Fatal("open succeeded; want it refused")
			}
			want := fmt.Sprintf("key layout %d or later (field 'release' of %spold), written by a newer jobq; this program knows layout %d: upgrade it", tc.release, d.prefix, layoutRelease)
			if errcode.Of(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), want) {
				t.Fatalf("open: %v (code %v); want FailedPrecondition saying %q", err, errcode.Of(err), want)
			}
		})
	}
}
