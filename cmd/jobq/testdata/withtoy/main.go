// Command withtoy is the jobq command with one more backend, built as
// docs/drivers.md shows: the toy:// scheme, which stands for a third-party
// backend package (here mem's opener under another scheme). A real
// backend package registers its scheme in its own init function, and the
// program only imports it:
//
//	import _ "example.com/jobq-nats"
package main

import (
	"fmt"
	"os"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/all" // the built-in backends, as in cmd/jobq
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/cli"
)

func init() {
	if err := jobq.Register("toy", mem.URLOpener{}); err != nil {
		// AlreadyExists: another package registered toy:// first.
		fmt.Fprintln(os.Stderr, err)
		os.Exit(cli.ExitFailure)
	}
}

func main() { os.Exit(cli.Main(os.Args[1:])) }
