// Package sqlite is jobq's embedded backend: a queue in a local SQLite file,
// shared safely by any number of goroutines and processes on one machine.
//
// Build a queue with New from a file path and Options, or from a URL: import
// the package for its side effect of registering the "sqlite" URL scheme (or
// import github.com/jobq/jobq/backends/all):
//
//	import _ "github.com/jobq/jobq/backends/sqlite"
//
//	q, err := jobq.Open(ctx, "sqlite://./work.db?queue=render")
//
// The path is everything between "sqlite://" and the query: sqlite://./work.db
// and sqlite://work.db are relative to the working directory, sqlite:///abs/x.db
// is absolute. The file is created when missing. Several queues share one file
// (the queue parameter, "default" when absent). Query parameters, which set
// the Options fields of the same names:
//
//   - queue: the queue's name. Default "default".
//   - max_message_bytes: the largest message body accepted, at most 512 MiB.
//     Default 2 MiB.
//   - busy_timeout: how long a write waits for another process's write
//     transaction to finish before failing with code Unavailable. Default 5s.
//   - poll: how often an idle Receive with a Wait checks the file for messages
//     pushed by other processes or made visible by time. Pushes through the
//     same process wake receivers at once. Default 20ms.
//   - synchronous: "normal" (default) or "full", SQLite's synchronous pragma.
//     With normal, a commit survives a crash of the process but the last
//     commits may be lost on power failure; full syncs every commit.
//
// The package is pure Go (modernc.org/sqlite); it needs no cgo. The file must
// live on a local file system: SQLite's write-ahead log, which jobq uses, does
// not work over network file systems.
//
// # Escape hatch
//
// Queue.As (and Driver.As) accept a **sql.DB, the connection pool on the
// file, for inspecting the tables (jobq_messages, jobq_dead) directly.
package sqlite
