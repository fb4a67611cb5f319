package worker

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"testing"
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
