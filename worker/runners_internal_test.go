package worker

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"unsafe"
)

// goroutineID is the calling goroutine's number, from its stack trace.
func goroutineID(t *testing.T) int {
	t.Helper()
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	buf = bytes.TrimPrefix(buf, []byte("goroutine "))
	id, err := strconv.Atoi(string(buf[:bytes.IndexByte(buf, ' ')]))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestRunnersReuseTheLastIdle: a task goes to the runner that became idle
// last, so that the runners the tasks keep busy are few (and their stacks
// grown), and the others stay idle.
func TestRunnersReuseTheLastIdle(t *testing.T) {
	var tasks sync.WaitGroup
	r := newRunners(&tasks)
	defer r.close()
	idle := func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.idle)
	}
	// Three tasks at once, on three runners; they end in order.
	const n = 3
	started := make(chan struct{}, n)
	runnerOf := make([]int, n)
	release := make([]chan struct{}, n)
	for i := range release {
		release[i] = make(chan struct{})
		r.Go(func() {
			runnerOf[i] = goroutineID(t)
			started <- struct{}{}
			<-release[i]
		})
	}
	for range n {
		<-started
	}
	for i := range release {
		close(release[i])
		for idle() < i+1 {
			runtime.Gosched()
		}
	}
	got := make(chan int)
	r.Go(func() { got <- goroutineID(t) })
	if id := <-got; id != runnerOf[n-1] {
		t.Errorf("the next task ran on goroutine %d; want %d, the runner idle last (runners: %v, idle first to last)", id, runnerOf[n-1], runnerOf)
	}
	tasks.Wait()
}

// TestIdleRunnerKeepsItsStack: a runner idle through garbage collections
// keeps the stack its last task grew, so that the next task does not copy
// it as it grows again. A stack that moved shows in the address of a local
// at the same depth.
func TestIdleRunnerKeepsItsStack(t *testing.T) {
	var tasks sync.WaitGroup
	r := newRunners(&tasks)
	defer r.close()
	at := make(chan uintptr)
	top := func() {
		var local byte
		at <- uintptr(unsafe.Pointer(&local))
	}
	task := func(grow bool) func() {
		return func() {
			if grow {
				growStack(8 << 10) // as deep as a task's settlement runs
			}
			top()
		}
	}
	r.Go(task(true))
	before := <-at
	tasks.Wait()
	for { // until the runner is idle, then let it park
		r.mu.Lock()
		n := len(r.idle)
		r.mu.Unlock()
		if n == 1 {
			break
		}
		runtime.Gosched()
	}
	runtime.Gosched()
	runtime.GC()
	runtime.GC()
	r.Go(task(false))
	if after := <-at; after != before {
		t.Errorf("a local of the next task's frame is at %#x, was %#x: the idle runner's stack was moved (shrunk)", after, before)
	}
	tasks.Wait()
}

// growStack uses about n bytes of stack.
//
//go:noinline
func growStack(n int) byte {
	var b [512]byte
	if n <= len(b) {
		return b[0]
	}
	return growStack(n-len(b)) + b[1]
}
