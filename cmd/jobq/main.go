// Command jobq pushes, runs and inspects tasks on a work queue; see
// docs/cli.md or run 'jobq --help'.
package main

import (
	"os"

	_ "github.com/jobq/jobq/backends/all"
	"github.com/jobq/jobq/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
