package conformance

import (
	"testing"
	"time"
)

// Harness is what a backend supplies to run the shared suite against it.
type Harness struct {
	// Name labels the backend in failure messages, for example "postgres".
	Name string
	// NewQueueURL returns the URL of a fresh, empty queue that no other test
	// uses (a unique queue name, key prefix or schema). The suite opens it
	// with jobq.Open, so the backend must be registered (blank-import it).
	// Register any clean-up with t.Cleanup.
	NewQueueURL func(t testing.TB) string
	// Visibility is the short lease the suite uses for expiry tests. Zero
	// means one second. Backends whose lease is a property of the queue
	// (Service Bus lock duration) set it to that duration.
	Visibility time.Duration
	// MaxMessageBytes, when non-zero, is the size limit the suite expects
	// the opened queue to enforce (for backends whose URL can lower it).
	MaxMessageBytes int
}
