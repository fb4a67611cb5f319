//go:build unix

package worker

import "syscall"

// shellUnsupported is why the shell handler cannot run here: nil where
// tasks can run in process groups of their own.
var shellUnsupported error

// groupAttr starts a command in a process group of its own, which a stop
// signals whole: the command and whatever it started.
func groupAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// signalPID is kill(2): sig to the process pid, or to the process group -pid.
func signalPID(pid int, sig syscall.Signal) error { return syscall.Kill(pid, sig) }
