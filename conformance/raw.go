package conformance

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// RawPusher returns a Harness.PushRaw that opens the queue through the
// backend's own opener and pushes body as one message, unchanged, under a
// random message ID.
func RawPusher(o driver.Opener) func(ctx context.Context, rawURL string, body []byte) error {
	return func(ctx context.Context, rawURL string, body []byte) error {
		u, err := url.Parse(rawURL)
		if err != nil {
			return fmt.Errorf("parse %s: %w", jobq.RedactURL(rawURL), err)
		}
		d, err := o.Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return fmt.Errorf("open %s: %w", jobq.RedactURL(rawURL), err)
		}
		defer d.Close()
		_, err = d.Push(ctx, []*driver.Message{{ID: "raw-" + rand.Text(), Body: body}})
		return err
	}
}
