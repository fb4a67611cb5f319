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
	"path/filepath"
	"strings"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"

	// The pure-Go SQLite engine, registered with database/sql as "sqlite".
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Scheme is the URL scheme this package registers.
const Scheme = "sqlite"

// Defaults for the URL parameters.
const (
	// DefaultQueue is the queue name used when the URL has no queue parameter.
	DefaultQueue = "default"
	// DefaultMaxMessageBytes is the declared message size limit. SQLite
	// itself stores up to about 1 GB per value, but a body is written whole
	// inside the write transaction that pushes it, and again by each claim
	// (the lease change resizes the row, so SQLite rewrites all its
	// overflow pages), with every other writer of the file waiting: at
	// 16 MiB that was 8,000 WAL frames per push or claim, twice an
	// automatic checkpoint's worth, and on a loaded machine the lock was
	// held past the 5 s busy timeout. 2 MiB keeps one such write within a
	// few hundred milliseconds under load, and well above any shell
	// command (the kernel caps one argument at 128 KiB); larger tasks go
	// to a stash.
	DefaultMaxMessageBytes = 2 << 20
	// DefaultBusyTimeout is how long a write waits for another process's
	// write transaction.
	DefaultBusyTimeout = 5 * time.Second
	// DefaultPoll is the idle polling interval of a waiting Receive. While
	// the file is unchanged an idle check is one PRAGMA data_version (cheap,
	// no lock), so a short interval costs almost no CPU and
	// keeps cross-process pickup latency low.
	DefaultPoll = 20 * time.Millisecond
	// DefaultCacheSize is the cache_size pragma of each connection:
	// -2000 (2 MiB, KiB when negative), SQLite's own default. A larger
	// cache made a deep queue slower, not faster: when a B-tree page
	// splits and the new pages come from the free list out of order,
	// SQLite swaps them through a spare page number (the lock page's,
	// 1 GiB / page size + 1); at the commit, finding a cached page past the
	// file's end, it walks the whole cache to drop it (pcache1Truncate),
	// which with a large cache dominates draining a deep backlog
	// (docs/performance.md). Pages the cache misses are read from the
	// operating system's file cache.
	DefaultCacheSize = -2000

	// maxMessageBytesCeiling bounds max_message_bytes well below SQLite's
	// 1 GB value limit.
	maxMessageBytesCeiling = 512 << 20
)

func init() {
	if err := jobq.Register(Scheme, URLOpener{}); err != nil {
		panic(err)
	}
}

// URLOpener opens sqlite:// URLs. The zero value is ready to use.
type URLOpener struct{}

// config is what a URL asks for.
type config struct {
	path            string
	queue           string
	maxMessageBytes int
	busyTimeout     time.Duration
	poll            time.Duration
	synchronous     string
	cacheSize       int
	mmapSize        int // 0: no memory mapping (SQLite's default)
	// empty is set when the file has no page yet (just created, not laid
	// out): only then do the connections set auto_vacuum (see dsn).
	empty bool
}

// Bounds of the tunable pragmas. cache_size counts pages when positive and
// KiB when negative; both ends are about 64 GiB at the default page size.
// mmap_size is bytes, capped at SQLite's compiled-in maximum.
const (
	minCacheSize = -(64 << 20)
	maxCacheSize = 16 << 20
	maxMmapSize  = 0x7fff0000
)

// newPageSize is the page size of a file jobq creates (an existing file
// keeps its own). Task IDs are random, so every push changes one page of
// the task-ID index at a random place; once the queue is deeper than a
// transaction's worth of tasks, each such page is written whole to the
// WAL and again to the file at the checkpoint. Half of SQLite's 4096 cuts
// those bytes by a quarter to a third for little more space per task; 1024 writes
// less again but costs noticeably more space.
const newPageSize = 2048

