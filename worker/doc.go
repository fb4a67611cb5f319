// Package worker runs tasks from a jobq.Queue: it receives them with a lease,
// keeps the lease alive with a heartbeat, runs a Handler, and settles each
// task — Complete on success, Fail (retry while the budget lasts, then
// dead-letter with the output's tail) on failure, Requeue when the worker is
// stopping, nothing when the lease was lost.
//
// Run is the entry point for Go handlers. A Mux routes tasks to handlers by
// their Task.Kind; HandleJSON decodes the payload for the handler:
//
//	mux := worker.NewMux()
//	worker.HandleJSON(mux, "render", func(ctx context.Context, task *jobq.Task, p RenderArgs) error {
//		return render(ctx, p)
//	})
//	err := worker.Run(ctx, q, mux.Handler(), worker.Options{Wait: true})
//
// A task of a kind without a handler, and a payload that does not decode,
// are dead-lettered at once (Permanent); other handler errors are retried
// while the task's budget lasts. Worker.Subscribe delivers an Event for
// each settlement, sent once the engine has stored it.
//
// Shell runs command tasks (what `jobq QUEUE worker` does): each one as
// `bash -c CMD` in its own process group with its own environment.
//
// New returns a Worker whose Drain, Stop and Kill methods map to the
// signals the CLI handles (SIGUSR1, SIGTERM/SIGINT, a second signal).
// With Options.Preemption (package preempt) it also stops, requeueing its
// running tasks, when a spot VM is about to be evicted. While the engine
// refuses writes (a full disk), it takes no new tasks and retries the
// settlements of finished ones.
//
// The worker uses only the portable jobq API, so it behaves the same on
// every backend, within what each backend declares it can do.
package worker
