// Package endreason holds the worker's end reasons (worker.Worker.EndReason)
// that other packages of this module act on, so that both sides compare
// the same value.
package endreason

// QueueEmpty is the end reason of a worker that stopped because it found
// the queue empty (without --wait).
const QueueEmpty = "queue empty"
