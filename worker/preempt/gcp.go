package preempt

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// gcpPreemptedPath is Compute Engine's preempted value: "TRUE" once the VM
// has been told to stop.
const gcpPreemptedPath = "/computeMetadata/v1/instance/preempted"

// gcpNotice is how long Compute Engine gives a preempted VM before it stops
// it.
const gcpNotice = 30 * time.Second

// gcpWaitSeconds is how long one wait_for_change request hangs at most.
const gcpWaitSeconds = 60

// gcpWatcher watches the preempted value.
type gcpWatcher struct{ cfg Config }

// NewGCP returns a Watcher that watches Google Compute Engine's preempted
// value (a hanging wait_for_change request, so a notice is seen at once)
// and reports a notice when it turns TRUE, with a deadline 30 seconds on.
func NewGCP(cfg Config) Watcher {
	return &gcpWatcher{cfg: cfg.withDefaults()}
}

// Watch implements Watcher.
func (g *gcpWatcher) Watch(ctx context.Context) (*Notice, error) {
	h := &health{log: g.cfg.Logger, source: GCP}
	var etag string
	var wait time.Duration
	watching := false // after the first answer, requests wait for a change
	for {
		began := time.Now()
		v, tag, err := g.read(ctx, watching, etag)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err == nil {
			h.ok()
			if v == "TRUE" {
				return &Notice{Source: GCP, Kind: "Preempt", Deadline: time.Now().Add(gcpNotice)}, nil
			}
			wait, etag, watching = 0, tag, true
			// A server that answers a wait at once, unchanged, is not
			// polled in a tight loop.
			if err := sleep(ctx, g.cfg.Interval-time.Since(began)); err != nil {
				return nil, err
			}
			continue
		}
		wait = backoff(wait, g.cfg.Interval)
		h.fail(err, wait)
		etag, watching = "", false // read the value afresh
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// read returns the preempted value and its ETag. With wait, the request
// hangs until the value changes from the version etag names (or from the
// current one, without an etag), or until the wait times out and the same
// value comes back.
func (g *gcpWatcher) read(ctx context.Context, wait bool, etag string) (value, tag string, err error) {
	u := g.cfg.Endpoint + gcpPreemptedPath
	if wait {
		q := url.Values{"wait_for_change": {"true"}, "timeout_sec": {fmt.Sprint(gcpWaitSeconds)}}
		if etag != "" {
			q.Set("last_etag", etag)
		}
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, (gcpWaitSeconds+30)*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", "", fmt.Errorf("gcp metadata endpoint %q: %w", g.cfg.Endpoint, err)
	}
	req.Header.Set("Metadata-Flavor", "Google")
	body, hdr, err := roundTrip(g.cfg.Client, req)
	if err != nil {
		return "", "", err
	}
	return strings.TrimSpace(string(body)), hdr.Get("ETag"), nil
}
