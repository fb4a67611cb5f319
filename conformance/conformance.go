// Package conformance is jobq's shared backend test suite. Every backend's
// TestConformance runs it, and third-party drivers can too:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			Name:        "mybackend",
//			NewQueueURL: func(t testing.TB) string { return "my://host/" + uniqueName(t) },
//			PushRaw:     conformance.RawPusher(myopener.URLOpener{}),
//		})
//	}
//
// The suite works through the portable API only (jobq.Open and the Queue
// and Envelope methods), so it tests the driver and the portable layer
// together, as users meet them. It checks that every capability the backend
// declares is true, that the degraded ones degrade as declared and warn once,
// and the semantics every backend keeps: at-least-once delivery, fenced
// leases, visibility, poison messages, limits. A check is skipped only when
// the declared capabilities say the feature is unsupported, and then the
// declared fallback is checked instead.
//
// RunLive runs the same checks against a live queue outside `go test`.
// This package imports testing; the checks themselves do not, so the jobq
// binary runs them (`jobq QUEUE conformance`) without linking it.
package conformance

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/confsuite"
)

// Harness is what a backend supplies to run the shared suite against it.
type Harness struct {
	// Name labels the backend in failure messages, for example "postgres".
	Name string
	// NewQueueURL returns the URL of a fresh, empty queue that no other test
	// uses (a unique queue name, key prefix or schema). The suite opens it
	// with jobq.Open, so the backend must be registered (blank-import it).
	// Register any clean-up with t.Cleanup. Required.
	NewQueueURL func(t testing.TB) string
	// Visibility is the short lease the suite uses for expiry tests. Zero
	// means one second. Backends whose lease is a property of the queue
	// (Service Bus lock duration) set it to that duration.
	Visibility time.Duration
	// MaxMessageBytes, when non-zero, is the size limit the suite expects
	// the opened queue to enforce (for backends whose URL can lower it).
	MaxMessageBytes int
	// PushRaw, when set, stores body unchanged as one message on the queue
	// at url, bypassing the portable layer's encoding, so that the suite can
	// check that an undecodable (poison) message is dead-lettered rather
	// than returned or left to wedge the queue. Without it the poison check
	// is skipped. RawPusher builds one from the backend's driver.Opener.
	PushRaw func(ctx context.Context, url string, body []byte) error
	// Corruptions are damaged records the backend can write straight into
	// its engine, for the CorruptRecord check: fields it stores beside the
	// body (a delivery count that is not a number, a priority out of
	// range, a time that cannot be read). Each must be quarantined (dead
	// -lettered with a reason naming the damage) without holding up or
	// losing the good messages around it. Without them only the body
	// cases, through PushRaw, are checked.
	Corruptions []Corruption
	// Serial runs the checks one after another instead of in parallel, for
	// engines that cannot take the load or share one queue between checks.
	Serial bool
	// NewLiveQueueURL returns the URL of a fresh scratch queue for RunLive,
	// which has no testing.TB to pass to NewQueueURL. ScratchQueues builds
	// one from a user's queue URL.
	NewLiveQueueURL func(ctx context.Context) (string, error)
}

// Corruption is one way a stored message can be damaged: Name says what
// is damaged, Write stores one message with a valid body on the queue at a
// URL, damaged so, straight into the engine.
type Corruption = confsuite.Corruption

// T is the part of *testing.T the checks use.
type T = confsuite.T

func (h Harness) suite() confsuite.Harness {
	return confsuite.Harness{Name: h.Name, Visibility: h.Visibility, MaxMessageBytes: h.MaxMessageBytes,
		PushRaw: h.PushRaw, Corruptions: h.Corruptions, Serial: h.Serial, NewLiveQueueURL: h.NewLiveQueueURL}
}

// Run runs every check as a subtest of t, in parallel unless h.Serial.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewQueueURL == nil {
		t.Fatal("conformance: Harness.NewQueueURL is nil; it must return a fresh queue URL per call")
	}
	sh := h.suite()
	for _, ck := range confsuite.Checks() {
		t.Run(ck.Name, func(t *testing.T) {
			if !h.Serial {
				t.Parallel()
			}
			ck.Run(confsuite.NewC(t, sh, func() string { return h.NewQueueURL(t) }))
		})
	}
}