// walCheckpointPages is the wal_autocheckpoint pragma: the WAL pages after
// which a commit copies the WAL into the file (SQLite's default is 1000).
// A push of 1,000 tasks into a deep queue changes about 1,000 random pages
// of the task-ID index, so at 1000 every batch paid a checkpoint and its
// two fsyncs; at 4000 (8 MiB of WAL at newPageSize) a long push into a
// deep queue is faster, and draining is not slower.
const walCheckpointPages = 4000

// walSizeLimit is the journal_size_limit pragma (bytes): the WAL file is
// cut back to this once checkpointed. Under load it grows to about one
// automatic checkpoint's worth (walCheckpointPages) between checkpoints.
const walSizeLimit = 4 << 20

// parseURL reads u into a config, rejecting unknown parameters.
func parseURL(u *url.URL) (config, error) {
	path := u.Opaque // sqlite:work.db
	if path == "" {
		path = u.Host + u.Path
	}
	if path == "" {
		return config{}, driver.Errorf(errcode.InvalidArgument,
			"sqlite URL names no file: write sqlite://./work.db (relative) or sqlite:///abs/path.db")
	}
	p := driver.NewParams(u)
	c := config{
		path:            path,
		queue:           p.Queue(DefaultQueue),
		maxMessageBytes: p.Int("max_message_bytes", DefaultMaxMessageBytes),
		busyTimeout:     p.Duration("busy_timeout", DefaultBusyTimeout),
		poll:            p.Duration("poll", DefaultPoll),
		synchronous:     strings.ToLower(p.String("synchronous", "normal")),
		cacheSize:       p.IntIn("cache_size", DefaultCacheSize, minCacheSize, maxCacheSize),
		mmapSize:        p.IntIn("mmap_size", 0, 0, maxMmapSize),
	}
	if c.maxMessageBytes < 1 || c.maxMessageBytes > maxMessageBytesCeiling {
		p.Fail("query parameter max_message_bytes=%d is out of range: use 1..%d", c.maxMessageBytes, maxMessageBytesCeiling)
	}
	if c.poll <= 0 {
		p.Fail("query parameter poll must be positive, for example poll=50ms")
	}
	if c.synchronous != "normal" && c.synchronous != "full" {
		p.Fail("query parameter synchronous=%q is not normal or full", c.synchronous)
	}
	if err := p.Done(); err != nil {
		return config{}, err
	}
	return c, nil
}

// dsn is the modernc.org/sqlite data source name for c: WAL so that readers
// never block the writer, a busy timeout so that processes wait for each
// other's write transactions, and immediate transactions so that every write
// transaction takes the write lock before it reads (no stale-snapshot
// upgrades, no double claims).
func (c config) dsn() string {
	q := url.Values{}
	// Only takes effect in a file that has no tables yet (a new one), and
	// must come before journal_mode writes the first page; see vacuum.go.
	// Only for such a file: in any other, the pragma takes the write lock
	// (it rewrites a header field), so every new connection, readers too,
	// would queue for it behind other processes' transactions, and fail
	// "database is locked" when that took longer than the busy timeout.
	if c.empty {
		q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", c.busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", walCheckpointPages))
	// The WAL file keeps its largest size unless capped: a push burst or a
	// drain would leave tens of MiB of it on disk. Each time a checkpoint
	// has copied it all back, SQLite truncates it to this size.
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", walSizeLimit))
	q.Add("_pragma", "synchronous("+strings.ToUpper(c.synchronous)+")")
	// Savepoint and statement journals (group commit, multi-row claims)
	// are temporary files by default: a pwrite per page changed.
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Add("_pragma", fmt.Sprintf("cache_size(%d)", c.cacheSize))
	if c.mmapSize != 0 {
		q.Add("_pragma", fmt.Sprintf("mmap_size(%d)", c.mmapSize))
	}
	q.Set("_txlock", "immediate")
	return fileURI(c.path) + "?" + q.Encode()
}

