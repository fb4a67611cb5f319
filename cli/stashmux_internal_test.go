package cli

import (
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/stash"
	"github.com/jobq/jobq/stash/azblob"
)

// TestStashMuxGivesAzblobTheConnectionString: the azblob store gets the
// command's connection string as a value, the other stores are the default
// ones, and the default opener is left unchanged.
func TestStashMuxGivesAzblobTheConnectionString(t *testing.T) {
	t.Parallel()
	const cs = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:1/devstoreaccount1;"
	m := stashMux(cs)
	if got, want := m.Schemes(), stash.DefaultURLMux().Schemes(); len(got) != len(want) {
		t.Errorf("schemes = %v, want the default mux's %v", got, want)
	}
	o, ok := m.Opener(azblob.Scheme)
	if !ok {
		t.Fatal("no azblob opener")
	}
	if ab, ok := o.(*azblob.URLOpener); !ok || ab.ConnectionString != cs {
		t.Errorf("azblob opener = %T without the connection string", o)
	}
	if azblob.DefaultOpener.ConnectionString != "" {
		t.Error("the default azblob opener was changed")
	}
	var opts jobq.Options
	if err := (&app{}).applyStash(&opts); err != nil || opts.StashMux != nil {
		t.Errorf("without a connection string: StashMux = %v, %v; want the default (nil)", opts.StashMux, err)
	}
}
