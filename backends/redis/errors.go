package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) errcode.Code { return classify(err) }

// classify maps go-redis and server errors onto driver codes.
func classify(err error) errcode.Code {
	if c := errcode.Of(err); c != errcode.Unknown {
		return c
	}
	var rerr goredis.Error
	switch {
	case err == nil:
		return errcode.Unknown
	case errors.Is(err, goredis.ErrClosed):
		return errcode.FailedPrecondition
	case errors.Is(err, goredis.Nil):
		return errcode.NotFound
	case errors.Is(err, goredis.ErrPoolTimeout),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE):
		return errcode.Unavailable
	case errors.As(err, &rerr):
		return serverCode(rerr.Error())
	}
	var nerr net.Error
	if errors.As(err, &nerr) {
		return errcode.Unavailable
	}
	return errcode.Unknown
}

// serverCode classifies an error reply by its prefix.
func serverCode(msg string) errcode.Code {
	prefix, _, _ := strings.Cut(msg, " ")
	switch prefix {
	case "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "MOVED", "ASK":
		return errcode.Unavailable
	case "OOM", "MISCONF":
		// Out of memory, or a failed snapshot (a full disk, say) with
		// stop-writes-on-bgsave-error: writes are refused until it clears.
		return errcode.ResourceExhausted
	case "NOAUTH", "WRONGPASS", "NOPERM":
		return errcode.PermissionDenied
	}
	if aclInScript(msg) {
		return errcode.PermissionDenied
	}
	if clusterInScript(msg) {
		return errcode.Unavailable
	}
	return errcode.Internal
}

// reloadSlots makes a cluster client read the slot map again after a call
// failed as Unavailable: when a replica has taken over a dead master, the
// nodes answer the new master's address, whereas go-redis would go on
// dialing the dead one until its next reload (every minute: no MOVED reply
// comes from a node that is down). One reload runs at a time; a call that
// fails during it skips its own.
func (d *Driver) reloadSlots(cc *goredis.ClusterClient) {
	if !d.reloading.CompareAndSwap(false, true) {
		return
	}
	defer d.reloading.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), slotReloadTimeout)
	defer cancel()
	cc.ReloadState(ctx)
}

// slotReloadTimeout bounds reloadSlots, which asks the known nodes in turn.
const slotReloadTimeout = 2 * time.Second

// redirected tells whether msg is a cluster node's MOVED or ASK reply.
func redirected(msg string) bool {
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// clusterInScript tells whether msg is the error a script gets on Redis
// Cluster from a key that is not on its node (the queue's slot is being
// migrated to another node) or while the cluster is down; Redis reports
// it as ERR, not ASK, TRYAGAIN or CLUSTERDOWN.
func clusterInScript(msg string) bool {
	return strings.Contains(msg, "attempted to access a non local key") || strings.Contains(msg, "while the cluster is down")
}

// aclInScript tells whether msg is the error a script gets from a command
// its user's ACL does not allow it (a command, a key or a channel); Redis
// reports it as ERR, not NOPERM.
func aclInScript(msg string) bool {
	return strings.HasPrefix(msg, "ERR The user executing the script can't")
}

// fail wraps an error from Redis with the operation and the queue, keeping
// its classification. Context errors keep their codes, and so does a
// network timeout once ctx has ended: go-redis makes ctx's deadline the
// socket's (ContextTimeoutEnabled), so a call cut short by it reports an
// "i/o timeout", which is the caller's deadline, not Redis unavailable.
func (d *Driver) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errcode.Of(err) == errcode.Unknown && timedOut(err) {
		if cerr := ctxEnded(ctx); cerr != nil {
			err = fmt.Errorf("%w (%w)", cerr, err)
		}
	}
	e := &driver.Error{Code: classify(err), Msg: fmt.Sprintf("redis %s on queue %s: %v", op, d.queue, err), Err: err}
	cc, cluster := d.client.(*goredis.ClusterClient)
	if cluster && e.Code == errcode.Unavailable {
		d.reloadSlots(cc)
	}
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return e
	}
	msg := rerr.Error()
	if !cluster && redirected(msg) {
		// A plain client never follows the redirection: retrying is vain.
		e.Code = errcode.InvalidArgument
		e.Msg = fmt.Sprintf("redis %s on queue %s: the server is a Redis Cluster node, and the queue's keys are on another node (%v); open the queue as a cluster: cluster=true in the URL (addr= for more seeds), or a goredis.ClusterClient", op, d.queue, rerr)
		return e
	}
	if aclInScript(msg) {
		// The script stops at the refused command, keeping what it wrote
		// before it (a push's task, say, before the PUBLISH that wakes a
		// worker), so the call may have taken effect.
		e.Applied = driver.MaybeApplied
		e.Msg += fmt.Sprintf(" (the Redis user's ACL refused a command, key or channel the script uses: it needs EVAL, EVALSHA, SCRIPT, PUBLISH and SUBSCRIBE, the keys ~%s* and the channels &%s*)", d.prefix, d.prefix)
	}
	if clusterInScript(msg) {
		e.Msg += " (the queue's hash slot is being moved to another cluster node, or the cluster is down: try again when it is done; workers and pushes retry by themselves)"
	}
	return e
}

// ctxEnded is ctx's error, or context.DeadlineExceeded once its deadline
// has passed though its timer has not fired yet: go-redis gives the socket
// the context's deadline, and the socket's timeout may be seen first.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// timedOut tells whether err is a network timeout.
func timedOut(err error) bool {
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}
