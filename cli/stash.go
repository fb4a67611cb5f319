package cli

import (
	"os"

	"github.com/jobq/jobq"
)

// applyStash passes --stash or $JOBQ_STASH to the queue.
func (a *app) applyStash(_ *jobq.OpenOptions) error {
	s := a.stash
	if s == "" {
		s = os.Getenv("JOBQ_STASH")
	}
	if s == "" {
		return nil
	}
	return usageError("--stash / $JOBQ_STASH (%s): large-payload stashes are not available in this build of jobq; unset it", jobq.RedactURL(s))
}
