package worker

import (
	"context"
	"fmt"
	"os"

	"github.com/jobq/jobq/internal/dirsync"
)

// runWithDirSync runs a task that has bg_dirsync_to (ai4s-jobq's
// push --bg-dirsync-to): the command gets a fresh directory in
// $AMLT_DIRSYNC_DIR, copied to the destination in the background (every
// $AMLT_DIRSYNC_FREQ seconds, default 30, and when the command creates
// .amlt_flush_upload there) and once more when the command ends. The task
// fails if that last copy fails, since its output did not arrive.
func (s *Shell) runWithDirSync(ctx context.Context, job *Job) error {
	dst := job.Task.DirSyncTo
	if err := dirsync.CheckDestination(dst); err != nil {
		return &TaskError{Err: err}
	}
	opts, err := dirsync.OptionsFromEnv(s.environ(job))
	if err != nil {
		return &TaskError{Err: fmt.Errorf("bg_dirsync_to: %w", err)}
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return &TaskError{Err: fmt.Errorf("bg_dirsync_to: creating the destination: %w", err)}
	}
	dir, err := os.MkdirTemp("", "jobq-dirsync-*")
	if err != nil {
		return fmt.Errorf("bg_dirsync_to: creating the task's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	sync := dirsync.Start(dir, dst, opts, job.Log)
	runErr := s.run(ctx, job, []string{"AMLT_DIRSYNC_DIR=" + dir})
	if err := sync.Stop(context.WithoutCancel(ctx)); err != nil {
		job.Log.Error("bg_dirsync_to: the last copy of the task's directory failed", "to", dst, "error", err)
		if runErr == nil {
			return &TaskError{Err: fmt.Errorf("the command succeeded, but copying $AMLT_DIRSYNC_DIR to %s failed: %w", dst, err)}
		}
	}
	return runErr
}
