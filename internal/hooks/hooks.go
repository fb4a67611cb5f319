// Package hooks is how the root package jobq lends its worker-side and
// codec entry points to the packages of this module that need them (worker,
// cli, wire and the conformance suite) without making them public API.
//
// Package jobq sets every variable in its init; this package cannot import
// jobq, so values of jobq's types travel as any: q is a *jobq.Queue, e a
// *jobq.Envelope, w a *jobq.WorkerInfo, a a jobq.Attempt and t a
// *jobq.Task. Passing anything else panics.
package hooks

// The task codec (package wire is its public face).
var (
	// MarshalTask validates t and returns its message body.
	MarshalTask func(t any) ([]byte, error)
	// UnmarshalTask decodes a message body into a *jobq.Task.
	UnmarshalTask func(body []byte) (any, error)
	// TaskID returns the deterministic ID of t.
	TaskID func(t any) (string, error)
)
