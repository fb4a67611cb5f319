package pushgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// store is a push that keeps messages in memory, deduplicating task IDs as
// a driver does, with an optional max depth. Its first calls, one per gate,
// each wait until their gate is released.
type store struct {
	mu       sync.Mutex
	byID     map[string]string
	n        int
	maxDepth int // 0: none
	calls    [][]string
	ctxs     []context.Context
	fail     error
	gates    []chan struct{}
	released int
}

func newStore(gated int) *store {
	s := &store{byID: map[string]string{}}
	for range gated {
		s.gates = append(s.gates, make(chan struct{}))
	}
	return s
}

// release lets the next gated call go on.
func (s *store) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gates[s.released])
	s.released++
}

// open lets every gated call go on.
func (s *store) open() {
	for s.released < len(s.gates) {
		s.release()
	}
}

func (s *store) push(ctx context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	s.mu.Lock()
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	s.calls = append(s.calls, ids)
	s.ctxs = append(s.ctxs, ctx)
	var gate chan struct{}
	if len(s.calls) <= len(s.gates) {
		gate = s.gates[len(s.calls)-1]
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	adding := 0
	for _, m := range msgs {
		if _, ok := s.byID[m.ID]; !ok {
			adding++
		}
	}
	if s.maxDepth > 0 && adding > 0 && len(s.byID)+adding > s.maxDepth {
		return nil, driver.QueueFull(int64(len(s.byID)), int64(s.maxDepth), adding)
	}
	out := make([]driver.PushResult, len(msgs))
	for i, m := range msgs {
		if mid, ok := s.byID[m.ID]; ok {
			out[i] = driver.PushResult{MessageID: mid, Duplicate: true}
			continue
		}
		s.n++
		mid := fmt.Sprint(s.n)
		s.byID[m.ID] = mid
		out[i] = driver.PushResult{MessageID: mid}
	}
	return out, nil
}

func (s *store) callSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, c := range s.calls {
		out = append(out, len(c))
	}
	return out
}

// outcome is what one caller got.
type outcome struct {
	res driver.PushResult
	err error
}

// waitFor polls until cond holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// queue starts pushes of ids through g one after another: the first
// inFlight each once the one before is in its call to s, the rest each once
// the one before waits in g (so they wait in this order).
func queue(t *testing.T, g *Group, s *store, ctxs []context.Context, ids []string, inFlight int) []chan outcome {
	t.Helper()
	out := make([]chan outcome, len(ids))
	for i, id := range ids {
		out[i] = make(chan outcome, 1)
		go func() {
			r, err := g.Push(ctxs[i], &driver.Message{ID: id, Body: []byte("b")})
			out[i] <- outcome{r, err}
		}()
		if i < inFlight {
			waitFor(t, fmt.Sprintf("push %d to be sent", i), func() bool { return len(s.callSizes()) == i+1 })
		} else {
			waitFor(t, fmt.Sprintf("push %d to wait", i), func() bool { return g.Waiting() == i-inFlight+1 })
		}
	}
	return out
}

func background(n int) []context.Context {
	out := make([]context.Context, n)
	for i := range out {
		out[i] = context.Background()
	}
	return out
}

func TestLonePushGoesAtOnceWithItsContext(t *testing.T) {
	s := newStore(0)
	g := New(s.push, Options{})
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "mine")
	r, err := g.Push(ctx, &driver.Message{ID: "a"})
	if err != nil || r.MessageID != "1" || r.Duplicate {
		t.Fatalf("got %+v, %v", r, err)
	}
	if s.ctxs[0] != ctx {
		t.Error("a lone push did not run with its caller's context")
	}
}

