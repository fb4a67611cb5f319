package redis

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// LogClientThroughSlog routes go-redis's own log lines (a connection pool
// that cannot dial, a reconnecting subscription) to slog.Default() at debug
// level, as of each line. go-redis keeps one logger per process, which by
// default prints to standard error; a program that reports the same
// failures through jobq's errors, as the jobq command does, calls this
// once at start so that those lines do not appear twice, unformatted.
// A library should leave the choice to its program.
func LogClientThroughSlog() {
	goredis.SetLogger(slogPrinter{})
}

// slogPrinter is go-redis's Logging interface over slog.Default().
type slogPrinter struct{}

func (slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}
