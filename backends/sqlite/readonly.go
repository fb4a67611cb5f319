package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// openReadOnly opens the queue c names for reading only (Options.ReadOnly):
// no file is created, no table made, nothing written.
//
// It reads through SQLite's read-only mode, which in WAL mode still needs
// the -shm index beside the file: a process that has the file open keeps
// one, else the reader creates it. Where that cannot be done (a read-only
// directory or filesystem; a full disk, where the index cannot grow) it
// reads the file as immutable instead, without locks or the -wal file.
// That is exact when no -wal file holds changes: the last process to
// close the file copies the WAL into it and removes it. When one does, it
// warns that the counts may miss those changes.
func openReadOnly(ctx context.Context, c config, log *slog.Logger) (*Driver, error) {
	if log == nil {
		log = slog.Default()
	}
	if _, err := os.Stat(c.path); errors.Is(err, fs.ErrNotExist) {
		return nil, driver.Errorf(errcode.NotFound,
			"sqlite: %s does not exist, so it holds no queue to read (a push or a worker creates it)", c.path)
	}
	db, err := openRO(ctx, c, false)
	if err != nil {
		var ierr error
		if db, ierr = openRO(ctx, c, true); ierr != nil {
			return nil, wrapErr(ctx, "open "+c.path+" read-only", err)
		}
		if fi, serr := os.Stat(c.path + "-wal"); serr == nil && fi.Size() > 0 {
			log.Warn("sqlite: reading the file without its write-ahead log, which could not be opened: the latest changes may be missing from what is read",
				"file", c.path, "wal_bytes", fi.Size(), "error", err)
		}
	}
	var tables, layout int
	if err := db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'jobq_messages'), user_version FROM pragma_user_version`).Scan(&tables, &layout); err != nil {
		_ = db.Close()
		return nil, wrapErr(ctx, "open "+c.path+" read-only", err)
	}
	if tables == 0 {
		_ = db.Close()
		return nil, driver.Errorf(errcode.NotFound,
			"sqlite: %s holds no jobq queue (it has no jobq tables), so there is nothing to read", c.path)
	}
	if err := checkNotNewer(layout); err != nil {
		_ = db.Close()
		return nil, err
	}
	d, err := newDriver(ctx, c, db, log)
	if err != nil {
		_ = db.Close()
		return nil, wrapErr(ctx, "open "+c.path+" read-only", err)
	}
	// A read-only open converts nothing, so the read commands meet a file
	// an older release made as it is (a newer one is refused above).
	d.olderLayout = layout < schemaVersion
	return d, nil
}

// openRO opens c's file in SQLite's read-only mode, or as immutable, and
// checks that it can be read (sql.Open itself connects lazily).
func openRO(ctx context.Context, c config, immutable bool) (*sql.DB, error) {
	db, err := sql.Open("sqlite", c.readOnlyDSN(immutable))
	if err != nil {
		return nil, err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

// readOnlyDSN is the data source name of a read-only connection: no
// pragma that could write (journal mode, auto-vacuum), and
// immutable=1 when asked.
func (c config) readOnlyDSN(immutable bool) string {
	q := url.Values{}
	q.Set("mode", "ro")
	if immutable {
		q.Set("immutable", "1")
	}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", c.busyTimeout.Milliseconds()))
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Add("_pragma", fmt.Sprintf("cache_size(%d)", c.cacheSize))
	if c.mmapSize != 0 {
		q.Add("_pragma", fmt.Sprintf("mmap_size(%d)", c.mmapSize))
	}
	return fileURI(c.path) + "?" + q.Encode()
}
