//go:build !unix

package cli

import (
	"os"
	"syscall"
)

// workerSignals are the signals a worker answers; there is no signal to
// drain it here.
var (
	workerSignals           = []os.Signal{syscall.SIGTERM, os.Interrupt}
	drainSignal   os.Signal = nil
)
