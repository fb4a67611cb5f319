package cli

import (
	"os"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/stash/all" // every stash store: file, gs, azblob
)

// applyStash passes --stash or $JOBQ_STASH to the queue: where tasks too
// large for the backend's messages are kept.
func (a *app) applyStash(o *jobq.Options) error {
	s := a.stash
	if s == "" {
		s = os.Getenv("JOBQ_STASH")
	}
	o.StashURL = s
	return nil
}