// fileURI is path as an SQLite URI filename. The driver cuts a plain DSN at
// its first '?', so a file name holding one ("a%3Fb.db" in the queue URL)
// would lose its tail and the pragmas with it; in a file: URI '?', '#' and
// '%' are escaped and SQLite decodes them.
func fileURI(path string) string {
	if strings.HasPrefix(path, "//") {
		path = "/" + strings.TrimLeft(path, "/") // "file://" would start an authority
	}
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
}

// Capabilities implements driver.Opener: what a queue opened with the default
// parameters declares.
func (URLOpener) Capabilities() driver.Capabilities {
	return capabilities(DefaultMaxMessageBytes)
}

// Open implements driver.Opener: it reads the URL into Options and calls
// New.
func (URLOpener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	return New(ctx, c.path, Options{Queue: c.queue, MaxMessageBytes: c.maxMessageBytes, BusyTimeout: c.busyTimeout,
		Poll: c.poll, Synchronous: c.synchronous, CacheSize: c.cacheSize, MmapSize: c.mmapSize, Logger: opts.Logger,
		ReadOnly: opts.ReadOnly})
}

// Options configure a queue built by New. The zero value is the queue
// "default" with every default below.
type Options struct {
	// Queue is the queue's name; several queues share one file. Defaults
	// to "default".
	Queue string
	// MaxMessageBytes is the largest message body, at most 512 MiB; larger
	// tasks go to the stash. Defaults to 2 MiB (DefaultMaxMessageBytes).
	MaxMessageBytes int
	// BusyTimeout is how long a write waits for another process's write
	// transaction before failing with code Unavailable. Defaults to 5s.
	BusyTimeout time.Duration
	// Poll is how often an idle receiver checks the file for messages
	// pushed by other processes or made visible by time; pushes through the
	// same process wake receivers at once. Defaults to 20ms.
	Poll time.Duration
	// Synchronous is SQLite's synchronous pragma, "normal" or "full". With
	// normal a commit survives a crash of the process, but the last commits
	// may be lost on power failure; full syncs every commit. Defaults to
	// "normal".
	Synchronous string
	// CacheSize is SQLite's cache_size pragma for every connection the
	// driver opens: pages when positive, KiB when negative (-65536 is
	// 64 MiB per connection). 0 means DefaultCacheSize (2 MiB, SQLite's
	// own default), with which a deep queue drained fastest.
	// Range -67108864..16777216.
	CacheSize int
	// MmapSize is SQLite's mmap_size pragma for every connection, in
	// bytes: reads through a memory map of the file up to that size.
	// 0 (the default) reads without one. Range 0..2147418112.
	MmapSize int
	// Logger receives the driver's warnings. Defaults to slog.Default().
	Logger *slog.Logger
	// ReadOnly opens the file for reading only (driver.OpenOptions.ReadOnly):
	// nothing is created or written, so reads work on a read-only file,
	// directory or filesystem and on a full disk (see openReadOnly). A
	// missing file, or one without jobq's tables, is a NotFound error.
	ReadOnly bool
}

// New opens the queue opts names in the SQLite file at path (a plain file
// path, not a URL), creating the file (mode 0600) and its tables when
// missing. Its directory must exist. The driver owns its connections to the
// file and closes them on Close.
func New(ctx context.Context, path string, opts Options) (*Driver, error) {
	c := newConfig(path, opts)
	if bad := c.problems(opts.Synchronous); len(bad) > 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "sqlite.New: %s", strings.Join(bad, "; "))
	}
	if dir := filepath.Dir(c.path); !dirExists(dir) {
		return nil, driver.Errorf(errcode.NotFound,
			"sqlite: directory %q of %s does not exist: create it first", dir, c.path)
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, c, opts.Logger)
	}
	return openWritable(ctx, c, opts.Logger)
}

