package confsuite_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	_ "github.com/jobq/jobq/backends/mem"
	conformance "github.com/jobq/jobq/internal/confsuite"
)

// TestRunLive runs the whole suite through the live runner against mem and
// expects every check to pass or skip, with a result per check.
func TestRunLive(t *testing.T) {
	t.Parallel()
	h, err := conformance.LiveHarness("mem://live-runner")
	if err != nil {
		t.Fatal(err)
	}
	rs := conformance.RunLive(t.Context(), h)
	names := conformance.Names()
	if len(rs) != len(names) {
		t.Fatalf("RunLive returned %d results for %d checks", len(rs), len(names))
	}
	for i, r := range rs {
		if r.Name != names[i] {
			t.Errorf("result %d is %q, want %q", i, r.Name, names[i])
		}
		if r.Status == conformance.Failed || (r.Name == "Poison" && r.Status != conformance.Passed) {
			t.Errorf("%s %s: %s", r.Name, r.Status, strings.Join(r.Messages, "; "))
		}
	}
	if !conformance.AllPassed(rs) {
		t.Errorf("AllPassed is false")
	}
	var buf bytes.Buffer
	if err := conformance.WriteTable(&buf, rs, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "PushReceiveComplete") || !strings.Contains(buf.String(), "failed") {
		t.Errorf("table lacks a check row or the summary:\n%s", buf.String())
	}
}

// TestRunLiveReportsFailures checks that failures and skips reach the
// results: without NewLiveQueueURL every check fails with the reason, and
// a queue that cannot be opened fails the checks that open it.
func TestRunLiveReportsFailures(t *testing.T) {
	t.Parallel()
	for _, r := range conformance.RunLive(context.Background(), conformance.Harness{}) {
		if r.Status != conformance.Failed || !strings.Contains(r.Reason, "NewLiveQueueURL") {
			t.Errorf("%s: status %s reason %q, want a failure naming NewLiveQueueURL", r.Name, r.Status, r.Reason)
		}
	}
	rs := conformance.RunLive(t.Context(), conformance.Harness{
		Serial:          true,
		NewLiveQueueURL: func(context.Context) (string, error) { return "nosuchscheme://x", nil },
	})
	byName := map[string]conformance.Result{}
	for _, r := range rs {
		byName[r.Name] = r
	}
	if r := byName["PushReceiveComplete"]; r.Status != conformance.Failed || !strings.Contains(r.Reason, "nosuchscheme") {
		t.Errorf("PushReceiveComplete on an unknown scheme: %s %q, want a failure naming the scheme", r.Status, r.Reason)
	}
	if r := byName["Poison"]; r.Status != conformance.Skipped || !strings.Contains(r.Reason, "PushRaw") {
		t.Errorf("Poison without PushRaw: %s %q, want a skip naming PushRaw", r.Status, r.Reason)
	}
}

func TestScratchQueues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, wantPrefix, wantContains string
	}{
		{"sqlite://./work.db?queue=render", "sqlite://./work.db?queue=render-conf-", ""},
		{"sqlite://./work.db", "sqlite://./work.db?queue=jobq-conf-", ""},
		{"redis://127.0.0.1:6379/0?queue=etl", "redis://127.0.0.1:6379/0?queue=etl-conf-", ""},
		{"postgres://user:secret@db/app?queue=Jobs&sslmode=disable", "postgres://user:secret@db/app?", "queue=jobs-conf-"},
		{"azqueue://myaccount/myqueue", "azqueue://myaccount/myqueue-conf-", ""},
		{"myaccount/myqueue", "azqueue://myaccount/myqueue-conf-", ""},
		{"sb://ns/q?x=1", "sb://ns/q-conf-", "x=1"},
		{"mem://work", "mem://work-conf-", ""},
		{"azqueue://acct/" + strings.Repeat("a", 63), "azqueue://acct/" + strings.Repeat("a", 63-len("-conf-xxxxxx-1")) + "-conf-", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			next, err := conformance.ScratchQueues(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := next(t.Context())
			b, _ := next(t.Context())
			if a == b {
				t.Errorf("two scratch URLs are equal: %s", a)
			}
			if !strings.HasPrefix(a, tt.wantPrefix) || !strings.Contains(a, tt.wantContains) {
				t.Errorf("scratch URL %s, want prefix %s containing %q", a, tt.wantPrefix, tt.wantContains)
			}
		})
	}
	if _, err := conformance.ScratchQueues("not a url"); err == nil {
		t.Errorf("ScratchQueues accepted a string without a scheme")
	}
}

func TestLiveHarnessUnknownScheme(t *testing.T) {
	t.Parallel()
	if _, err := conformance.LiveHarness("nosuchscheme://q"); err == nil || !strings.Contains(err.Error(), "nosuchscheme") {
		t.Errorf("LiveHarness on an unregistered scheme: %v, want an error naming it", err)
	}
}
