//go:build !linux

package worker

import "syscall"

// dieWithWorker does nothing where the kernel cannot signal a child when
// its parent dies: a killed worker's task runs on to its end.
func dieWithWorker(*syscall.SysProcAttr) {}
