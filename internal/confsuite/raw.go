package confsuite

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/queueurl"
	"github.com/jobq/jobq/internal/redact"
)

// RawPusher returns a Harness.PushRaw that opens the queue through the
// backend's own opener and pushes body as one message, unchanged, under a
// random message ID.
func RawPusher(o driver.Opener) func(ctx context.Context, rawURL string, body []byte) error {
	return func(ctx context.Context, rawURL string, body []byte) error {
		u, err := url.Parse(queueurl.Normalize(rawURL))
		if err != nil {
			return fmt.Errorf("parse %s: %w", redact.URL(rawURL), err)
		}
		// The portable layer's own parameter never reaches a driver.
		if v := u.Query(); v.Has("stash") {
			v.Del("stash")
			u.RawQuery = v.Encode()
		}
		d, err := o.Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return fmt.Errorf("open %s: %w", redact.URL(rawURL), err)
		}
		defer d.Close()
		_, err = d.Push(ctx, []*driver.Message{{ID: "raw-" + rand.Text(), Body: body}})
		return err
	}
}

// LiveHarness returns the Harness for RunLive on the queue named by
// queueURL, as `jobq QUEUE conformance` runs it: scratch queues derived
// from queueURL (see ScratchQueues) and raw pushes through the backend's
// registered opener, so that the Poison check runs too. The backend must
// be registered.
func LiveHarness(queueURL string) (Harness, error) {
	next, err := ScratchQueues(queueURL)
	if err != nil {
		return Harness{}, err
	}
	u, err := url.Parse(queueurl.Normalize(queueURL))
	if err != nil {
		return Harness{}, fmt.Errorf("conformance: %q is not a queue URL", redact.URL(queueURL))
	}
	o, ok := jobq.DefaultURLMux().Opener(u.Scheme)
	if !ok {
		return Harness{}, fmt.Errorf("conformance: no backend is registered for scheme %q (registered: %v); import github.com/jobq/jobq/backends/all",
			u.Scheme, jobq.DefaultURLMux().Schemes())
	}
	return Harness{Name: u.Scheme, NewLiveQueueURL: next, PushRaw: RawPusher(o)}, nil
}
