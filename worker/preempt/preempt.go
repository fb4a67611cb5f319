// Package preempt watches a cloud VM's instance metadata service for notice
// that the machine is about to be taken away (a spot or preemptible VM's
// eviction), so that a worker can put its running tasks back before the
// machine goes.
//
//	w, err := preempt.New(preempt.Auto, preempt.Config{})
//	...
//	notice, err := w.Watch(ctx) // blocks until a notice or ctx ends
//
// Azure: Scheduled Events, polled every second; a Preempt or Terminate event
// for this VM is a notice, and Notice.Ack approves it (StartRequests) once
// the machine is ready to go. Google Cloud: the instance's preempted value,
// watched with wait_for_change.
//
// The endpoint is http://169.254.169.254 unless Config.Endpoint says
// otherwise (the jobq CLI reads $JOBQ_METADATA_ENDPOINT), which is how tests
// point a watcher at a fake metadata server.
package preempt

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Modes name the watchers New builds.
const (
	// Off watches nothing: New returns a nil Watcher.
	Off = "off"
	// Auto picks Azure or GCP from the machine's firmware (DMI) data, read
	// from local files with no network call; elsewhere it is Off.
	Auto = "auto"
	// Azure polls Azure's Scheduled Events.
	Azure = "azure"
	// GCP watches Google Compute Engine's preempted value.
	GCP = "gcp"
)

// DefaultEndpoint is the instance metadata service's address on Azure and
// Google Cloud (metadata.google.internal resolves to it).
const DefaultEndpoint = "http://169.254.169.254"

// Notice says the machine is about to be taken away.
type Notice struct {
	// Source is the watcher that saw it: Azure or GCP.
	Source string
	// Kind is the event: Azure's EventType ("Preempt", "Terminate"), or
	// "Preempt" on Google Cloud.
	Kind string
	// ID is Azure's EventId; empty on Google Cloud.
	ID string
	// Deadline is when the machine may go: Azure's NotBefore, or 30 seconds
	// after the notice on Google Cloud. Zero when the platform gave none
	// (the event has started).
	Deadline time.Time
	// Description is the platform's text, when it gave one.
	Description string

	ack func(ctx context.Context) error
}

// Ack tells the platform that the machine is ready to go, so the eviction
// need not wait for its deadline (Azure's StartRequests). It does nothing on
// Google Cloud, which has no such call.
func (n *Notice) Ack(ctx context.Context) error {
	if n == nil || n.ack == nil {
		return nil
	}
	return n.ack(ctx)
}

// String describes the notice for a log line.
func (n *Notice) String() string {
	s := n.Source + " " + n.Kind
	if n.ID != "" {
		s += " event " + n.ID
	}
	if !n.Deadline.IsZero() {
		s += " not before " + n.Deadline.UTC().Format(time.RFC3339)
	}
	return s
}

// Watcher waits for a preemption notice for this machine.
type Watcher interface {
	// Watch blocks until a notice arrives and returns it, or until ctx
	// ends and returns ctx's error. An unreachable or failing metadata
	// service is retried with backoff and logged, not returned: missing a
	// notice costs duplicated work, never lost work.
	Watch(ctx context.Context) (*Notice, error)
}

// Config configures a Watcher. The zero value is valid.
type Config struct {
	// Endpoint is the metadata service's base URL (scheme and host, no
	// path). Defaults to DefaultEndpoint.
	Endpoint string
	// Client makes the requests. Defaults to a client without proxies (the
	// metadata service is link-local) and without a timeout of its own.
	Client *http.Client
	// Interval is how often Azure's Scheduled Events are polled. Defaults
	// to 1 second (Azure gives at least 30 seconds' notice of a Preempt).
	Interval time.Duration
	// Logger receives warnings about an unreachable metadata service.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	c.Endpoint = strings.TrimRight(c.Endpoint, "/")
	if c.Client == nil {
		c.Client = &http.Client{Transport: &http.Transport{Proxy: nil}}
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// New returns the watcher for mode (Off, Auto, Azure or GCP); nil for Off,
// and for Auto on a machine that is neither an Azure nor a Google Cloud VM.
func New(mode string, cfg Config) (Watcher, error) {
	if mode == Auto {
		mode = Detect()
	}
	switch mode {
	case Off, "":
		return nil, nil
	case Azure:
		return NewAzure(cfg), nil
	case GCP:
		return NewGCP(cfg), nil
	}
	return nil, fmt.Errorf("unknown preemption mode %q: use off, auto, azure or gcp", mode)
}

// dmiDir holds the firmware's identification strings on Linux; a variable
// so that tests can point Detect at their own files.
var dmiDir = "/sys/class/dmi/id"

// azureAssetTag is the chassis asset tag of every Azure VM (Hyper-V
// machines elsewhere have another).
const azureAssetTag = "7783-7084-3265-9085-8269-3286-77"

// Detect returns Azure or GCP when the machine's firmware data says it is a
// VM on that cloud, and Off otherwise (or when the data cannot be read). It
// reads local files only, so it costs no network round trip or timeout.
func Detect() string {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dmiDir, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case read("chassis_asset_tag") == azureAssetTag:
		return Azure
	case strings.HasPrefix(read("product_name"), "Google Compute Engine"),
		read("bios_vendor") == "Google":
		return GCP
	}
	return Off
}

// backoff is the next wait after a failed request: doubling from the
// interval up to 30 seconds.
func backoff(cur, base time.Duration) time.Duration {
	if cur < base {
		return base
	}
	return min(2*cur, 30*time.Second)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// health logs once when the metadata service starts failing and once when
// it answers again, rather than on every poll.
type health struct {
	log     *slog.Logger
	source  string
	failing bool
}

func (h *health) fail(err error, retry time.Duration) {
	if !h.failing {
		h.failing = true
		h.log.Warn("cannot read the preemption notices; retrying (the worker runs on, but would not see an eviction coming)",
			"source", h.source, "error", err, "retry_in", retry)
	}
}

func (h *health) ok() {
	if h.failing {
		h.failing = false
		h.log.Info("preemption notices readable again", "source", h.source)
	}
}
