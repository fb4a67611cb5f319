package all_test

import (
	"slices"
	"testing"

	"github.com/jobq/jobq/stash"
	_ "github.com/jobq/jobq/stash/all"
)

func TestSchemes(t *testing.T) {
	t.Parallel()
	if got, want := stash.DefaultURLMux().Schemes(), []string{"azblob", "file", "gs"}; !slices.Equal(got, want) {
		t.Errorf("registered schemes %v, want %v", got, want)
	}
}
