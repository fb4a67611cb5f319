package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/worker"
	"github.com/jobq/jobq/worker/preempt"
)

// fakeScheduledEvents is an Azure metadata server whose Scheduled Events
// document holds a Preempt event for this VM once evict is called.
type fakeScheduledEvents struct {
	mu      sync.Mutex
	doc     string
	started []string
}

func (f *fakeScheduledEvents) evict(notBefore time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.doc = `{"DocumentIncarnation": 2, "Events": [{"EventId": "EV-1", "EventStatus": "Scheduled", "EventType": "Preempt",
		"ResourceType": "VirtualMachine", "Resources": ["spot-7"], "NotBefore": "` + notBefore.UTC().Format(http.TimeFormat) + `",
		"Description": "", "EventSource": "Platform", "DurationInSeconds": -1}]}`
}

func (f *fakeScheduledEvents) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.Header.Get("Metadata") != "true":
		http.Error(w, "Metadata header required", http.StatusBadRequest)
	case r.URL.Path == "/metadata/instance/compute/name":
		io.WriteString(w, "spot-7")
	case r.URL.Path == "/metadata/scheduledevents" && r.Method == http.MethodPost:
		var body struct{ StartRequests []struct{ EventId string } }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, s := range body.StartRequests {
			f.started = append(f.started, s.EventId)
		}
	case r.URL.Path == "/metadata/scheduledevents":
		if f.doc == "" {
			io.WriteString(w, `{"DocumentIncarnation": 1, "Events": []}`)
			return
		}
		io.WriteString(w, f.doc)
	default:
		http.NotFound(w, r)
	}
}

// TestPreemptionRequeuesRunningTasks: a Preempt event arrives while long
// shell tasks run, one of which ignores SIGTERM. The worker stops taking
// work, stops both (killing the stubborn one before the eviction's
// deadline), puts them back with their retry budget untouched, approves the
// event, and Run returns ErrPreempted.
func TestPreemptionRequeuesRunningTasks(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ready := filepath.Join(t.TempDir(), "trapped")
	push(t, q,
		&jobq.Task{Command: "sleep 300", NumRetries: 2},
		&jobq.Task{Command: "trap '' TERM; touch " + ready + "; sleep 300", NumRetries: 2},
		&jobq.Task{Command: "echo never started", NumRetries: 2})

	meta := &fakeScheduledEvents{}
	srv := httptest.NewServer(meta)
	defer srv.Close()
	watcher, err := preempt.New(preempt.Azure, preempt.Config{Endpoint: srv.URL, Interval: 10 * time.Millisecond, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}

	shell := &worker.Shell{Env: []string{"PATH=/usr/bin:/bin"}, KillTimeout: time.Hour}
	var mu sync.Mutex
	started := 0
	h := worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		mu.Lock()
		started++
		if started == 2 {
			// Both slots run. Once the second task ignores SIGTERM, the
			// eviction is announced, due in 11-12s (NotBefore has whole
			// seconds), so that task is killed 1-2s later.
			go func() {
				for {
					if _, err := os.Stat(ready); err == nil {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				meta.evict(time.Now().Add(12 * time.Second))
			}()
		}
		mu.Unlock()
		return shell.Handle(ctx, job)
	})
	logs := newLogRecorder()
	w := worker.New(q, h, worker.Options{Concurrency: 2, Prefetch: -1, Wait: true, Preemption: watcher,
		Logger: logs.logger(), Poll: 50 * time.Millisecond})
	err = w.Run(context.Background())
	if !errors.Is(err, worker.ErrPreempted) {
		t.Fatalf("Run = %v; want ErrPreempted", err)
	}
	if !strings.HasPrefix(w.EndReason(), "preempted") {
		t.Errorf("end reason %q; want it to say preempted", w.EndReason())
	}
	if c := w.Counts(); c.Requeued != 2 || c.Failed != 0 || c.Done != 0 {
		t.Errorf("counts %+v; want 2 requeued, none failed or done", c)
	}
	if n := logs.count("preemption notice: this machine is going away"); n != 1 {
		t.Errorf("the notice was logged %d times; want once", n)
	}
	if n := logs.count("killing the task: SIGKILL"); n != 1 {
		t.Errorf("the kill of the task that ignores SIGTERM was logged %d times; want once", n)
	}
	if started != 2 {
		t.Errorf("%d tasks started; want 2 (no work taken after the notice)", started)
	}
	st, err := q.Admin().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Ready != 3 || st.InFlight != 0 {
		t.Fatalf("after the eviction the queue has %d ready, %d in flight; want all 3 ready", st.Ready, st.InFlight)
	}
	peeked, err := q.Admin().Peek(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range peeked {
		if p.Task == nil || p.Task.NumRetries != 2 {
			t.Errorf("task %v: retry budget changed by the eviction; want num_retries 2", p.Task)
		}
	}
	meta.mu.Lock()
	defer meta.mu.Unlock()
	if len(meta.started) != 1 || meta.started[0] != "EV-1" {
		t.Errorf("StartRequests %v; want the event approved once the tasks were requeued", meta.started)
	}
}
