package worker

import "sync"

// runners runs the dispatcher's tasks on goroutines that outlive one task:
// a task that ends leaves its goroutine waiting for the next one. Processing
// and settling a task runs deep (the settlement's calls sit under the
// handler's frames), so a goroutine started per task would grow its stack,
// copying it, for every task; a reused one has grown it already (the
// runtime shrinks an idle one's stack at most once per GC cycle). There are
// never more goroutines than tasks running at once.
type runners struct {
	tasks *sync.WaitGroup // counts tasks, not goroutines
	work  chan func()     // unbuffered: a send succeeds only to an idle runner
	stop  chan struct{}   // closed: idle runners return
}

func newRunners(tasks *sync.WaitGroup) *runners {
	return &runners{tasks: tasks, work: make(chan func()), stop: make(chan struct{})}
}

// Go runs f as one task: on an idle runner if there is one, else on a new
// goroutine.
func (r *runners) Go(f func()) {
	r.tasks.Add(1)
	select {
	case r.work <- f:
	default:
		go r.loop(f)
	}
}

func (r *runners) loop(f func()) {
	for {
		f()
		r.tasks.Done()
		select {
		case f = <-r.work:
		case <-r.stop:
			return
		}
	}
}

// close makes the idle runners return, and those still running a task
// return after it. Call it once no task will start.
func (r *runners) close() { close(r.stop) }
