package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/sdkerr"
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
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "25006":
			// read_only_sql_transaction: every write fails the same way
			// until the URL names another server or the setting changes.
			return driver.Errorf(errcode.FailedPrecondition,
				"postgres %s: the server accepts no writes: it is a read-only replica (hot standby), or default_transaction_read_only is on for this role or database; point the URL at the primary (with several hosts, add target_session_attrs=read-write), or use the read commands (size, stats, peek): %w", op, err)
		case pgErr.Code == "53300":
			// too_many_connections: other connections end, so it is worth
			// another try, but the cause is a limit the user can change.
			return driver.Errorf(errcode.Unavailable,
				"postgres %s: the server refused a connection: too many connections (the role's or database's CONNECTION LIMIT, or max_connections; the call may be retried); a process holds up to pool_max_conns (10 by default) and one more for LISTEN: lower pool_max_conns in the URL, or raise the limit: %w", op, err)
		case pgErr.Code == "42703" || pgErr.Code == "42883" || pgErr.Code == "42P01":
			// undefined column, function or table: a read-only open
			// migrates nothing, so the read commands meet a schema an
			// older release made as it is (a newer one is refused at open);
			// otherwise something dropped what jobq made.
			return driver.Errorf(errcode.FailedPrecondition,
				"postgres %s: the schema lacks a table, column or function this jobq (schema step %d) uses: if an older jobq made it, run a push or worker of this jobq once to upgrade it (read commands change nothing), or read the queue with the release that made it; otherwise it was dropped: %w", op, SchemaVersion, err)
		case pgErr.Code == "57014" && ctx.Err() == nil:
			// query_canceled while the caller still waits: the server's
			// statement_timeout (or an administrator's cancel), not ours.
			// The statement was rolled back; it is worth another try.
			return driver.Errorf(errcode.Unavailable,
				"postgres %s: the server cancelled the statement (statement_timeout of this role or database, or pg_cancel_backend; the call may be retried); if it recurs, raise statement_timeout for jobq's connections, for example with options=-c%%20statement_timeout%%3D0 in the URL: %w", op, err)
		}
	}
	code := codeOf(err)
	// pgconn's connect error spans a line per address and TLS mode tried.
	detail := sdkerr.OneLine(err.Error())
	if code == errcode.Unavailable {
		return &driver.Error{Code: code, Msg: fmt.Sprintf("postgres %s: server unavailable (the call may be retried): %s", op, detail), Err: err}
	}
	return &driver.Error{Code: code, Msg: fmt.Sprintf("postgres %s: %s", op, detail), Err: err}
}
