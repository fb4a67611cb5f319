// Package mem is jobq's in-process backend, for examples, unit tests of code
// above the driver, and trying jobq without an engine. Build a queue with
// New(Options), or import the package for its side effect of registering the
// "mem" scheme:
//
//	import _ "github.com/jobq/jobq/backends/mem"
//
//	q, err := jobq.Open(ctx, "mem://work")
//
// Queues with the same name share their messages within one process (two
// Opens of mem://work see the same queue) and vanish when the process exits.
// Every feature the portable layer uses is native: fenced leases, delivery
// counts, delayed push and requeue, priority, dead letters, deduplication by
// task ID, in-place update, peek and exact counts. Queue policies
// (docs/policies.md) are kept with the queue and enforced natively under the
// queue's lock: per-key concurrency caps and rolling-window rate limits on
// every claim, max-depth on every push. Result records are kept natively
// (stored under the same lock as the settlement, waiters woken at once,
// expired ones never returned), and Admin.Cancel removes a queued or
// delayed task by its ID. There is no worker registry.
//
// # URL parameters
//
// They set the Options fields of the same meaning.
//
//   - max_message_bytes=N declares a message size limit (default: none).
//   - max_visibility=D (a Go duration such as 30s) declares the longest
//     lease a Receive or Renew may ask for (default: none).
//   - max_push_batch=N, max_receive_batch=N and max_peek=N declare batch
//     limits (default: none), which the driver enforces, so that tests see
//     whether the portable layer splits and clamps.
//   - unsupported=F1,F2 and emulated=F3 declare features (by their names in
//     the driver package, such as priority, lease-renewal or delayed-requeue)
//     Unsupported or Emulated, so that tests can exercise the portable
//     layer's degradation logic without a real degraded engine. A feature
//     declared this way behaves as declared: an unsupported priority is
//     ignored, an emulated delayed requeue redelivers at once, an emulated
//     delayed push delivers at once, and so on; the declared Fallback text
//     says which.
//
// The driver supports no As targets.
package mem
