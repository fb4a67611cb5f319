//go:build !linux

package worker

import (
	"errors"
	"os"
)

// lockFile creates the file at name; without flock it is not locked.
func lockFile(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
}

// tryLockFile always fails: without flock, which directories a live
// worker uses cannot be told, so none is swept.
func tryLockFile(string) (*os.File, error) {
	return nil, errors.New("not supported")
}
