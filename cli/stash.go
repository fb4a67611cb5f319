package cli

import (
	"os"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/stash"
	_ "github.com/jobq/jobq/stash/all" // every stash store: file, gs, azblob
	"github.com/jobq/jobq/stash/azblob"
)

// applyStash passes --stash or $JOBQ_STASH to the queue: where tasks too
// large for the backend's messages are kept. With a connection string
// (--conn-str, $JOBQ_CONNECTION_STRING) the stores open through a mux of
// this command's own whose azblob opener holds it, so the string reaches
// the store as a value.
func (a *app) applyStash(o *jobq.Options) error {
	s := a.stash
	if s == "" {
		s = os.Getenv("JOBQ_STASH")
	}
	o.StashURL = s
	if o.ConnectionString != "" {
		o.StashMux = stashMux(o.ConnectionString)
	}
	return nil
}

// stashMux returns a mux with the default mux's openers, but for azblob
// one that holds connStr.
func stashMux(connStr string) *stash.URLMux {
	def := stash.DefaultURLMux()
	m := new(stash.URLMux)
	for _, scheme := range def.Schemes() {
		o, _ := def.Opener(scheme)
		if scheme == azblob.Scheme {
			given := *azblob.DefaultOpener
			given.ConnectionString = connStr
			o = &given
		}
		m.Register(scheme, o)
	}
	return m
}
