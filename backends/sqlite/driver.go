package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Driver is one open queue in one SQLite file. It implements driver.Driver;
// users reach it through *jobq.Queue.
type Driver struct {
	cfg  config
	db   *sql.DB
	log  *slog.Logger
	caps driver.Capabilities
	note *notifier
	w    *writer
	idle *idleWatch
	// autoVacuum is whether the file gives free pages back (vacuum.go).
	autoVacuum bool
	// olderLayout is set when the driver reads, read-only, a file of a
	// layout older than this release's, which it does not convert: a
	// missing table or column then means the file wants upgrading.
	olderLayout bool
	// keys is the sweep bookkeeping of the dedup keys (keys.go).
	keys keySweeps
	// rollupReady is set once the file is known to have the result
	// history's rollup table (rollup.go).
	rollupReady atomic.Bool
	// rollupFill runs the background rollup fill (rollupfill.go).
	rollupFill driver.RollupFill
	// cursor is where the last claim that scanned far past tasks of full
	// keys found work (claimcursor.go).
	cursor claimCursor

	// writeSem serialises this driver's write transactions so that they
	// queue in Go instead of spinning in SQLite's busy handler (the busy
	// timeout then only covers waits for other processes); its holder runs
	// every operation in queue as one group (group.go).
	writeSem chan struct{}
	queue    writeQueue

	closing *driver.Closing
}

var _ driver.Driver = (*Driver)(nil)

func newDriver(ctx context.Context, c config, db *sql.DB, log *slog.Logger) (*Driver, error) {
	if log == nil {
		log = slog.Default()
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	// The write connection waits for other processes' write locks in Go
	// (writer.begin), not in SQLite's busy handler.
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
		_ = conn.Close()
		return nil, err
	}
	idleConn, err := db.Conn(ctx)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	d := &Driver{
		cfg:      c,
		db:       db,
		w:        &writer{conn: conn, stmts: map[string]*sql.Stmt{}, busyTimeout: c.busyTimeout},
		idle:     &idleWatch{conn: idleConn},
		log:      log,
		caps:     capabilities(c.maxMessageBytes),
		note:     acquireNotifier(c.path, c.queue),
		writeSem: make(chan struct{}, 1),
		closing:  driver.NewClosing("sqlite queue " + c.queue),
	}
	if d.autoVacuum, err = d.incrementalVacuum(ctx); err != nil {
		_ = conn.Close()
		_ = idleConn.Close()
		return nil, err
	}
	return d, nil
}

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

// As implements driver.Driver. It supports **sql.DB: the connection pool on
// the queue's file.
func (d *Driver) As(target any) bool {
	switch t := target.(type) {
	case **sql.DB:
		*t = d.db
		return true
	}
	return false
}

// Close implements driver.Driver: it wakes waiting receivers and closes the
// connection pool.
func (d *Driver) Close() error {
	if !d.closing.Close() {
		return nil
	}
	releaseNotifier(d.note)
	// Wait for a write transaction in progress, then release the write
	// connection before the pool.
	d.writeSem <- struct{}{}
	return errors.Join(d.w.close(), d.idle.conn.Close(), d.db.Close())
}

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) errcode.Code { return codeOf(err) }

// wrap turns an engine error into a *driver.Error naming the operation.
func (d *Driver) wrap(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	select {
	case <-d.closing.Done():
		if errors.Is(err, sql.ErrConnDone) || isClosedDB(err) {
			return d.closing.Err()
		}
	default:
	}
	if d.olderLayout && ctx.Err() == nil && missingSchema(err) {
		return driver.Errorf(errcode.FailedPrecondition,
			"sqlite %s: the file lacks what this jobq (schema %d) reads: an older jobq made it and no push or worker of this one has upgraded it yet (read commands change nothing); run a push or worker of this jobq once, or read the file with the release that made it: %w", op, schemaVersion, err)
	}
	return wrapErr(ctx, op, err)
}

func wrapErr(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var de *driver.Error
	if errors.As(err, &de) {
		return err
	}
	if ctx.Err() != nil {
		return ctxErr(ctx.Err())
	}
	return driver.Errorf(codeOf(err), "sqlite %s: %w", op, err)
}

// missingSchema reports whether err is SQLite's "no such column" or "no
// such table".
func missingSchema(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_ERROR {
		return false
	}
	msg := se.Error()
	return strings.Contains(msg, "no such column: ") || strings.Contains(msg, "no such table: ")
}

func ctxErr(err error) error {
	return driver.Errorf(errcode.Of(err), "sqlite: %w", err)
}

func isClosedDB(err error) bool {
	return err != nil && err.Error() == "sql: database is closed"
}

// isBusy reports whether err is SQLite's "database is locked" (BUSY).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// codeOf classifies an error, mapping SQLite's result codes.
func codeOf(err error) errcode.Code {
	if c := errcode.Of(err); c != errcode.Unknown {
		return c
	}
	if isClosedDB(err) || errors.Is(err, sql.ErrConnDone) {
		return errcode.FailedPrecondition
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return errcode.Unknown
	}
	switch se.Code() & 0xff { // the primary result code
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_PROTOCOL:
		return errcode.Unavailable
	case sqlite3.SQLITE_INTERRUPT:
		return errcode.Canceled
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_NOMEM:
		return errcode.ResourceExhausted
	case sqlite3.SQLITE_TOOBIG:
		return errcode.TooLarge
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM, sqlite3.SQLITE_AUTH:
		return errcode.PermissionDenied
	case sqlite3.SQLITE_CANTOPEN:
		return errcode.Unavailable
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_INTERNAL:
		return errcode.Internal
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_RANGE:
		return errcode.InvalidArgument
	}
	return errcode.Unknown
}

// Times are stored as Unix microseconds.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us) }

// addMicros returns now+d in microseconds, saturating instead of overflowing
// for absurdly long durations.
func addMicros(now int64, d time.Duration) int64 {
	us := d.Microseconds()
	if us > (1<<63-1)-now {
		return 1<<63 - 1
	}
	return now + us
}
