// Package all registers every jobq stash store. Import it for its side
// effect:
//
//	import _ "github.com/jobq/jobq/stash/all"
//
// after which stash.Open (and so a queue's stash) understands every scheme:
// file (always there), gs and azblob. Programs that need one store import
// that store's package instead, to keep the other cloud SDKs out of the
// binary. The jobq CLI imports this package.
package all

import (
	_ "github.com/jobq/jobq/stash/azblob" // azblob://
	_ "github.com/jobq/jobq/stash/gcs"    // gs://
)
