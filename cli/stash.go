package cli

import (
	"os"

	"github.com/jobq/jobq"
)

// applyStash passes --stash or $JOBQ_STASH to the queue; either overrides a
// stash= parameter in the queue URL.
func (a *app) applyStash(opts *jobq.OpenOptions) error {
	s := a.stash
	if s == "" {
		s = os.Getenv("JOBQ_STASH")
	}
	opts.StashURL = s
	return nil
}
