package preempt

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fakeAzure is a metadata server serving a Scheduled Events document that
// the test changes, and recording StartRequests.
type fakeAzure struct {
	mu      sync.Mutex
	doc     string
	name    string
	fails   int // answer this many event requests with 500 first
	polls   atomic.Int64
	started []string
}

func (f *fakeAzure) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata") != "true" {
		http.Error(w, "missing Metadata header", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/metadata/instance/compute/name":
		io.WriteString(w, f.name)
	case r.URL.Path == "/metadata/scheduledevents" && r.Method == http.MethodGet:
		f.polls.Add(1)
		if f.fails > 0 {
			f.fails--
			http.Error(w, "busy", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, f.doc)
	case r.URL.Path == "/metadata/scheduledevents" && r.Method == http.MethodPost:
		var body struct{ StartRequests []struct{ EventId string } }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, s := range body.StartRequests {
			f.started = append(f.started, s.EventId)
		}
	default:
		http.NotFound(w, r)
	}
}

const noEvents = `{"DocumentIncarnation": 1, "Events": []}`

func preemptDoc(resources string) string {
	return `{"DocumentIncarnation": 2, "Events": [{"EventId": "E1", "EventStatus": "Scheduled", "EventType": "Preempt",
		"ResourceType": "VirtualMachine", "Resources": ` + resources + `, "NotBefore": "Thu, 26 Nov 2026 06:10:17 GMT",
		"Description": "spot eviction", "EventSource": "Platform", "DurationInSeconds": -1}]}`
}

func TestAzureNotice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, doc, vm string
		want          bool
	}{
		{"preempt names this VM", preemptDoc(`["vm-a"]`), "vm-a", true},
		{"preempt names another VM", preemptDoc(`["vm-b"]`), "vm-a", false},
		{"preempt names no VM", preemptDoc(`[]`), "vm-a", true},
		{"VM name unreadable", preemptDoc(`["vm-b"]`), "", true},
		{"terminate", `{"Events": [{"EventId": "T", "EventType": "Terminate", "Resources": ["vm-a"], "NotBefore": ""}]}`, "vm-a", true},
		{"reboot is not a notice", `{"Events": [{"EventId": "R", "EventType": "Reboot", "Resources": ["vm-a"]}]}`, "vm-a", false},
		{"freeze is not a notice", `{"Events": [{"EventId": "F", "EventType": "Freeze", "Resources": ["vm-a"]}]}`, "vm-a", false},
		{"no events", noEvents, "vm-a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(&fakeAzure{name: tt.vm})
			defer srv.Close()
			a := NewAzure(Config{Endpoint: srv.URL, Logger: quiet()}).(*azureWatcher)
			var doc azureDocument
			if err := json.Unmarshal([]byte(tt.doc), &doc); err != nil {
				t.Fatal(err)
			}
			n := a.notice(context.Background(), &doc)
			if (n != nil) != tt.want {
				t.Fatalf("notice = %v, want one: %v", n, tt.want)
			}
		})
	}
}

func TestAzureWatchAndAck(t *testing.T) {
	t.Parallel()
	f := &fakeAzure{doc: noEvents, name: "vm-a", fails: 2}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, err := New(Azure, Config{Endpoint: srv.URL + "/", Interval: 5 * time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// Publish the event once the watcher has polled past the failures.
		for f.polls.Load() < 4 {
			time.Sleep(time.Millisecond)
		}
		f.mu.Lock()
		f.doc = preemptDoc(`["vm-a"]`)
		f.mu.Unlock()
	}()
	n, err := w.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 26, 6, 10, 17, 0, time.UTC)
	if n.Kind != "Preempt" || n.ID != "E1" || !n.Deadline.Equal(want) || n.Description != "spot eviction" {
		t.Fatalf("notice %+v", n)
	}
	if err := n.Ack(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.started) != 1 || f.started[0] != "E1" {
		t.Fatalf("StartRequests %v, want [E1]", f.started)
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&fakeAzure{doc: noEvents})
	defer srv.Close()
	for _, mode := range []string{Azure, GCP} {
		w, err := New(mode, Config{Endpoint: srv.URL, Interval: time.Millisecond, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			time.Sleep(20 * time.Millisecond)
			cancel()
		}()
		if n, err := w.Watch(ctx); err == nil || n != nil {
			t.Fatalf("%s: Watch = %v, %v after cancel; want the context's error", mode, n, err)
		}
	}
}

// fakeGCP serves the preempted value: FALSE until preempt is set, answering
// a wait_for_change request once the value differs from last_etag.
type fakeGCP struct {
	preempted chan struct{}
	waits     atomic.Int64
}

func (f *fakeGCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Metadata-Flavor") != "Google" || r.URL.Path != "/computeMetadata/v1/instance/preempted" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	value := func() (string, string) {
		select {
		case <-f.preempted:
			return "TRUE", "etag-2"
		default:
			return "FALSE", "etag-1"
		}
	}
	v, tag := value()
	if r.URL.Query().Get("wait_for_change") == "true" {
		f.waits.Add(1)
		if r.URL.Query().Get("last_etag") == tag {
			select {
			case <-f.preempted:
			case <-r.Context().Done():
				return
			}
			v, tag = value()
		}
	}
	w.Header().Set("ETag", tag)
	io.WriteString(w, v)
}

