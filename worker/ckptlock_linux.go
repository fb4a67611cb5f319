//go:build linux

package worker

import (
	"os"
	"syscall"
)

// lockFile creates the file at name and locks it (flock) for as long as
// the process keeps it open: the kernel lets go when the process dies.
func lockFile(name string) (*os.File, error) { return openLocked(name, os.O_CREATE|os.O_RDWR) }

// tryLockFile locks the existing file at name, failing when a live process
// holds it.
func tryLockFile(name string) (*os.File, error) { return openLocked(name, os.O_RDWR) }

// openLocked opens name with flag and takes its lock without waiting.
func openLocked(name string, flag int) (*os.File, error) {
	f, err := os.OpenFile(name, flag, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
