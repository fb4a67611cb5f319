package stash

import (
	"context"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Replacer is implemented by stores that can also keep a small object
// under a name of the caller's choosing and replace it atomically: a
// reader sees the old bytes or the new ones, never a mix or nothing.
// Checkpoints use it for the pointer that names a task's current
// checkpoint object (docs/checkpoints.md): the checkpoint is written first
// as an ordinary content-addressed object (Put), and the pointer switched
// to it after, so a save cut short leaves the previous checkpoint whole.
// The stores of this module (file, gs, azblob) implement it.
type Replacer interface {
	// Replace writes data as the object name (a SHA-256 hex digest, see
	// CheckName), replacing any object of that name in one step. Get and
	// Delete reach it as any other object.
	Replace(ctx context.Context, name string, data []byte) error
}

// ReplacerOf returns s as a Replacer, or a FailedPrecondition error naming
// the store when it cannot replace objects.
func ReplacerOf(s Store) (Replacer, error) {
	if r, ok := s.(Replacer); ok {
		return r, nil
	}
	return nil, driver.Errorf(errcode.FailedPrecondition, "stash %s cannot replace objects in place, which checkpoints need; use a file://, gs:// or azblob:// stash", s.Location())
}