// newConfig is the configuration opts give the file at path, with the
// defaults for what opts leave zero.
func newConfig(path string, opts Options) config {
	c := config{path: path, queue: opts.Queue, maxMessageBytes: opts.MaxMessageBytes,
		busyTimeout: opts.BusyTimeout, poll: opts.Poll, synchronous: strings.ToLower(opts.Synchronous),
		cacheSize: opts.CacheSize, mmapSize: opts.MmapSize}
	if c.queue == "" {
		c.queue = DefaultQueue
	}
	if c.maxMessageBytes == 0 {
		c.maxMessageBytes = DefaultMaxMessageBytes
	}
	if c.busyTimeout == 0 {
		c.busyTimeout = DefaultBusyTimeout
	}
	if c.poll == 0 {
		c.poll = DefaultPoll
	}
	if c.cacheSize == 0 {
		c.cacheSize = DefaultCacheSize
	}
	if c.synchronous == "" {
		c.synchronous = "normal"
	}
	return c
}

// problems lists what is wrong with c, each with its fix; synchronous is
// the Synchronous option as the caller spelled it.
func (c config) problems(synchronous string) []string {
	var bad []string
	if err := driver.CheckQueueName("Queue", c.queue); err != nil {
		bad = append(bad, err.Error())
	}
	if c.path == "" {
		bad = append(bad, "the path is empty: name the database file, for example ./work.db")
	}
	if c.maxMessageBytes < 1 || c.maxMessageBytes > maxMessageBytesCeiling {
		bad = append(bad, fmt.Sprintf("MaxMessageBytes %d is out of range: use 1..%d", c.maxMessageBytes, maxMessageBytesCeiling))
	}
	if c.busyTimeout < 0 || c.poll < 0 {
		bad = append(bad, "BusyTimeout and Poll must be positive")
	}
	if c.synchronous != "normal" && c.synchronous != "full" {
		bad = append(bad, fmt.Sprintf("Synchronous %q is not normal or full", synchronous))
	}
	if c.cacheSize < minCacheSize || c.cacheSize > maxCacheSize {
		bad = append(bad, fmt.Sprintf("CacheSize %d is out of range: use %d..%d", c.cacheSize, minCacheSize, maxCacheSize))
	}
	if c.mmapSize < 0 || c.mmapSize > maxMmapSize {
		bad = append(bad, fmt.Sprintf("MmapSize %d is out of range: use 0..%d", c.mmapSize, maxMmapSize))
	}
	return bad
}

// openWritable opens the file c names for reading and writing, creating it
// and its tables when missing.
func openWritable(ctx context.Context, c config, logger *slog.Logger) (*Driver, error) {
	created, err := createPrivate(c.path)
	if err != nil {
		return nil, wrapErr(ctx, "create "+c.path, err)
	}
	if created {
		if err := layOut(ctx, c.path); err != nil {
			return nil, wrapErr(ctx, "create "+c.path, err)
		}
	}
	if !created {
		// SQLite opens a file it may not write read-only without a word,
		// and an up-to-date file needs no write at open: the first push
		// or claim would fail with "attempt to write a readonly
		// database". One open(2) says so now, and why.
		if err := fileWritable(c.path); err != nil {
			return nil, err
		}
	}
	c.empty = isEmptyFile(c.path)
	db, err := sql.Open("sqlite", c.dsn())
	if err != nil {
		return nil, wrapErr(ctx, "open "+c.path, err)
	}
	if err := migrateWhenFree(ctx, db, c.busyTimeout); err != nil {
		_ = db.Close()
		if werr := notWritable(c.path, err); werr != nil {
			return nil, werr
		}
		return nil, wrapErr(ctx, "create tables in "+c.path, err)
	}
	d, err := newDriver(ctx, c, db, logger)
	if err != nil {
		_ = db.Close()
		return nil, wrapErr(ctx, "open "+c.path, err)
	}
	return d, nil
}

// createPrivate creates the database file, readable and writable by its
// owner only (0600), unless it exists already: tasks carry environment
// values, which may be secrets. SQLite gives the -wal and -shm files it
// creates beside it the same permissions. An existing file keeps its own.
func createPrivate(path string) (created bool, err error) {
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return false, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, f.Close()
}

