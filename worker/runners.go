package worker

import "sync"

// runners runs the dispatcher's tasks on goroutines that outlive one task:
// a task that ends leaves its goroutine waiting for the next one. Processing
// and settling a task runs deep (the settlement's calls sit under the
// handler's frames), so a goroutine started per task would grow its stack,
// copying it, for every task; a reused one has grown it already.
//
// The idle runners are a stack: a task goes to the one that became idle
// last. There are as many runners as tasks were ever in process at once,
// prefetched ones waiting for a handler included (hundreds in a drain);
// taken last-in first-out, the ones kept busy are the few the running tasks
// need, and the rest stay idle at the bottom. An idle runner keeps the
// stack its tasks grew (park).
type runners struct {
	tasks *sync.WaitGroup // counts tasks, not goroutines

	mu      sync.Mutex
	idle    []*runner // most recently idle last
	stopped bool
}

// runner is one runner goroutine's mailbox: its next task, or closed when
// the runners stop.
type runner struct{ work chan runnable }

// runnable is one task for a runner: a received task's taskRun, whose run
// method costs no closure of its own, or any function (runFunc).
type runnable interface{ run() }

// runFunc runs a function as a runner's task.
type runFunc func()

func (f runFunc) run() { f() }

func newRunners(tasks *sync.WaitGroup) *runners {
	return &runners{tasks: tasks}
}

// Go runs f as one task: on the runner that became idle last, if any, else
// on a new goroutine.
func (r *runners) Go(f func()) { r.start(runFunc(f)) }

// start runs f as one task, as Go does.
func (r *runners) start(f runnable) {
	r.tasks.Add(1)
	r.mu.Lock()
	if n := len(r.idle); n > 0 {
		next := r.idle[n-1]
		r.idle[n-1] = nil
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		next.work <- f // buffered: never blocks
		return
	}
	r.mu.Unlock()
	go r.loop(&runner{work: make(chan runnable, 1)}, f)
}

func (r *runners) loop(me *runner, f runnable) {
	for {
		f.run()
		r.tasks.Done()
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		r.idle = append(r.idle, me)
		r.mu.Unlock()
		var ok bool
		if f, ok = me.park(); !ok {
			return
		}
	}
}

// parkDepth is how much stack an idle runner holds in use. The garbage
// collector halves the stack of a goroutine that uses under a quarter of
// it, and a task on a runner whose stack was halved copies it again as it
// grows: in a Redis end-to-end run, shrinking and regrowing idle runners'
// stacks (8 to 16 KB for a task) took about 4 % of the worker's CPU.
// Parked under a frame of parkDepth, a runner keeps a stack of up to
// 4*parkDepth whole while idle: a few MB for hundreds of runners, what
// the tasks in process at their peak held anyway.
const parkDepth = 4 << 10

// park waits for the runner's next task, or for its mailbox to close, under
// a frame of parkDepth bytes (see parkDepth).
//
//go:noinline
func (me *runner) park() (runnable, bool) {
	var depth [parkDepth]byte
	holdFrame(&depth)
	f, ok := <-me.work
	return f, ok
}

// holdFrame keeps park's frame from being optimised away.
//
//go:noinline
func holdFrame(b *[parkDepth]byte) { b[0] = 1 }

// close makes the idle runners return, and those still running a task
// return after it. Call it once no task will start.
func (r *runners) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	for _, idle := range r.idle {
		close(idle.work)
	}
	r.idle = nil
}
