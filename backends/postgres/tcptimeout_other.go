//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// userTimeout is a no-op where TCP_USER_TIMEOUT is not available: there
// the system's retransmission limit applies (tcp_user_timeout= is read but
// has no effect).
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
