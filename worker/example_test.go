package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/worker"
)

// Resize is the payload of the "resize" tasks in the examples.
type Resize struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

// A worker that runs several kinds of task: each kind has its own handler,
// and one decodes its payload through HandleJSON.
func ExampleMux() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-mux")
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()

	args, _ := json.Marshal(Resize{Image: "cat.png", Width: 640})
	if _, err := q.PushBatch(ctx, []*jobq.Task{
		{Kind: "resize", Payload: args},
		{Kind: "welcome-email", Payload: json.RawMessage(`{"to": "ada@example.com"}`)},
	}, jobq.PushOptions{}); err != nil {
		log.Fatal(err)
	}

	mux := worker.NewMux()
	worker.HandleJSON(mux, "resize", func(ctx context.Context, task *jobq.Task, r Resize) error {
		fmt.Printf("resizing %s to %d pixels\n", r.Image, r.Width)
		return nil
	})
	mux.Handle("welcome-email", worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		fmt.Printf("sending %s\n", job.Task.Payload)
		return nil
	}))
	// Concurrency 1 runs the tasks one at a time, in the order pushed.
	if err := worker.Run(ctx, q, mux.Handler(), worker.Options{Concurrency: 1, Logger: slog.New(slog.DiscardHandler)}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// resizing cat.png to 640 pixels
	// sending {"to": "ada@example.com"}
}

// HandleJSON decodes each task's payload for the function; a payload that
// does not decode is dead-lettered at once, since retrying cannot fix it.
func ExampleHandleJSON() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-handlejson")
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	for _, p := range []string{`{"image": "dog.png", "width": 320}`, `{"image": "cat.png", "width": "wide"}`} {
		if _, err := q.Push(ctx, &jobq.Task{Kind: "resize", Payload: json.RawMessage(p), NumRetries: 3}); err != nil {
			log.Fatal(err)
		}
	}

	mux := worker.NewMux()
	worker.HandleJSON(mux, "resize", func(ctx context.Context, task *jobq.Task, r Resize) error {
		fmt.Printf("resized %s to %d (delivery %d)\n", r.Image, r.Width, worker.JobFrom(ctx).Envelope.DeliveryCount)
		return nil
	})
	if err := worker.Run(ctx, q, mux.Handler(), worker.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		log.Fatal(err)
	}
	dead, err := q.Admin().DeadLetters(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range dead {
		fmt.Println("dead letter:", d.Reason)
	}
	// Output:
	// resized dog.png to 320 (delivery 1)
	// dead letter: task of kind "resize": payload does not decode into worker_test.Resize: json: cannot unmarshal string into Go struct field Resize.width of type int
}

// A task of a kind the worker has no handler for is dead-lettered at once,
// with a reason that names the kind and the kinds the worker knows.
func ExampleMux_unknownKind() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "jobq-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	q, err := jobq.Open(ctx, "sqlite://"+filepath.Join(dir, "q.db")+"?queue=jobs")
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(ctx, &jobq.Task{Kind: "transcode", Payload: json.RawMessage(`{}`), NumRetries: 5}); err != nil {
		log.Fatal(err)
	}

	mux := worker.NewMux()
	worker.HandleJSON(mux, "resize", func(ctx context.Context, task *jobq.Task, r Resize) error { return nil })
	if err := worker.Run(ctx, q, mux.Handler(), worker.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		log.Fatal(err)
	}
	dead, err := q.Admin().DeadLetters(ctx, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range dead {
		fmt.Println(d.Reason)
	}
	// Output:
	// unknown task kind "transcode": this worker handles kinds "resize"
}

// A Go program learns that a task's completion is stored from the worker's
// settlement events.
func ExampleWorker_Subscribe() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-events")
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	for _, cmd := range []string{"ok 1", "ok 2", "fail"} {
		if _, err := q.Push(ctx, &jobq.Task{Command: cmd}); err != nil {
			log.Fatal(err)
		}
	}

	w := worker.New(q, worker.HandlerFunc(func(ctx context.Context, job *worker.Job) error {
		if job.Task.Command == "fail" {
			return fmt.Errorf("cannot %s", job.Task.Command)
		}
		return nil
	}), worker.Options{Logger: slog.New(slog.DiscardHandler)})
	events, _ := w.Subscribe(0) // subscribe before Run
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}

	var lines []string
	for ev := range events { // closed when Run returns
		lines = append(lines, fmt.Sprintf("%s: %s, durable %t", ev.Task.Command, ev.Outcome, ev.Durable))
	}
	sort.Strings(lines) // tasks run concurrently: events come in any order
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// fail: dead-lettered, durable true
	// ok 1: completed, durable true
	// ok 2: completed, durable true
}

// A Go handler's return value is kept in the task's result record, where
// the producer reads it with Queue.Result or Queue.Wait.
func ExampleHandleJSONResult() {
	ctx := context.Background()
	q, err := jobq.Open(ctx, "mem://example-handlejsonresult")
	if err != nil {
		log.Fatal(err)
	}
	defer q.Close()
	pushed, err := q.Push(ctx, &jobq.Task{Kind: "resize", Payload: json.RawMessage(`{"image": "cat.png", "width": 640}`)})
	if err != nil {
		log.Fatal(err)
	}

	type Resized struct {
		URL   string `json:"url"`
		Bytes int    `json:"bytes"`
	}
	mux := worker.NewMux()
	worker.HandleJSONResult(mux, "resize", func(ctx context.Context, task *jobq.Task, r Resize) (Resized, error) {
		return Resized{URL: fmt.Sprintf("https://images.example.com/%d/%s", r.Width, r.Image), Bytes: 48213}, nil
	})
	if err := worker.Run(ctx, q, mux.Handler(), worker.Options{Logger: slog.New(slog.DiscardHandler)}); err != nil {
		log.Fatal(err)
	}

	res, err := q.Wait(ctx, pushed.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res[0].State, string(res[0].Value))
	// Output:
	// succeeded {"url":"https://images.example.com/640/cat.png","bytes":48213}
}
