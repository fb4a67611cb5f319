package worker

import "syscall"

// dieWithWorker asks the kernel to SIGKILL the task's main process when the
// worker dies (killed, out of memory, the machine's agent): its task will
// run again elsewhere once the lease expires, and an orphan still running
// would be a second copy writing the same outputs. The signal follows the
// thread that started the child, so the caller keeps that thread until the
// child has been waited for (see startAndWait).
func dieWithWorker(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