// notWritable explains err, SQLite's refusal to open the existing file at
// path for writing, when the file or its directory cannot be written (a
// read-only file system, a directory of another user): SQLite only says
// "unable to open database file" or "attempt to write a readonly
// database". It returns nil for any other error.
func notWritable(path string, err error) error {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return nil
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM:
	default:
		return nil
	}
	if werr := fileWritable(path); werr != nil {
		return driver.Errorf(errcode.PermissionDenied, "%s: %w", werr.Error(), err)
	}
	if se.Code() == sqlite3.SQLITE_READONLY_DIRECTORY || se.Code()&0xff == sqlite3.SQLITE_CANTOPEN {
		return driver.Errorf(errcode.PermissionDenied,
			"sqlite: the directory %q of %s is not writable: SQLite creates %s and %s beside the file for writing; make the directory writable or move the file to one that is; %s: %w",
			filepath.Dir(path), path, filepath.Base(path)+"-wal", filepath.Base(path)+"-shm", readsWithoutWriting, err)
	}
	return nil
}

// readsWithoutWriting is what a PermissionDenied error of an open for
// writing offers instead.
const readsWithoutWriting = "the read commands (size, stats, peek, show, result, dlq list) work without writing"

// fileWritable returns a PermissionDenied error saying why, when the
// existing file at path cannot be opened for writing (its mode or owner, a
// read-only file system); nil when it can, or when path is not a plain
// file path or is missing (SQLite's open then says what is wrong).
func fileWritable(path string) error {
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		return f.Close()
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return driver.Errorf(errcode.PermissionDenied,
		"sqlite: %s cannot be written (%v): push, worker and the commands that change the queue need the file and its directory writable; %s",
		path, err, readsWithoutWriting)
}

// isEmptyFile reports whether the file at path has no page yet: it is
// missing or empty (just created, and not laid out by another process
// yet), or not a plain file path (":memory:", a "file:" URI).
func isEmptyFile(path string) bool {
	fi, err := os.Stat(path)
	return err != nil || fi.Size() == 0
}

// layOut gives a file createPrivate just made its page size (newPageSize),
// incremental auto-vacuum and WAL mode, on a connection of its own: SQLite
// fixes the page size when the first of those is set, and the driver's
// DSN pragmas run in an order that sets auto_vacuum first. A process that
// opens the empty file first lays it out with its DSN instead, with
// SQLite's page size, which works the same.
func layOut(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, fmt.Sprintf("PRAGMA page_size = %d; PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_mode = WAL", newPageSize))
	if isBusy(err) {
		return nil // another process is laying it out
	}
	return err
}

// migrateWhenFree runs migrate, trying again while the file is busy, for
// up to busyTimeout. Processes that open a new file at once race to switch
// it to WAL and create its tables, and SQLite reports a connection that
// would have to wait while holding a lock the others need as busy at once,
// without its busy handler (waiting could deadlock): about one open in 20
// of six at once failed so (TestConcurrentOpenOfNewFile).
func migrateWhenFree(ctx context.Context, db *sql.DB, busyTimeout time.Duration) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		err := migrate(ctx, db)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// capabilities is what every sqlite queue declares; only the size limit
// depends on the URL.
func capabilities(maxBytes int) driver.Capabilities {
	return driver.Capabilities{
		Features: driver.NativeExcept(map[driver.Feature]driver.Support{
			driver.WorkerRegistry: {Level: driver.Native}, // the jobq_workers table (workers.go)
			driver.TransactionalPush: {Level: driver.Unsupported,
				Fallback: "the sqlite backend cannot push inside an application transaction yet"},
		}),
		MaxMessageBytes: maxBytes,
		MaxReceiveBatch: maxReceiveBatch,
		MaxPushBatch:    maxPushBatch,
		// One writer: batches in flight queue for the file's write lock.
		PushConcurrency: 1,
	}
}

// Batch bounds: one write transaction holds the file's write lock, so a
// batch is capped to keep other processes' waits short.
const (
	maxReceiveBatch = 1000
	maxPushBatch    = 1000
)
