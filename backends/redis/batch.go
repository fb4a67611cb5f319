package redis

import (
	"context"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// chunkSize is how many messages one script call handles: small enough that
// a call never holds Redis for long, large enough to amortise the call.
const chunkSize = 256

// runChunks runs s once per argument list (each made by scriptArgs), all in
// one pipelined round trip, and returns one command per list. keys, when
// not nil, are the keys each call declares (see declared), else the calls
// declare the queue's first. Lists the server rejected with NOSCRIPT (its
// script cache was emptied, for example by a restart) did not run, so they
// are run again through Script.Run, which loads the script.
func (d *Driver) runChunks(ctx context.Context, s *goredis.Script, chunks [][]any, keys [][]string) []*goredis.Cmd {
	if len(chunks) == 1 {
		return []*goredis.Cmd{s.Run(ctx, d.client, d.keysOf(keys, 0), chunks[0]...)}
	}
	cmds := make([]*goredis.Cmd, len(chunks))
	_, _ = d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, args := range chunks {
			cmds[i] = s.EvalSha(ctx, p, d.keysOf(keys, i), args...)
		}
		return nil
	})
	for i, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			cmds[i] = s.Run(ctx, d.client, d.keysOf(keys, i), chunks[i]...)
		}
	}
	return cmds
}

// chunkBounds splits n items into [lo, hi) ranges of at most chunkSize.
func chunkBounds(n int) [][2]int {
	var out [][2]int
	for lo := 0; lo < n; lo += chunkSize {
		out = append(out, [2]int{lo, min(lo+chunkSize, n)})
	}
	return out
}

// keysOf is the keys call i of runChunks declares.
func (d *Driver) keysOf(keys [][]string, i int) []string {
	if keys == nil || keys[i] == nil {
		return d.keys[:1]
	}
	return keys[i]
}