func TestGCPWatch(t *testing.T) {
	t.Parallel()
	f := &fakeGCP{preempted: make(chan struct{})}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, err := New(GCP, Config{Endpoint: srv.URL, Interval: time.Millisecond, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for f.waits.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		close(f.preempted)
	}()
	before := time.Now()
	n, err := w.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n.Source != GCP || n.Deadline.Before(before.Add(gcpNotice)) {
		t.Fatalf("notice %+v", n)
	}
	if err := n.Ack(context.Background()); err != nil {
		t.Fatalf("Ack on GCP: %v, want nil", err)
	}
}

func TestDetect(t *testing.T) {
	// Not parallel: it sets dmiDir.
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"azure", map[string]string{"chassis_asset_tag": azureAssetTag + "\n", "sys_vendor": "Microsoft Corporation\n"}, Azure},
		{"hyper-v elsewhere", map[string]string{"chassis_asset_tag": "None\n", "sys_vendor": "Microsoft Corporation\n"}, Off},
		{"gce", map[string]string{"product_name": "Google Compute Engine\n"}, GCP},
		{"bare metal", map[string]string{"product_name": "PowerEdge R640\n"}, Off},
		{"no dmi", nil, Off},
	}
	old := dmiDir
	defer func() { dmiDir = old }()
	for _, tt := range tests {
		dir := t.TempDir()
		for name, body := range tt.files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dmiDir = dir
		if got := Detect(); got != tt.want {
			t.Errorf("%s: Detect() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestNewRejectsUnknownMode(t *testing.T) {
	t.Parallel()
	if _, err := New("aws", Config{}); err == nil {
		t.Fatal("New(aws) succeeded; want an error naming the modes")
	}
	if w, err := New(Off, Config{}); w != nil || err != nil {
		t.Fatalf("New(off) = %v, %v; want nil, nil", w, err)
	}
}

// TestEnvLabel reads the VM size and region from each cloud's metadata
// service, and is empty off a cloud.
func TestEnvLabel(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/metadata/instance/compute" && r.Header.Get("Metadata") == "true":
			io.WriteString(w, `{"vmSize": "Standard_D4s_v5", "location": "eastus", "name": "vm1"}`)
		case r.URL.Path == "/computeMetadata/v1/instance/machine-type" && r.Header.Get("Metadata-Flavor") == "Google":
			io.WriteString(w, "projects/123/machineTypes/n2-standard-4")
		case r.URL.Path == "/computeMetadata/v1/instance/zone" && r.Header.Get("Metadata-Flavor") == "Google":
			io.WriteString(w, "projects/123/zones/us-central1-a")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tt := range []struct{ mode, want string }{
		{Azure, "Standard_D4s_v5/eastus"}, {GCP, "n2-standard-4/us-central1-a"}, {Off, ""},
	} {
		got, err := EnvLabel(context.Background(), tt.mode, Config{Endpoint: srv.URL})
		if err != nil || got != tt.want {
			t.Errorf("EnvLabel(%s) = %q, %v; want %q", tt.mode, got, err, tt.want)
		}
	}
	broken := httptest.NewServer(http.NotFoundHandler())
	defer broken.Close()
	if _, err := EnvLabel(context.Background(), Azure, Config{Endpoint: broken.URL}); err == nil {
		t.Errorf("EnvLabel from a service that does not answer: no error")
	}
}
