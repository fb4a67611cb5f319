package redis

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) driver.Code { return classify(err) }

// classify maps go-redis and server errors onto driver codes.
func classify(err error) driver.Code {
	if c := driver.CodeOf(err); c != driver.Unknown {
		return c
	}
	var rerr goredis.Error
	switch {
	case err == nil:
		return driver.Unknown
	case errors.Is(err, goredis.ErrClosed):
		return driver.FailedPrecondition
	case errors.Is(err, goredis.Nil):
		return driver.NotFound
	case errors.Is(err, goredis.ErrPoolTimeout),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return driver.Unavailable
	case errors.As(err, &rerr):
		return serverCode(rerr.Error())
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return driver.Unavailable
	}
	return driver.Unknown
}

// serverCode classifies an error reply by its prefix.
func serverCode(msg string) driver.Code {
	prefix, _, _ := strings.Cut(msg, " ")
	switch prefix {
	case "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "MOVED", "ASK":
		return driver.Unavailable
	case "OOM", "MISCONF":
		// Out of memory, or a failed snapshot (a full disk, say) with
		// stop-writes-on-bgsave-error: writes are refused until it clears.
		return driver.ResourceExhausted
	case "NOAUTH", "WRONGPASS", "NOPERM":
		return driver.PermissionDenied
	}
	return driver.Internal
}

// fail wraps an error from Redis with the operation and the queue, keeping
// its classification. Context errors keep their codes.
func (d *Driver) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	return &driver.Error{Code: classify(err), Msg: fmt.Sprintf("redis %s on queue %s: %v", op, d.queue, err), Err: err}
}
