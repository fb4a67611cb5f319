package mem

import (
	"container/heap"
	"strconv"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
)

// state is where a message is in its life.
type state int

const (
	ready   state = iota // visible, in the ready heap
	waiting              // invisible until due: delayed push or requeue
	leased               // claimed, invisible until the lease's due time
)

// message is one live (not dead) message.
type message struct {
	id         string // the engine's message ID
	taskID     string
	body       []byte
	priority   int
	seq        uint64 // push order, for FIFO among equal priorities
	enqueuedAt time.Time
	deliveries int
	uncounted  int    // deliveries that ended in a requeue not after a failure
	concKey    string // concurrency and rate-limit keys (policy.go)
	rateKey    string
	trace      string // the producer's traceparent (driver.Message.TraceParent)
	group      string // the task's group (driver.Message.Group)

	state state
	due   time.Time // visible since (ready), visible at (waiting) or lease expiry (leased)
	token string    // the current lease's fencing token (leased only)
	gen   uint64    // bumped on every state change; stale timed entries are skipped
}

// deadMessage is one message in the dead-letter store.
type deadMessage struct {
	m      *message
	reason string
	detail string
	deadAt time.Time
}

// store is one named queue, shared by every driver opened on that name. All
// fields are guarded by mu.
type store struct {
	mu      sync.Mutex
	msgs    map[string]*message // live messages by message ID
	byTask  map[string]*message // live messages by task ID, for dedup
	readyQ  readyHeap
	timed   timedHeap
	dead    []*deadMessage // oldest first
	nextSeq uint64
	nextTok uint64
	pol     policies
	res     results
	groups  map[string]*driver.GroupCounters // by name (groups.go)
	// heldMsgs are the held tasks by task ID (held.go).
	heldMsgs map[string]*driver.HeldMessage
	// changed is closed (and replaced) whenever a message may have become
	// claimable, to wake waiting receivers.
	changed chan struct{}
}

func newStore() *store {
	return &store{
		msgs:    map[string]*message{},
		byTask:  map[string]*message{},
		changed: make(chan struct{}),
		pol:     newPolicies(),
		res:     newResults(),
		groups:  map[string]*driver.GroupCounters{},

		heldMsgs: map[string]*driver.HeldMessage{},
	}
}

// wake tells waiting receivers to look again. Callers hold mu.
func (s *store) wake() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// promote makes every waiting message whose time has come, and every leased
// message whose lease expired, ready. Callers hold mu.
func (s *store) promote(now time.Time) {
	for len(s.timed) > 0 {
		e := s.timed[0]
		if e.gen != e.m.gen || s.msgs[e.m.id] != e.m {
			heap.Pop(&s.timed) // stale: the message moved on since
			continue
		}
		if e.due.After(now) {
			return
		}
		heap.Pop(&s.timed)
		s.makeReady(e.m, e.due)
	}
}

// nextDue is when the earliest waiting or leased message changes state or a
// full rate window admits again, or the zero time. Callers hold mu and have called promote.
func (s *store) nextDue() time.Time {
	due := s.rateFree(time.Now())
	for len(s.timed) > 0 {
		e := s.timed[0]
		if e.gen == e.m.gen && s.msgs[e.m.id] == e.m {
			if due.IsZero() || e.due.Before(due) {
				due = e.due
			}
			return due
		}
		heap.Pop(&s.timed)
	}
	return due
}

// makeReady makes m claimable, visible since at. Callers hold mu.
func (s *store) makeReady(m *message, at time.Time) {
	s.setState(m, ready)
	m.token, m.due = "", at
	m.gen++
	heap.Push(&s.readyQ, m)
}

// makeTimed puts m into state st until due. Callers hold mu.
func (s *store) makeTimed(m *message, st state, due time.Time) {
	s.setState(m, st)
	m.due = due
	m.gen++
	heap.Push(&s.timed, timedEntry{due: due, m: m, gen: m.gen})
}

// add stores a new message, ready or waiting. Callers hold mu.
func (s *store) add(m *message, notBefore, now time.Time) {
	s.nextSeq++
	m.seq = s.nextSeq
	m.id = strconv.FormatUint(m.seq, 10)
	s.msgs[m.id] = m
	if m.taskID != "" {
		s.byTask[m.taskID] = m
	}
	if notBefore.After(now) {
		s.makeTimed(m, waiting, notBefore)
	} else {
		s.makeReady(m, now)
	}
	s.wake()
}

// remove deletes a live message. Callers hold mu. A ready message must not
// be removed this way (it sits in the ready heap); only held ones are.
func (s *store) remove(m *message) {
	s.setState(m, gone)
	delete(s.msgs, m.id)
	if s.byTask[m.taskID] == m {
		delete(s.byTask, m.taskID)
	}
	m.gen++
}

// claim leases the best ready message. Callers hold mu and have called
// promote.
func (s *store) claim(now time.Time, vis time.Duration) *message {
	if len(s.readyQ) == 0 {
		return nil
	}
	m := heap.Pop(&s.readyQ).(*message)
	s.nextTok++
	m.token = m.id + "." + strconv.FormatUint(s.nextTok, 10)
	m.deliveries++
	s.makeTimed(m, leased, now.Add(vis))
	return m
}

// held returns the message whose lease has token tok, if that lease is
// still held at now. Callers hold mu.
func (s *store) held(msgID, tok string, now time.Time) *message {
	m := s.msgs[msgID]
	if m == nil || m.state != leased || m.token != tok || !now.Before(m.due) {
		return nil
	}
	return m
}

// readyHeap orders ready messages by priority (higher first), then push
// order.
type readyHeap []*message

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if h[i].priority != h[j].priority {
		return h[i].priority > h[j].priority
	}
	return h[i].seq < h[j].seq
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(*message)) }
func (h *readyHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return m
}

// timedEntry schedules a message's next state change.
type timedEntry struct {
	due time.Time
	m   *message
	gen uint64
}

// timedHeap orders timed entries by due time.
type timedHeap []timedEntry

func (h timedHeap) Len() int           { return len(h) }
func (h timedHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h timedHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timedHeap) Push(x any)        { *h = append(*h, x.(timedEntry)) }
func (h *timedHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = timedEntry{}
	*h = old[:len(old)-1]
	return e
}