// StashHarness is what a stash store supplies to run the suite's Stash
// check on it (RunStash).
type StashHarness struct {
	// Name labels the store in failure messages, for example "azblob".
	Name string
	// NewStashURL returns the URL of a fresh, empty store (its own
	// directory, prefix or container) that the queue can open through
	// stash.DefaultURLMux: the store's package imported and its
	// credentials in the environment. Register clean-up with t.Cleanup.
	NewStashURL func(t testing.TB) string
}

// RunStash runs the suite's Stash check on the backend h with the store s
// instead of the directory store Run uses: a task of several MiB
// round-trips whole through the store, and its object exists only while
// the task is queued. Give h a backend whose message limit is below the
// task (a URL with max_message_bytes=65536, say), or the check only
// verifies that the store is left alone.
func RunStash(t *testing.T, h Harness, s StashHarness) {
	t.Helper()
	if h.NewQueueURL == nil || s.NewStashURL == nil {
		t.Fatal("conformance: RunStash needs Harness.NewQueueURL and StashHarness.NewStashURL")
	}
	t.Run("Stash/"+s.Name, func(t *testing.T) {
		confsuite.CheckStashAt(confsuite.NewC(t, h.suite(), func() string { return h.NewQueueURL(t) }), s.NewStashURL(t))
	})
}

// RawPusher returns a Harness.PushRaw that opens the queue through the
// backend's own opener and pushes body as one message, unchanged, under a
// random message ID.
func RawPusher(o driver.Opener) func(ctx context.Context, rawURL string, body []byte) error {
	return confsuite.RawPusher(o)
}

// Names returns the names of the checks in the order they run.
func Names() []string { return confsuite.Names() }

// Status is the outcome of one check run by RunLive.
type Status = confsuite.Status

// The outcomes.
const (
	Passed  = confsuite.Passed
	Failed  = confsuite.Failed
	Skipped = confsuite.Skipped
)

// Result is the outcome of one check run by RunLive: its Name, Status,
// Reason (the first failure, or why it was skipped), every message, and
// how long it took.
type Result = confsuite.Result

// RunLive runs every check against live queues outside `go test`, as the
// CLI's `jobq QUEUE conformance` does, and returns one Result per check in
// the order of Names. Each check gets its own scratch queue from
// h.NewLiveQueueURL (build one with ScratchQueues); after the check the
// runner clears it and purges its dead letters, but does not delete it.
// Checks run four at a time unless h.Serial. h.NewQueueURL is not used;
// without h.PushRaw the Poison check is skipped.
func RunLive(ctx context.Context, h Harness) []Result { return confsuite.RunLive(ctx, h.suite()) }

// LiveHarness returns the Harness for RunLive on the queue named by
// queueURL: scratch queues derived from it (ScratchQueues) and raw pushes
// through the backend's registered opener. The backend must be registered.
func LiveHarness(queueURL string) (Harness, error) {
	sh, err := confsuite.LiveHarness(queueURL)
	if err != nil {
		return Harness{}, err
	}
	return Harness{Name: sh.Name, PushRaw: sh.PushRaw, NewLiveQueueURL: sh.NewLiveQueueURL}, nil
}

// ScratchQueues returns a function that makes fresh scratch queue URLs
// next to queueURL: same backend, account and settings, with the queue
// name replaced by NAME-conf-RUN-N.
func ScratchQueues(queueURL string) (func(ctx context.Context) (string, error), error) {
	return confsuite.ScratchQueues(queueURL)
}

// WriteTable writes rs as a pass/fail table with a summary line; verbose
// adds every check's messages.
func WriteTable(w io.Writer, rs []Result, verbose bool) error {
	return confsuite.WriteTable(w, rs, verbose)
}

// AllPassed reports whether no check failed.
func AllPassed(rs []Result) bool { return confsuite.AllPassed(rs) }
