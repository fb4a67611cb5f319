// Package wire is jobq's message codec: the JSON body a task travels in,
// the same that Microsoft's ai4s-jobq writes and reads, so that the two can
// share a queue. Queues encode and decode tasks themselves; use this package
// to build or read message bodies outside a queue.
package wire

import (
	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/hooks"
)

// Marshal validates t and returns its message body: schema v1, exactly as
// ai4s-jobq writes it, when t uses only what v1 can express, schema v2
// otherwise. When t.ID is empty it is set to the deterministic ID (see
// TaskID). A task decoded by Unmarshal and left unchanged (apart from
// NumRetries, ReplyRequested and the v2 fields) keeps its kwargs and unknown
// members byte for byte.
func Marshal(t *jobq.Task) ([]byte, error) { return hooks.MarshalTask(t) }

// Unmarshal decodes a message body written by jobq or ai4s-jobq: schema v0
// (no reply_requested), v1, v2, and ai4s-jobq's legacy objects without a
// version. Kwargs with a "cmd" member make a shell task (Command, Env in
// order, Cwd); any other kwargs object becomes Payload. The task remembers
// its kwargs text and unknown members, so Marshal re-encodes an unchanged
// task to the same bytes. Input that is not a task is a *jobq.Error with
// code errcode.InvalidArgument saying what is wrong; receivers dead-letter
// such messages as poison.
func Unmarshal(body []byte) (*jobq.Task, error) {
	t, err := hooks.UnmarshalTask(body)
	if err != nil {
		return nil, err
	}
	return t.(*jobq.Task), nil
}

// TaskID returns the deterministic ID of t without changing t: the MD5 hex
// of its encoding without the "id" member, which is how ai4s-jobq computes
// it. Two tasks with the same content have the same ID, which backends with
// duplicate detection use to drop repeated pushes.
func TaskID(t *jobq.Task) (string, error) { return hooks.TaskID(t) }
