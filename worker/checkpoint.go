package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/stash"
)

// Checkpoints (docs/checkpoints.md). A task's checkpoint is kept in the
// queue's stash as two objects: the checkpoint itself, an ordinary
// content-addressed object (a header naming the queue and task, then the
// bytes), and a small pointer, at a name derived from the queue and task,
// that names the current checkpoint object. A save writes the new object
// first and then replaces the pointer (stash.Replacer), so a save cut
// short, by a preemption or a SIGKILL, leaves the pointer at the previous
// checkpoint, which stays whole; the object it replaced is deleted after.
// A delivery after the first looks the pointer up (the first cannot have
// a checkpoint), and the task's end deletes both.

// DefaultCheckpointMaxBytes is the default Options.CheckpointMaxBytes.
const DefaultCheckpointMaxBytes = 1 << 30

// ErrNoCheckpoints is returned by Job.SaveCheckpoint when the worker keeps
// no checkpoints (Options.Checkpoints is off).
var ErrNoCheckpoints = errors.New("this worker keeps no checkpoints: start it with Options.Checkpoints (the CLI's --checkpoints or --checkpoint-every) and a stash")

// checkpointSaveTimeout bounds one save, which may run after the task's
// context ended (saving at a stop is the point).
const checkpointSaveTimeout = 2 * time.Minute

// checkpointLoadTimeout bounds the restore before a task starts.
const checkpointLoadTimeout = 5 * time.Minute

// checkpointRetryDelay is how long a task whose checkpoint could not be
// read (the stash unreachable) waits before it is delivered again.
const checkpointRetryDelay = 30 * time.Second

// checkpointPointer is the pointer object's JSON.
type checkpointPointer struct {
	V      int       `json:"v"`
	Queue  string    `json:"queue"`
	Task   string    `json:"task"`
	Object string    `json:"object"` // the checkpoint object's name (SHA-256)
	Size   int64     `json:"size"`
	Saved  time.Time `json:"saved"`
	// Work is how much work the checkpoint holds: the running time of the
	// attempts up to the save, over all of them.
	Work time.Duration `json:"work_ns"`
}

// checkpoints is a worker's access to its queue's checkpoint store.
type checkpoints struct {
	store     stash.Store
	rep       stash.Replacer
	queue     string
	maxBytes  int64
	retention time.Duration
	log       *slog.Logger
	dirs      dirPool // shell tasks' directories
}

// newCheckpoints returns the worker's checkpoint store, nil when
// checkpoints are off, or the error that stops the worker: checkpoints
// asked for on a queue with no stash, or one that cannot replace objects.
func newCheckpoints(w *Worker) (*checkpoints, error) {
	if !w.o.Checkpoints {
		return nil, nil
	}
	st := hooks.Stash(w.q)
	if st == nil {
		return nil, &jobq.Error{Code: errcode.FailedPrecondition, Op: "worker", Msg: "checkpoints (--checkpoints, --checkpoint-every) need a stash to keep them in: give one with --stash file:///shared/dir, gs://bucket/prefix or azblob://account/container/prefix ($JOBQ_STASH, or stash= in the queue URL)"}
	}
	rep, err := stash.ReplacerOf(st)
	if err != nil {
		return nil, &jobq.Error{Code: errcode.FailedPrecondition, Op: "worker", Err: err, Msg: err.Error()}
	}
	if n := sweepCheckpointDirs(); n > 0 {
		w.log.Info("deleted the checkpoint directories of killed workers on this machine", "dirs", n, "in", os.TempDir())
	}
	return &checkpoints{store: st, rep: rep, queue: w.q.Name(), maxBytes: w.o.CheckpointMaxBytes,
		retention: hooks.Retention(w.q), log: w.log}, nil
}

// pointerName is the name of task id's pointer object.
func (c *checkpoints) pointerName(id string) string {
	return stash.Sum([]byte("jobq checkpoint pointer\x00" + c.queue + "\x00" + id))
}

// header starts every checkpoint object of task id, so that two tasks with
// the same checkpoint bytes have objects of their own.
func (c *checkpoints) header(id string) []byte {
	return []byte("jobq-checkpoint 1 " + c.queue + " " + id + "\n")
}