func TestWaitingPushesShareTheNextCall(t *testing.T) {
	tests := []struct {
		name     string
		inFlight int
		ids      []string
		maxBatch int
		calls    []int
		results  []driver.PushResult
	}{
		{
			name: "one in flight, four wait", inFlight: 1,
			ids:   []string{"a", "b", "c", "d", "e"},
			calls: []int{1, 4},
			results: []driver.PushResult{{MessageID: "1"}, {MessageID: "2"}, {MessageID: "3"},
				{MessageID: "4"}, {MessageID: "5"}},
		},
		{
			name: "same id twice in one call: the second is a duplicate", inFlight: 1,
			ids:     []string{"a", "b", "b", "c"},
			calls:   []int{1, 3},
			results: []driver.PushResult{{MessageID: "1"}, {MessageID: "2"}, {MessageID: "2", Duplicate: true}, {MessageID: "3"}},
		},
		{
			name: "capped batches", inFlight: 1, maxBatch: 2,
			ids:   []string{"a", "b", "c", "d", "e"},
			calls: []int{1, 2, 2},
			results: []driver.PushResult{{MessageID: "1"}, {MessageID: "2"}, {MessageID: "3"},
				{MessageID: "4"}, {MessageID: "5"}},
		},
		{
			name: "two in flight", inFlight: 2,
			ids:   []string{"a", "b", "c", "d"},
			calls: []int{1, 1, 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(tt.inFlight)
			g := New(s.push, Options{MaxInFlight: tt.inFlight, MaxBatch: tt.maxBatch})
			waits := queue(t, g, s, background(len(tt.ids)), tt.ids, tt.inFlight)
			waitFor(t, "the calls in flight", func() bool { return len(s.callSizes()) == tt.inFlight })
			s.open()
			got := make([]outcome, len(waits))
			for i, w := range waits {
				got[i] = <-w
				if got[i].err != nil {
					t.Errorf("push %s: %v", tt.ids[i], got[i].err)
				}
			}
			if sizes := s.callSizes(); fmt.Sprint(sizes) != fmt.Sprint(tt.calls) {
				t.Errorf("calls of %v messages, want %v", sizes, tt.calls)
			}
			for i, want := range tt.results {
				if got[i].res != want {
					t.Errorf("push %d (%s): got %+v, want %+v", i, tt.ids[i], got[i].res, want)
				}
			}
			g.mu.Lock()
			flight, waiting := g.flight, len(g.waiting)
			g.mu.Unlock()
			if flight != 0 || waiting != 0 {
				t.Errorf("after the pushes: %d calls in flight, %d waiting", flight, waiting)
			}
		})
	}
}

// TestLonePushCarriesThoseThatWaited: when a push that went alone returns
// while others wait, its goroutine sends them in one call, with their own
// contexts' values, and returns after that call, with its own outcome.
func TestLonePushCarriesThoseThatWaited(t *testing.T) {
	s := newStore(2)
	g := New(s.push, Options{MaxInFlight: 1})
	type key struct{}
	ctxs := []context.Context{
		context.WithValue(context.Background(), key{}, "a"),
		context.WithValue(context.Background(), key{}, "b"),
		context.WithValue(context.Background(), key{}, "c"),
	}
	waits := queue(t, g, s, ctxs, []string{"a", "b", "c"}, 1)
	s.release()
	waitFor(t, "the waiting pushes' call", func() bool { return len(s.callSizes()) == 2 })
	if sizes := s.callSizes(); fmt.Sprint(sizes) != "[1 2]" {
		t.Fatalf("calls of %v messages, want [1 2]", sizes)
	}
	for i, w := range waits {
		select {
		case o := <-w:
			t.Fatalf("push %d returned (%+v) while the call that carries b and c is held", i, o)
		default:
		}
	}
	if v := s.ctxs[1].Value(key{}); v != "b" {
		t.Errorf("the shared call carried the values of %v's context, want b's", v)
	}
	s.release()
	for i, w := range waits {
		o := <-w
		if want := fmt.Sprint(i + 1); o.err != nil || o.res.MessageID != want {
			t.Errorf("push %d: got %+v, %v; want message %s", i, o.res, o.err, want)
		}
	}
	g.mu.Lock()
	flight := g.flight
	g.mu.Unlock()
	if flight != 0 {
		t.Errorf("%d calls in flight after the pushes", flight)
	}
}

