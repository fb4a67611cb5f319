package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/postgres"
	"github.com/jobq/jobq/worker"
)

// postgresURL is the test server (JOBQ_TEST_POSTGRES_URL overrides it).
func postgresURL() string {
	if s := os.Getenv("JOBQ_TEST_POSTGRES_URL"); s != "" {
		return s
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

var pgSeq atomic.Int64

// postgresSchema is the schema of the tests' Postgres queues: the one
// JOBQ_TEST_POSTGRES_URL names, else jobq_test.
func postgresSchema(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(postgresURL())
	if err != nil {
		t.Fatalf("JOBQ_TEST_POSTGRES_URL: %v", err)
	}
	if s := u.Query().Get("schema"); s != "" {
		return s
	}
	return "jobq_test"
}

// postgresConnURL is JOBQ_TEST_POSTGRES_URL without jobq's own
// parameters, for pgx.Connect.
func postgresConnURL(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(postgresURL())
	if err != nil {
		t.Fatalf("JOBQ_TEST_POSTGRES_URL: %v", err)
	}
	v := u.Query()
	v.Del("schema")
	v.Del("queue")
	u.RawQuery = v.Encode()
	return u.String()
}

// openPostgres opens a queue no other test uses, in postgresSchema, and
// empties it after the test.
func openPostgres(t testing.TB) *jobq.Queue {
	t.Helper()
	u, err := url.Parse(postgresURL())
	if err != nil {
		t.Fatalf("JOBQ_TEST_POSTGRES_URL: %v", err)
	}
	v := u.Query()
	v.Set("queue", fmt.Sprintf("worker-%d-%d", time.Now().UnixNano(), pgSeq.Add(1)))
	v.Set("schema", postgresSchema(t))
	u.RawQuery = v.Encode()
	q, err := jobq.Open(context.Background(), u.String())
	if err != nil {
		t.Fatalf("open the test Postgres queue: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = q.Admin().Clear(ctx)
		_, _ = q.Admin().PurgeDeadLetters(ctx)
		q.Close()
	})
	return q
}

type resizeArgs struct {
	Width  int    `json:"width"`
	Format string `json:"format"`
}

func payload(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMuxRoutesKinds: a worker with a Mux runs three kinds (one through
// HandleJSON) and shell tasks, each on its own handler, and dead-letters at
// once, whatever the retry budget, a task of an unknown kind (the reason
// names it and the known kinds), a task without kind or command, and a task
// whose payload does not decode. Every settlement reaches the event
// subscription as durable.
func TestMuxRoutesKinds(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		open func(testing.TB) *jobq.Queue
	}{{"sqlite", openQueue}, {"postgres", openPostgres}} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			q := b.open(t)
			tasks := map[string]*jobq.Task{
				"resize":    {Kind: "resize", Payload: payload(t, resizeArgs{Width: 640, Format: "png"})},
				"report":    {Kind: "report", Payload: json.RawMessage(`{"month": "2026-11"}`)},
				"email":     {Kind: "email", Payload: json.RawMessage(`{"to": "a@example.com"}`)},
				"shell":     {Command: "true"},
				"unknown":   {Kind: "transcode", Payload: json.RawMessage(`{}`), NumRetries: 3},
				"kindless":  {Payload: json.RawMessage(`{"x": 1}`), NumRetries: 3},
				"undecoded": {Kind: "resize", Payload: json.RawMessage(`{"width": "wide"}`), NumRetries: 3},
			}
			for _, task := range tasks {
				push(t, q, task)
			}
			var mu sync.Mutex
			ran := map[string][]string{} // handler → task IDs
			note := func(handler, id string) {
				mu.Lock()
				defer mu.Unlock()
				ran[handler] = append(ran[handler], id)
			}
			mux := worker.NewMux()
			worker.HandleJSON(mux, "resize", func(ctx context.Context, task *jobq.Task, p resizeArgs) error {
				if p != (resizeArgs{Width: 640, Format: "png"}) {
					return fmt.Errorf("decoded %+v", p)
				}
				if job := worker.JobFrom(ctx); job == nil || job.Task != task || job.Envelope.DeliveryCount != 1 {
					return fmt.Errorf("JobFrom(ctx) = %+v; want the job of task %s", job, task.ID)
				}
				note("resize", task.ID)
				return nil
			})
			for _, kind := range []string{"report", "email"} {
				mux.Handle(kind, worker.HandlerFunc(func(_ context.Context, job *worker.Job) error {
					note(kind, job.Task.ID)
					return nil
				}))
			}
			mux.HandleShell(worker.HandlerFunc(func(_ context.Context, job *worker.Job) error {
				note("shell", job.Task.ID)
				return nil
			}))

			w := worker.New(q, mux.Handler(), worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
			events, _ := w.Subscribe(0)
			if err := w.Run(t.Context()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			got := map[string]worker.Event{}
			for ev := range events { // closed when Run returned
				got[ev.Task.ID] = ev
			}

			for _, name := range []string{"resize", "report", "email", "shell"} {
				id := tasks[name].ID
				if r := ran[name]; len(r) != 1 || r[0] != id {
					t.Errorf("handler %s ran %v; want only task %s", name, r, id)
				}
				if ev := got[id]; ev.Outcome != worker.Completed || !ev.Durable {
					t.Errorf("%s: event %+v; want a durable completion", name, ev)
				}
			}
			dead, err := q.Admin().DeadLetters(t.Context(), 10)
			if err != nil {
				t.Fatal(err)
			}
			reasons := map[string]*jobq.DeadLetter{}
			for _, d := range dead {
				reasons[d.Task.ID] = d
			}
			for name, want := range map[string][]string{
				"unknown":   {`"transcode"`, `"email", "report", "resize" and shell tasks`},
				"kindless":  {"neither a kind nor a command", `"email", "report", "resize" and shell tasks`},
				"undecoded": {`kind "resize"`, "worker_test.resizeArgs", "cannot unmarshal"},
			} {
				id := tasks[name].ID
				d := reasons[id]
				if d == nil {
					t.Errorf("%s: not dead-lettered (dead letters: %d)", name, len(dead))
					continue
				}
				for _, w := range want {
					if !strings.Contains(d.Reason, w) {
						t.Errorf("%s: dead-letter reason %q lacks %q", name, d.Reason, w)
					}
				}
				if d.DeliveryCount > 1 {
					t.Errorf("%s: dead-lettered after %d deliveries; want at once, without retries", name, d.DeliveryCount)
				}
				ev := got[id]
				if ev.Outcome != worker.DeadLettered || !ev.Durable || !errors.Is(ev.Err, worker.ErrPermanent) {
					t.Errorf("%s: event %+v; want a durable permanent dead-lettering", name, ev)
				}
			}
			if len(dead) != 3 {
				t.Errorf("%d dead letters; want 3", len(dead))
			}
			if c := w.Counts(); c.Done != 4 || c.DeadLettered != 3 || c.EventsDropped != 0 {
				t.Errorf("Counts = %+v; want 4 done, 3 dead-lettered, no events dropped", c)
			}
		})
	}
}

// TestMuxRegistrationMistakesPanic: an empty kind, a nil handler and a
// second handler for one kind are mistakes in the program, reported at once.
func TestMuxRegistrationMistakesPanic(t *testing.T) {
	t.Parallel()
	h := worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })
	for _, tt := range []struct {
		name, want string
		register   func(m *worker.Mux)
	}{
		{"empty kind", "empty kind", func(m *worker.Mux) { m.Handle("", h) }},
		{"nil handler", "nil handler", func(m *worker.Mux) { m.Handle("a", nil) }},
		{"duplicate", `kind "a" already has a handler`, func(m *worker.Mux) { m.Handle("a", h); m.Handle("a", h) }},
		{"nil JSON function", "nil function", func(m *worker.Mux) { worker.HandleJSON[struct{}](m, "b", nil) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tt.want) {
					t.Errorf("panic %v; want one saying %q", r, tt.want)
				}
			}()
			tt.register(worker.NewMux())
		})
	}
}

