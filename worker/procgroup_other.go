//go:build !unix

package worker

import (
	"errors"
	"syscall"
)

// shellUnsupported is why the shell handler cannot run here: it stops a
// task by signalling its process group, which this system does not have.
var shellUnsupported = errors.New("shell tasks need Linux or macOS, where a task runs in a process group of its own that a stop can reach whole; run this worker under WSL, or run Go handlers")

// groupAttr: no process groups here (the shell handler refuses to run).
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }

// signalPID: no signals here (the shell handler refuses to run).
func signalPID(int, syscall.Signal) error { return shellUnsupported }