// taskCheckpoint is one task's checkpoint while it runs.
type taskCheckpoint struct {
	c       *checkpoints
	id      string
	log     *slog.Logger
	started time.Time // this attempt's start
	base    time.Duration

	restored []byte // the checkpoint the attempt started from; nil when none

	mu       sync.Mutex // serialises saves
	ptr      *checkpointPointer
	exists   bool      // a pointer may be stored: delete at the end
	lastSave time.Time // this attempt's last save; zero when none
	saves    int
	tooLarge bool // warned of an oversized checkpoint once
}

// begin sets up the checkpoint of env's task before it runs: on a
// delivery after the first it reads the pointer and restores the
// checkpoint. An error means the stash could not be read: the task should
// wait and be delivered again rather than start over.
func (c *checkpoints) begin(ctx context.Context, env *jobq.Envelope, log *slog.Logger) (*taskCheckpoint, error) {
	tc := &taskCheckpoint{c: c, id: env.Task.ID, log: log, started: time.Now()}
	if env.DeliveryCount <= 1 {
		return tc, nil // nothing ran before: no stash round trip
	}
	ctx, cancel := context.WithTimeout(ctx, checkpointLoadTimeout)
	defer cancel()
	ptr, err := c.readPointer(ctx, tc.id)
	if err != nil || ptr == nil {
		return tc, err
	}
	tc.exists = true
	if c.retention > 0 && time.Since(ptr.Saved) > c.retention {
		log.Warn("checkpoint older than the queue's retention: starting over", "saved", ptr.Saved, "retention", c.retention)
		tc.drop(ctx)
		tc.exists = false
		return tc, nil
	}
	data, err := stash.Load(ctx, c.store, c.store.Location()+"/"+ptr.Object, ptr.Object, ptr.Size)
	if errcode.Of(err) == errcode.NotFound || errcode.Of(err) == errcode.InvalidArgument {
		log.Warn("the task's checkpoint is missing or damaged: starting over", "error", err)
		return tc, nil
	}
	if err != nil {
		return nil, err
	}
	h := c.header(tc.id)
	if !bytes.HasPrefix(data, h) {
		log.Warn("the task's checkpoint object belongs to another task: starting over", "object", ptr.Object)
		return tc, nil
	}
	tc.restored, tc.ptr, tc.base = data[len(h):], ptr, ptr.Work
	log.Info("checkpoint restored", "bytes", len(tc.restored), "saved", ptr.Saved.Format(time.RFC3339), "work", ptr.Work.Round(time.Second))
	return tc, nil
}

// readPointer returns task id's pointer, nil when it has none.
func (c *checkpoints) readPointer(ctx context.Context, id string) (*checkpointPointer, error) {
	b, err := c.store.Get(ctx, c.pointerName(id), 64<<10)
	if errcode.Of(err) == errcode.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the task's checkpoint pointer from stash %s: %w", redact.URL(c.store.Location()), err)
	}
	var p checkpointPointer
	if err := json.Unmarshal(b, &p); err != nil || p.Task != id || !stash.IsName(p.Object) {
		c.log.Warn("ignoring a damaged checkpoint pointer", "task", id)
		return nil, nil
	}
	return &p, nil
}

// save stores data as the task's checkpoint. It is safe to call from
// several goroutines; saves happen one at a time, in call order.
func (tc *taskCheckpoint) save(ctx context.Context, data []byte, why string) error {
	if tc == nil {
		return ErrNoCheckpoints
	}
	h := tc.c.header(tc.id)
	body := make([]byte, 0, len(h)+len(data))
	return tc.saveBody(ctx, append(append(body, h...), data...), why)
}