// TestEventsSlowSubscriber: a subscriber that never reads does not hold up
// the worker; the events that did not fit are counted.
func TestEventsSlowSubscriber(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	const n = 20
	for i := range n {
		push(t, q, &jobq.Task{Command: fmt.Sprintf("echo %d", i)})
	}
	w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }),
		worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
	events, _ := w.Subscribe(2)
	if err := w.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var read int64
	for range events {
		read++
	}
	c := w.Counts()
	if c.Done != n || read != 2 || c.EventsDropped != n-2 {
		t.Errorf("done %d, events read %d, dropped %d; want %d done, 2 read, %d dropped", c.Done, read, c.EventsDropped, n, n-2)
	}
}

// TestEventsRetriedAndUnsubscribe: a failure with retries left is a durable
// Retried event with the handler's error and the budget left; an ended
// subscription's channel is closed and gets nothing more.
func TestEventsRetriedAndUnsubscribe(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "fails", NumRetries: 1, RetryBackoff: fastRetry})
	boom := errors.New("boom")
	w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return boom }),
		worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
	events, _ := w.Subscribe(10)
	gone, unsubscribe := w.Subscribe(10)
	unsubscribe()
	unsubscribe() // a second call does nothing
	if err := w.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	var got []worker.Event
	for ev := range events {
		got = append(got, ev)
	}
	if len(got) != 2 || got[0].Outcome != worker.Retried || got[0].RetriesLeft != 0 || !errors.Is(got[0].Err, boom) ||
		!got[0].Durable || got[1].Outcome != worker.DeadLettered || !got[1].Durable {
		t.Errorf("events %+v; want a durable retry with 0 left and the handler's error, then a dead-lettering", got)
	}
	if _, open := <-gone; open {
		t.Error("the ended subscription got an event")
	}
}

