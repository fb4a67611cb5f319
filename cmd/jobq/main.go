// Command jobq pushes, runs and inspects tasks on a work queue; see
// docs/cli.md or run 'jobq --help'.
package main

import (
	"os"

	_ "github.com/jobq/jobq/backends/all"
	"github.com/jobq/jobq/backends/redis"
	"github.com/jobq/jobq/cli"
)

func main() {
	// go-redis's connection errors reach the user as jobq's own errors;
	// its log lines go to the -v debug log instead of standard error.
	redis.LogClientThroughSlog()
	os.Exit(cli.Main(os.Args[1:]))
}
