package confsuite

import (
	"context"
	"crypto/rand"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
)

// Harness is what a backend supplies to run the shared suite against it:
// conformance.Harness without the fresh-queue function, which each runner
// supplies its own way (NewC).
type Harness struct {
	// Name labels the backend in failure messages, for example "postgres".
	Name string
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
	// ExportRecords scales the ExportResults check down from 100,000
	// records, for engines (emulators) too slow to store that many; zero
	// keeps 100,000.
	ExportRecords int
	// Serial runs the checks one after another instead of in parallel, for
	// engines that cannot take the load or share one queue between checks.
	Serial bool
	// BulkTasks is how many tasks the bulk checks (BulkCancelByFilter,
	// BulkRequeueByFilter) use where bulk-actions is native, at most
	// how many PurgeRecordsByFilter runs, and at most how wide
	// DependencyFanOutFanIn fans out (1,000). Zero means
	// 10,000. A harness on an emulator that settles messages slowly may
	// lower it, which the checks log; a real engine should keep the
	// default. (Where bulk-actions is emulated the checks use the window
	// the backend declares.)
	BulkTasks int
	// NewLiveQueueURL returns the URL of a fresh scratch queue for RunLive.
	// ScratchQueues builds one from a user's queue URL.
	NewLiveQueueURL func(ctx context.Context) (string, error)

	// NewDriver, when set, makes the suite open its queues as driver
	// values (through jobq.New) rather than URLs: it returns a new driver
	// for the queue named queue, a fresh name (QueueName) per check; a
	// second call with the same name returns another handle on the same
	// queue. The suite closes every driver it gets. PushRaw and
	// Corruptions are then given the queue name instead of a URL, and
	// without PushRaw the suite pushes raw bodies through NewDriver.
	NewDriver func(ctx context.Context, queue string) (driver.Driver, error)
	// As lists pointers to the types the driver's As method documents
	// (for example new(*sql.DB)): the As check asks for each and expects
	// it filled.
	As []any
}

// QueueName returns a fresh queue name for a check run through
// Harness.NewDriver: "conf-" and 16 lowercase letters and digits, which
// every engine's naming rules accept.
func QueueName() string { return "conf-" + strings.ToLower(rand.Text()[:16]) }

// byDriver reports whether the suite opens queues as driver values.
func (h Harness) byDriver() bool { return h.NewDriver != nil }

// Corruption is one way a stored message can be damaged.
type Corruption struct {
	// Name says what is damaged, for example "delivery count is not a
	// number".
	Name string
	// Write stores one message with body on the queue at url, damaged so,
	// writing straight into the engine (bypassing jobq). The body is a
	// valid task, so only the damage can keep it from being delivered.
	Write func(ctx context.Context, url string, body []byte) error
}

// visibility is the lease for expiry checks.
func (h Harness) visibility() time.Duration {
	if h.Visibility > 0 {
		return h.Visibility
	}
	return time.Second
}