// TestTaskLogLevel: by default a worker logs nothing at INFO per task (the
// per-task lines are DEBUG); with TaskLogLevel INFO, as the CLI sets it,
// each task gets its "task started" and "task done" lines.
func TestTaskLogLevel(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		level slog.Leveler
		want  int
	}{{"default", nil, 0}, {"info", slog.LevelInfo, 3}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := openQueue(t)
			for i := range 3 {
				push(t, q, &jobq.Task{Command: fmt.Sprintf("echo %d", i)})
			}
			rec := newLogRecorder()
			w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }),
				worker.Options{Logger: rec.logger(), TaskLogLevel: tt.level, Poll: 100 * time.Millisecond})
			if err := w.Run(t.Context()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if s, d := rec.count("task started"), rec.count("task done"); s != tt.want || d != tt.want {
				t.Errorf("%d \"task started\" and %d \"task done\" lines at INFO; want %d of each", s, d, tt.want)
			}
		})
	}
}

// TestMuxReasons: what a Mux says about a task it cannot route, for each
// way that happens.
func TestMuxReasons(t *testing.T) {
	t.Parallel()
	ok := worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil })
	bare, full := worker.NewMux(), worker.NewMux()
	full.Handle("b", ok)
	full.Handle("a", ok)
	full.HandleShell(ok)
	for _, tt := range []struct {
		name string
		mux  *worker.Mux
		task *jobq.Task
		want string // "" when the task is routed
	}{
		{"known kind", full, &jobq.Task{Kind: "a", Payload: json.RawMessage(`{}`)}, ""},
		{"shell", full, &jobq.Task{Command: "true"}, ""},
		{"unknown kind", full, &jobq.Task{Kind: "c"}, `unknown task kind "c": this worker handles kinds "a", "b" and shell tasks`},
		{"shell without shell handler", bare, &jobq.Task{Command: "true"}, "unknown task kind: the task is a shell command, which this worker does not run (register a handler with Mux.HandleShell); this worker handles no kinds"},
		{"no kind, no command", full, &jobq.Task{Payload: json.RawMessage(`{}`)}, `unknown task kind: the task has neither a kind nor a command (push it with Task.Kind set); this worker handles kinds "a", "b" and shell tasks`},
		{"unknown kind on an empty mux", bare, &jobq.Task{Kind: "c"}, `unknown task kind "c": this worker handles no kinds`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.mux.Handler().Handle(t.Context(), &worker.Job{Task: tt.task})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("routing failed: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("error %v; want %q", err, tt.want)
			case tt.want != "" && (!errors.Is(err, worker.ErrUnknownKind) || !errors.Is(err, worker.ErrPermanent)):
				t.Errorf("error %v is not ErrUnknownKind and ErrPermanent", err)
			}
		})
	}
}

// TestEventDurableMeansStored: when a durable Completed event arrives, the
// task is already gone from the queue: the event follows the stored
// completion, not the handler's return.
func TestEventDurableMeansStored(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	push(t, q, &jobq.Task{Command: "echo once"})
	w := worker.New(q, worker.HandlerFunc(func(context.Context, *worker.Job) error { return nil }),
		worker.Options{Logger: quietLog(), Poll: 100 * time.Millisecond})
	events, _ := w.Subscribe(0)
	checked := make(chan error, 1)
	go func() {
		ev := <-events
		if ev.Outcome != worker.Completed || !ev.Durable {
			checked <- fmt.Errorf("first event %+v; want a durable completion", ev)
			return
		}
		st, err := q.Admin().Stats(context.Background())
		if err != nil {
			checked <- err
			return
		}
		if st.Ready+st.InFlight+st.Delayed != 0 {
			checked <- fmt.Errorf("at the durable completion event the queue still holds %+v", st)
			return
		}
		checked <- nil
	}()
	if err := w.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := <-checked; err != nil {
		t.Error(err)
	}
}