func TestCanceledWaiterIsNotSent(t *testing.T) {
	s := newStore(1)
	g := New(s.push, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	ctxs := []context.Context{context.Background(), context.Background(), ctx, context.Background()}
	waits := queue(t, g, s, ctxs, []string{"a", "b", "c", "d"}, 1)
	cancel()
	got := <-waits[2]
	if errcode.Of(got.err) != errcode.Canceled || !errors.Is(got.err, context.Canceled) || !strings.Contains(got.err.Error(), "it was not sent") {
		t.Fatalf("canceled waiter: got %+v, %v; want Canceled, not sent", got.res, got.err)
	}
	s.open()
	for _, i := range []int{0, 1, 3} {
		if o := <-waits[i]; o.err != nil {
			t.Errorf("push %d: %v", i, o.err)
		}
	}
	for _, call := range s.calls {
		for _, id := range call {
			if id == "c" {
				t.Errorf("the canceled push was sent: calls %v", s.calls)
			}
		}
	}
}

func TestCanceledWhileInFlight(t *testing.T) {
	s := newStore(2) // the lone call, then the batch
	g := New(s.push, Options{})
	ctxA, cancelA := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	ctxs := []context.Context{context.Background(), ctxA, ctxB}
	waits := queue(t, g, s, ctxs, []string{"lone", "a", "b"}, 1)
	// Let the lone call return: its goroutine then makes the batch call
	// (a, b), which is held.
	s.release()
	waitFor(t, "the batch call", func() bool { return len(s.callSizes()) == 2 })
	batchCtx := s.ctxs[1]
	// Each member returns at once, told that its task may be stored; the
	// call is canceled only when no one is left waiting for it.
	for i, cancel := range []func(){cancelA, cancelB} {
		cancel()
		got := <-waits[1+i]
		if errcode.Of(got.err) != errcode.Canceled || !strings.Contains(got.err.Error(), "may have been stored") {
			t.Fatalf("member %d canceled in flight: got %+v, %v", i, got.res, got.err)
		}
		if i == 0 && batchCtx.Err() != nil {
			t.Fatal("the batch call was canceled while a caller still waited for it")
		}
	}
	waitFor(t, "the batch context to end", func() bool { return batchCtx.Err() != nil })
	// The lone push's goroutine makes the call, so it returns when the
	// call does, with its own outcome.
	select {
	case o := <-waits[0]:
		t.Fatalf("the lone push returned before the call it makes: %+v, %v", o.res, o.err)
	default:
	}
	s.open()
	if o := <-waits[0]; o.err != nil || o.res.MessageID != "1" {
		t.Errorf("lone push: got %+v, %v; want its outcome", o.res, o.err)
	}
}

func TestMaxDepthRefusalIsMappedToEachCaller(t *testing.T) {
	s := newStore(1)
	s.maxDepth = 3
	g := New(s.push, Options{})
	ids := []string{"a", "b", "a", "c", "d", "e"}
	waits := queue(t, g, s, background(len(ids)), ids, 1)
	s.open()
	var stored, dup, full int
	for i, w := range waits {
		o := <-w
		var qf *driver.QueueFullError
		switch {
		case o.err == nil && o.res.Duplicate:
			dup++
		case o.err == nil:
			stored++
		case errors.As(o.err, &qf) && errcode.Of(o.err) == errcode.ResourceExhausted:
			full++
		default:
			t.Errorf("push %d: %v", i, o.err)
		}
	}
	// As if one after the other: a, b, a (duplicate), c fit; d and e do not.
	if stored != 3 || dup != 1 || full != 2 {
		t.Errorf("stored %d, duplicates %d, refused %d; want 3, 1, 2 (calls %v)", stored, dup, full, s.callSizes())
	}
}

func TestBatchErrorReachesEveryCaller(t *testing.T) {
	s := newStore(1)
	g := New(s.push, Options{})
	boom := driver.Errorf(errcode.Unavailable, "connection reset")
	waits := queue(t, g, s, background(4), []string{"a", "b", "c", "d"}, 1)
	s.mu.Lock()
	s.fail = boom
	s.mu.Unlock()
	s.open()
	for i, w := range waits {
		if o := <-w; !errors.Is(o.err, boom) {
			t.Errorf("push %d: got %+v, %v; want %v", i, o.res, o.err, boom)
		}
	}
	if sizes := s.callSizes(); fmt.Sprint(sizes) != "[1 3]" {
		t.Errorf("calls %v, want [1 3]", sizes)
	}
}

func TestLargeBodyGoesAlone(t *testing.T) {
	s := newStore(1)
	g := New(s.push, Options{MaxBody: 4})
	waits := queue(t, g, s, background(1), []string{"a"}, 1)
	// The group is busy, but a large body does not wait for it.
	if _, err := g.Push(context.Background(), &driver.Message{ID: "big", Body: []byte("12345")}); err != nil {
		t.Fatal(err)
	}
	s.open()
	if o := <-waits[0]; o.err != nil {
		t.Fatal(o.err)
	}
}
