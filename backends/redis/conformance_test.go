package redis

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/wire"

	"github.com/jobq/jobq/conformance"
)

// TestConformance runs the shared suite against the Redis server at
// JOBQ_TEST_REDIS_URL (default redis://127.0.0.1:6379/0), every check on its
// own queue (and so its own keys), in parallel.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Harness{
		Name:        "redis",
		NewQueueURL: func(t testing.TB) string { return newQueueURL(t, "") },
		PushRaw:     conformance.RawPusher(&Opener{}),
		Corruptions: corruptions,
	})
}

// corruptions are the damaged messages the CorruptRecord check stores:
// each is pushed, then one thing about its hash is changed.
var corruptions = []conformance.Corruption{
	damaged("delivery count is not a number", func(ctx context.Context, c goredis.Cmdable, k string) error { return c.HSet(ctx, k, "d", "x").Err() }),
	damaged("enqueue time is not a number", func(ctx context.Context, c goredis.Cmdable, k string) error {
		return c.HSet(ctx, k, "e", "yesterday").Err()
	}),
	damaged("priority out of range", func(ctx context.Context, c goredis.Cmdable, k string) error { return c.HSet(ctx, k, "p", "5000").Err() }),
	damaged("priority is not a number", func(ctx context.Context, c goredis.Cmdable, k string) error {
		return c.HSet(ctx, k, "p", "high\xff").Err()
	}),
	damaged("no body", func(ctx context.Context, c goredis.Cmdable, k string) error { return c.HDel(ctx, k, "b", "z").Err() }),
	damaged("packed body with an unknown header", func(ctx context.Context, c goredis.Cmdable, k string) error {
		return c.HSet(ctx, k, "z", `Z"{}"`).Err()
	}),
	// The body leaves the task ID out (bodypack), so the rebuilt body holds
	// 0xbe too.
	damaged("task ID is not valid UTF-8", func(ctx context.Context, c goredis.Cmdable, k string) error {
		return c.HSet(ctx, k, "i", "key\xbe-key").Err()
	}),
	damaged("message key is a list", func(ctx context.Context, c goredis.Cmdable, k string) error {
		if err := c.Del(ctx, k).Err(); err != nil {
			return err
		}
		return c.RPush(ctx, k, "garbage").Err()
	}),
}

// damaged pushes body through the driver, under its task ID as jobq
// pushes it, then damages its hash with f.
func damaged(name string, f func(ctx context.Context, c goredis.Cmdable, key string) error) conformance.Corruption {
	return conformance.Corruption{Name: name, Write: func(ctx context.Context, rawURL string, body []byte) error {
		u, err := url.Parse(rawURL)
		if err != nil {
			return err
		}
		drv, err := (&Opener{}).Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		defer drv.Close()
		d := drv.(*Driver)
		t, err := wire.Unmarshal(body)
		if err != nil {
			return err
		}
		res, err := d.Push(ctx, []*driver.Message{{ID: t.ID, Body: body}})
		if err != nil {
			return err
		}
		return f(ctx, d.client, d.prefix+"m:"+res[0].MessageID)
	}}
}

// TestConformanceSizeLimit runs the suite on queues whose URL lowers the
// message size limit, so that the stash and TooLarge paths run too.
func TestConformanceSizeLimit(t *testing.T) {
	const limit = 64 << 10
	conformance.Run(t, conformance.Harness{
		Name: "redis-limited",
		NewQueueURL: func(t testing.TB) string {
			return newQueueURL(t, "") + "&max_message_bytes=" + strconv.Itoa(limit)
		},
		MaxMessageBytes: limit,
		PushRaw:         conformance.RawPusher(&Opener{}),
	})
}
