//go:build unix

package cli

import (
	"os"
	"syscall"
)

// workerSignals are the signals a worker answers; drainSignal among them
// makes it take no new tasks.
var (
	workerSignals           = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1}
	drainSignal   os.Signal = syscall.SIGUSR1
)
