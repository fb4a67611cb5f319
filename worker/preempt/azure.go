package preempt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Azure Instance Metadata Service paths. Scheduled Events are versioned;
// 2020-07-01 has every field read here.
const (
	azureEventsPath = "/metadata/scheduledevents?api-version=2020-07-01"
	azureNamePath   = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
)

// firstCallTimeout bounds one request: Azure documents that the first
// Scheduled Events request of a VM may take up to two minutes (it turns the
// service on for the VM).
const firstCallTimeout = 150 * time.Second

// azureDocument is the Scheduled Events document.
type azureDocument struct {
	DocumentIncarnation int          `json:"DocumentIncarnation"`
	Events              []azureEvent `json:"Events"`
}

type azureEvent struct {
	EventID     string   `json:"EventId"`
	EventType   string   `json:"EventType"` // Reboot, Redeploy, Freeze, Preempt, Terminate
	EventStatus string   `json:"EventStatus"`
	Resources   []string `json:"Resources"` // the VMs it affects
	NotBefore   string   `json:"NotBefore"` // RFC 1123; empty once started
	Description string   `json:"Description"`
}

// azureWatcher polls Scheduled Events.
type azureWatcher struct {
	cfg  Config
	name string // this VM's name, once known
}

// NewAzure returns a Watcher that polls Azure's Scheduled Events every
// Config.Interval and reports the first Preempt or Terminate event that
// names this VM (or names no VM, or arrives while the VM's name cannot be
// read: stopping needlessly costs less than being evicted unawares).
// Reboot, Redeploy and Freeze events are not notices: they are scheduled
// minutes to days ahead, and the first two do not lose the running tasks'
// leases any more than a crash would.
func NewAzure(cfg Config) Watcher {
	return &azureWatcher{cfg: cfg.withDefaults()}
}

// Watch implements Watcher.
func (a *azureWatcher) Watch(ctx context.Context) (*Notice, error) {
	h := &health{log: a.cfg.Logger, source: Azure}
	var wait time.Duration
	for {
		doc, err := a.events(ctx)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			wait = backoff(wait, a.cfg.Interval)
			h.fail(err, wait)
		} else {
			h.ok()
			wait = a.cfg.Interval
			if n := a.notice(ctx, doc); n != nil {
				return n, nil
			}
		}
		if err := sleep(ctx, wait); err != nil {
			return nil, err
		}
	}
}

// notice returns the first event in doc that evicts this VM.
func (a *azureWatcher) notice(ctx context.Context, doc *azureDocument) *Notice {
	for _, ev := range doc.Events {
		if ev.EventType != "Preempt" && ev.EventType != "Terminate" {
			continue
		}
		if !a.concerns(ctx, ev) {
			continue
		}
		n := &Notice{Source: Azure, Kind: ev.EventType, ID: ev.EventID, Description: ev.Description}
		if t, err := http.ParseTime(ev.NotBefore); err == nil {
			n.Deadline = t
		}
		id := ev.EventID
		n.ack = func(ctx context.Context) error { return a.start(ctx, id) }
		return n
	}
	return nil
}

// concerns reports whether ev affects this VM. Events go to every VM of an
// availability set or scale-set placement group; Resources names the ones
// affected.
func (a *azureWatcher) concerns(ctx context.Context, ev azureEvent) bool {
	if len(ev.Resources) == 0 {
		return true
	}
	if a.name == "" {
		name, err := a.get(ctx, azureNamePath)
		if err != nil || strings.TrimSpace(string(name)) == "" {
			a.cfg.Logger.Warn("cannot read this VM's name; taking the eviction event as this VM's", "event_id", ev.EventID, "resources", ev.Resources, "error", err)
			return true
		}
		a.name = strings.TrimSpace(string(name))
	}
	return slices.ContainsFunc(ev.Resources, func(r string) bool { return strings.EqualFold(r, a.name) })
}

// events reads the Scheduled Events document.
func (a *azureWatcher) events(ctx context.Context) (*azureDocument, error) {
	body, err := a.get(ctx, azureEventsPath)
	if err != nil {
		return nil, err
	}
	var doc azureDocument
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("azure scheduled events: the document is not JSON: %w", err)
	}
	return &doc, nil
}

// start approves an event (StartRequests), so that it need not wait for
// its NotBefore time.
func (a *azureWatcher) start(ctx context.Context, id string) error {
	body, err := json.Marshal(map[string][]map[string]string{"StartRequests": {{"EventId": id}}})
	if err != nil {
		return err
	}
	_, err = a.do(ctx, http.MethodPost, azureEventsPath, body)
	return err
}

func (a *azureWatcher) get(ctx context.Context, path string) ([]byte, error) {
	return a.do(ctx, http.MethodGet, path, nil)
}

// do makes one request to the metadata service and returns the body of a
// 200 answer.
func (a *azureWatcher) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, firstCallTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.cfg.Endpoint+path, rd)
	if err != nil {
		return nil, fmt.Errorf("azure metadata endpoint %q: %w", a.cfg.Endpoint, err)
	}
	req.Header.Set("Metadata", "true")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	b, _, err := roundTrip(a.cfg.Client, req)
	return b, err
}

// roundTrip sends req and returns the body and header of a 200 answer, or
// an error naming the status and the start of the body.
func roundTrip(c *http.Client, req *http.Request) ([]byte, http.Header, error) {
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: reading the answer: %w", req.Method, req.URL.Path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, strings.TrimSpace(string(b[:min(len(b), 200)])))
	}
	return b, resp.Header, nil
}