// saveBody saves body, the checkpoint object: the header, then the
// checkpoint's bytes.
func (tc *taskCheckpoint) saveBody(ctx context.Context, body []byte, why string) error {
	data := body[len(tc.c.header(tc.id)):]
	if max := tc.c.maxBytes; max > 0 && int64(len(data)) > max {
		err := fmt.Errorf("checkpoint of %d bytes is over the limit of %d bytes (Options.CheckpointMaxBytes, --checkpoint-max-mb): not saved; the previous one is kept", len(data), max)
		tc.mu.Lock()
		warned := tc.tooLarge
		tc.tooLarge = true
		tc.mu.Unlock()
		if !warned {
			tc.log.Warn("checkpoint not saved", "error", err)
		}
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointSaveTimeout)
	defer cancel()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	at := time.Now()
	// 1. The checkpoint object; until the pointer names it, nothing does.
	obj, err := tc.c.store.Put(ctx, body)
	if err != nil {
		return fmt.Errorf("saving the checkpoint: %w", err)
	}
	ptr := &checkpointPointer{V: 1, Queue: tc.c.queue, Task: tc.id, Object: obj.SHA256, Size: obj.Size,
		Saved: at.UTC(), Work: tc.base + at.Sub(tc.started)}
	pb, _ := json.Marshal(ptr)
	// 2. The switch: one atomic replace.
	tc.exists = true
	if err := tc.c.rep.Replace(ctx, tc.c.pointerName(tc.id), pb); err != nil {
		return fmt.Errorf("saving the checkpoint pointer: %w", err)
	}
	old := tc.ptr
	tc.ptr, tc.lastSave = ptr, at
	tc.saves++
	// 3. The object it replaced.
	if old != nil && old.Object != ptr.Object {
		if err := tc.c.store.Delete(ctx, old.Object); err != nil {
			tc.log.Debug("could not delete the replaced checkpoint object", "error", err)
		}
	}
	tc.log.Info("checkpoint saved", "why", why, "bytes", len(data), "took", time.Since(at).Round(time.Millisecond))
	return nil
}

// saveFrom reads r, up to the size limit, and saves it.
func (tc *taskCheckpoint) saveFrom(ctx context.Context, r io.Reader, why string) error {
	if tc == nil {
		return ErrNoCheckpoints
	}
	limit := tc.c.maxBytes
	data, err := stash.ReadLimited(r, limit+1)
	if err != nil {
		return fmt.Errorf("reading the checkpoint: %w", err)
	}
	return tc.save(ctx, data, why)
}

// drop deletes the task's checkpoint, when it may have one: the task has
// ended. Failures are logged; the stash's lifecycle rule removes what is
// left.
func (tc *taskCheckpoint) drop(ctx context.Context) {
	if tc == nil {
		return
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if !tc.exists {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointSaveTimeout)
	defer cancel()
	err := tc.c.store.Delete(ctx, tc.c.pointerName(tc.id))
	if err == nil && tc.ptr != nil {
		err = tc.c.store.Delete(ctx, tc.ptr.Object)
	}
	if err != nil {
		tc.log.Warn("could not delete the ended task's checkpoint; a lifecycle rule on the stash will have to", "error", err)
		return
	}
	tc.exists, tc.ptr = false, nil
}

// account returns what an attempt stopped at end lost and what its
// checkpoints saved (see jobq.Attempt.Lost and Saved).
func (tc *taskCheckpoint) account(start, end time.Time) (lost, saved time.Duration) {
	if tc == nil {
		return max(end.Sub(start), 0), 0
	}
	tc.mu.Lock()
	last := tc.lastSave
	tc.mu.Unlock()
	if last.IsZero() || last.Before(start) {
		return max(end.Sub(start), 0), 0
	}
	return max(end.Sub(last), 0), last.Sub(start)
}

// Checkpoint returns the checkpoint that an earlier attempt at the task
// saved, for the handler to resume from; false when there is none (the
// first attempt, or checkpoints are off). For a shell task it is a tar
// archive of $JOBQ_CHECKPOINT_DIR, which the worker has already unpacked.
func (j *Job) Checkpoint() ([]byte, bool) {
	if j.ckpt == nil || j.ckpt.restored == nil {
		return nil, false
	}
	return j.ckpt.restored, true
}

// SaveCheckpoint keeps data as the task's checkpoint, replacing the
// previous one atomically: should the save be cut short, the previous
// checkpoint stays whole. The next attempt at the task, on any worker,
// gets it from Checkpoint. It may be called after ctx has ended (saving
// at a stop is what it is for: a handler whose context ends on
// preemption saves, then returns); each save is bounded by two minutes.
// It fails with ErrNoCheckpoints when the worker keeps none, and when data
// is over Options.CheckpointMaxBytes.
func (j *Job) SaveCheckpoint(ctx context.Context, data []byte) error {
	if j.ckpt == nil {
		return ErrNoCheckpoints
	}
	return j.ckpt.save(ctx, data, "handler")
}

// SaveCheckpointFrom is SaveCheckpoint with the checkpoint read from r.
func (j *Job) SaveCheckpointFrom(ctx context.Context, r io.Reader) error {
	if j.ckpt == nil {
		return ErrNoCheckpoints
	}
	return j.ckpt.saveFrom(ctx, r, "handler")
}
