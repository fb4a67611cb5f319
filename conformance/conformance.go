// Package conformance is jobq's shared backend test suite. Every backend's
// TestConformance runs it, and third-party drivers can too. A harness
// hands the suite driver values, as a program that builds its driver and
// calls jobq.New does:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Harness{
//			Name: "mybackend",
//			NewDriver: func(ctx context.Context, t testing.TB, queue string) (driver.Driver, error) {
//				return mybackend.New(ctx, client, mybackend.Options{Queue: queue})
//			},
//			As: []any{new(*mybackend.Client)},
//		})
//	}
//
// or queue URLs, for a backend registered with jobq.Register:
//
//	conformance.Run(t, conformance.Harness{
//		Name:        "mybackend",
//		NewQueueURL: func(t testing.TB) string { return "my://host/" + uniqueName(t) },
//		PushRaw:     conformance.RawPusher(myopener.URLOpener{}),
//	})
//
// The suite works through the portable API only (jobq.New or jobq.Open,
// and the Queue and Envelope methods), so it tests the driver and the
// portable layer together, as users meet them. It checks that every
// capability the backend declares is true (and backed by the optional
// interface of package driver it needs), that the degraded ones degrade as
// declared and warn once, and the semantics every backend keeps:
// at-least-once delivery, fenced leases, visibility, poison messages,
// limits. A check that needs a feature the backend declares unsupported
// checks the declared fallback instead, and one that needs an optional
// interface the driver lacks is skipped with a message naming it.
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

// Harness is what a backend supplies to run the shared suite against it:
// NewDriver, NewQueueURL or both.
type Harness struct {
	// Name labels the backend in failure messages, for example "postgres".
	Name string
	// NewDriver returns a new driver for the queue named queue. The suite
	// makes a fresh name for each check ("conf-" and 16 lowercase letters
	// and digits; map it as the engine needs) and may call NewDriver again
	// with the same name for a second handle, which must reach the same
	// queue. The suite wraps each driver with jobq.New and closes it; t is
	// the check's, for any other clean-up (t.Cleanup). With NewDriver,
	// PushRaw is optional (raw bodies are pushed through a driver of
	// NewDriver) and PushRaw and Corruptions get the queue name where
	// they would get a URL.
	NewDriver func(ctx context.Context, t testing.TB, queue string) (driver.Driver, error)
	// NewQueueURL returns the URL of a fresh, empty queue that no other test
	// uses (a unique queue name, key prefix or schema). The suite opens it
	// with jobq.Open, so the backend must be registered (blank-import it).
	// Register any clean-up with t.Cleanup. Required without NewDriver;
	// with it, only the UnknownParameter check (of the URL opener) uses
	// it, and skips without it.
	NewQueueURL func(t testing.TB) string
	// As lists pointers to the types the driver's As method documents,
	// such as new(*sql.DB): the As check expects each filled. Without
	// them As is only checked to refuse types it does not know.
	As []any
	// Visibility is the short lease the suite uses for expiry tests. Zero
	// means one second. Backends whose lease is a property of the queue
	// (Service Bus lock duration) set it to that duration.
	Visibility time.Duration
	// MaxMessageBytes, when non-zero, is the size limit the suite expects
	// the opened queue to enforce (for backends whose URL can lower it).
	MaxMessageBytes int
	// PushRaw, when set, stores body unchanged as one message on the queue
	// at url (the queue's name, with NewDriver), bypassing the portable
	// layer's encoding, so that the suite can check that an undecodable
	// (poison) message is dead-lettered rather than returned or left to
	// wedge the queue. Without it the poison check is skipped, unless
	// NewDriver is set. RawPusher builds one from the backend's
	// driver.Opener.
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
	// BulkTasks is how many tasks the bulk checks (BulkCancelByFilter,
	// BulkRequeueByFilter) use where bulk-actions is native. Zero means
	// 10,000. A harness on an emulator that settles messages slowly may
	// lower it, which the checks log; a real engine should keep the
	// default.
	BulkTasks int
	// ExportRecords scales the ExportResults check down from 100,000
	// records, for engines (emulators) too slow to store that many; zero
	// keeps 100,000.
	ExportRecords int
	// NewLiveQueueURL returns the URL of a fresh scratch queue for RunLive,
	// which has no testing.TB to pass to NewQueueURL. ScratchQueues builds
	// one from a user's queue URL.
	NewLiveQueueURL func(ctx context.Context) (string, error)
}

// Corruption is one way a stored message can be damaged: Name says what
// is damaged, Write stores one message with a valid body on the queue at a
// URL (the queue's name, for a Harness with NewDriver), damaged so,
// straight into the engine.
type Corruption = confsuite.Corruption

// T is the part of *testing.T the checks use.
type T = confsuite.T

// suite is h for the checks run on t.
func (h Harness) suite(t testing.TB) confsuite.Harness {
	sh := confsuite.Harness{Name: h.Name, Visibility: h.Visibility, MaxMessageBytes: h.MaxMessageBytes,
		PushRaw: h.PushRaw, Corruptions: h.Corruptions, Serial: h.Serial, NewLiveQueueURL: h.NewLiveQueueURL, As: h.As, BulkTasks: h.BulkTasks,
		ExportRecords: h.ExportRecords}
	if h.NewDriver != nil {
		sh.NewDriver = func(ctx context.Context, queue string) (driver.Driver, error) { return h.NewDriver(ctx, t, queue) }
	}
	return sh
}

// newURL is h.NewQueueURL for t, or nil.
func (h Harness) newURL(t testing.TB) func() string {
	if h.NewQueueURL == nil {
		return nil
	}
	return func() string { return h.NewQueueURL(t) }
}

// Run runs every check as a subtest of t, in parallel unless h.Serial.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewQueueURL == nil && h.NewDriver == nil {
		t.Fatal("conformance: set Harness.NewDriver (a new driver for a queue name) or Harness.NewQueueURL (a fresh queue URL per call)")
	}
	for _, ck := range confsuite.Checks() {
		t.Run(ck.Name, func(t *testing.T) {
			if !h.Serial {
				t.Parallel()
			}
			ck.Run(confsuite.NewC(t, h.suite(t), h.newURL(t)))
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
	if (h.NewQueueURL == nil && h.NewDriver == nil) || s.NewStashURL == nil {
		t.Fatal("conformance: RunStash needs Harness.NewDriver or Harness.NewQueueURL, and StashHarness.NewStashURL")
	}
	t.Run("Stash/"+s.Name, func(t *testing.T) {
		confsuite.CheckStashAt(confsuite.NewC(t, h.suite(t), h.newURL(t)), s.NewStashURL(t))
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
// Checks run four at a time unless h.Serial. h.NewQueueURL and
// h.NewDriver are not used; without h.PushRaw the Poison check is skipped.
func RunLive(ctx context.Context, h Harness) []Result { return confsuite.RunLive(ctx, h.suite(nil)) }

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
