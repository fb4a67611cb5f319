package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// codeOf classifies an error from pgx or the server.
func codeOf(err error) errcode.Code {
	if c := errcode.Of(err); c != errcode.Unknown {
		return c
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return sqlStateCode(pgErr.Code)
	}
	if strings.Contains(err.Error(), "closed pool") {
		return errcode.FailedPrecondition // a call racing with Close
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case pgconn.Timeout(err):
		return errcode.DeadlineExceeded
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		pgconn.SafeToRetry(err), strings.Contains(err.Error(), "conn closed"):
		return errcode.Unavailable
	}
	return errcode.Unknown
}

// sqlStateCode maps a Postgres SQLSTATE onto a driver code.
func sqlStateCode(state string) errcode.Code {
	switch {
	case state == "23514", state == "22P02", state == "22023", state == "22001":
		// check violation, bad text representation, invalid parameter, too long
		return errcode.InvalidArgument
	case state == "42501", strings.HasPrefix(state, "28"):
		return errcode.PermissionDenied
	case state == "3D000", state == "42P01", state == "3F000":
		// no such database, table or schema
		return errcode.NotFound
	case state == "57014":
		return errcode.Canceled
	case strings.HasPrefix(state, "08"), strings.HasPrefix(state, "57P"),
		state == "40001", state == "40P01", state == "55P03":
		// connection failures, server shutdown, serialization failure,
		// deadlock, lock not available: all worth retrying.
		return errcode.Unavailable
	case strings.HasPrefix(state, "53"):
		return errcode.ResourceExhausted
	case strings.HasPrefix(state, "XX"):
		return errcode.Internal
	}
	return errcode.Unknown
}

// wrap returns err as a *driver.Error with its code and a message that says
// which operation failed. Context errors keep their code.
func wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = errors.Join(ctxErr, err)
	}
	var de *driver.Error
	if errors.As(err, &de) {
		return err
	}
	code := codeOf(err)
	if code == errcode.Unavailable {
		return driver.Errorf(code, "postgres %s: server unavailable (the call may be retried): %w", op, err)
	}
	return driver.Errorf(code, "postgres %s: %w", op, err)
}
