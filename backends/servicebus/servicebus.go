// Package servicebus is the jobq backend for Azure Service Bus queues, on the
// azservicebus SDK (AMQP).
//
// Importing the package registers the schemes "sb" (ai4s-jobq's form) and
// "servicebus":
//
//	sb://NAMESPACE/QUEUE[?param=value...]
//	servicebus://NAMESPACE/QUEUE[?param=value...]
//
// NAMESPACE is short for NAMESPACE.servicebus.windows.net; a name with a dot
// is used as the host as it is.
//
// # From a client
//
// A program that already holds an *azservicebus.Client (and, optionally,
// an *admin.Client) passes them to New and hands the driver to jobq.New;
// Options replace the URL parameters. The driver never closes the clients
// it was given.
//
// # Authentication (URLs)
//
// A Service Bus connection string (Endpoint=sb://...) wins when there is
// one: the ConnectionString of the jobq open options (the CLI's
// --conn-str), else URLOpener.ConnectionString, else
// $JOBQ_SERVICEBUS_CONNECTION_STRING, else $JOBQ_CONNECTION_STRING. The
// URL's namespace is then ignored. "UseDevelopmentEmulator=true" connection strings
// (the official emulator, or emulators/servicebus) connect without TLS.
// Without a connection string the driver uses Microsoft Entra ID through
// azidentity (URLOpener.Credential, else DefaultAzureCredential). Keys never
// appear in logs or errors.
//
// # Mapping
//
// Messages are received in peek-lock mode; a lease is the message's lock,
// whose duration is the queue's LockDuration (Receive's and Renew's
// visibility cannot change it; Lease.Expiry is the lock's real expiry).
// Renew is RenewMessageLock, Complete is CompleteMessage, a retry after a
// failure (Envelope.Fail) is AbandonMessage, DeadLetter is
// DeadLetterMessage with the reason and detail. Requeue schedules a copy of
// the message at the delay and completes the original, so that it uses up
// neither a retry nor one of the broker's deliveries (requeue=redeliver
// abandons instead). A push with NotBefore is a scheduled message. The
// message ID is the task ID, so a queue with duplicate detection drops a
// re-pushed task. Counts come from the admin (ATOM) API.
//
// Service Bus cannot delay an abandon, nor change a message's body: see the
// Capabilities Fallback texts and docs/backends/servicebus.md.
//
// # URL parameters
//
//	requeue=schedule   Requeue(delay) schedules a copy at the delay and completes
//	                   the original (default); requeue=redeliver abandons it:
//	                   visible at once, and the delivery counts
//	admin=HOST:PORT    plain-HTTP admin endpoint (emulators); for an emulator
//	                   connection string it defaults to the endpoint host, port 5300
//	create=true        create the queue when it is missing, with:
//	lock_duration=1m   its lock duration (5s to 5m)
//	max_delivery_count=100  its max delivery count
//	dedup_window=10m   its duplicate-detection history (0 turns detection off)
//	retries=3          SDK retries of transient errors and lost connections
//	retry_delay=500ms  first retry backoff, growing exponentially up to 30s
//	results=CONTAINER  the Azure blob container of the result records:
//	                   azblob://ACCOUNT/CONTAINER (a storage connection string
//	                   for ACCOUNT in $JOBQ_CONNECTION_STRING or
//	                   $AZURE_STORAGE_CONNECTION_STRING, else Entra ID) or
//	                   https://ACCOUNT.blob.core.windows.net/CONTAINER?SAS (URL-encoded)
//
// # Result records
//
// Service Bus has no place for result records (Queue.Result, Queue.Wait,
// Admin.Cancel): they are blobs in the container results= names (or
// Options.Results), created on first use. Without one, those calls fail
// with Unimplemented. A cancelled queued or scheduled task is dropped by
// the worker that next receives it.
//
// # Escape hatch
//
// Queue.As accepts a **azservicebus.Client, a **azservicebus.Sender, a
// **azservicebus.Receiver (the queue's peek-lock receiver) and a
// **admin.Client.
package servicebus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/blobresults"
)

// The URL schemes this backend registers.
const (
	Scheme     = "sb"
	LongScheme = "servicebus"
)

// Limits of Azure Service Bus (standard tier).
const (
	// MaxMessageBytes is the largest task body jobq sends: the standard
	// tier's 256 KiB message limit less room for properties and annotations.
	MaxMessageBytes = 250 * 1024
	// MaxReceiveBatch is the most messages one Receive asks for.
	MaxReceiveBatch = 256
	// MaxLockDuration is the longest lock duration a queue can have.
	MaxLockDuration = 5 * time.Minute
	// MinLockDuration is the shortest lock duration a queue can have.
	MinLockDuration = 5 * time.Second
	// MaxBrokerMessageBytes is the standard tier's limit on a whole
	// message: body, properties and annotations, also when it is
	// dead-lettered with its reason and description.
	MaxBrokerMessageBytes = 256 * 1024
	// MaxDeadLetterTextLen is the most characters Azure's SDKs accept in a
	// dead letter's reason and in its description.
	MaxDeadLetterTextLen = 4096
	// AzureMaxDeliveryCount is the max delivery count Azure gives a queue
	// created without one (ai4s-jobq's queues have it).
	AzureMaxDeliveryCount = 10
)

// Environment variables read for a connection string, in order.
const (
	EnvConnectionString = "JOBQ_SERVICEBUS_CONNECTION_STRING"
	// EnvGenericConnectionString is used when it names a Service Bus
	// endpoint (Endpoint=sb://...).
	EnvGenericConnectionString = "JOBQ_CONNECTION_STRING"
)

// Application properties jobq sets on its messages.
const (
	// PropTaskID carries the task ID, also on copies whose MessageID differs.
	PropTaskID = "jobq-task-id"
	// PropPriorDeliveries carries the deliveries a message had before it was
	// copied by a requeue, so that the delivery count the retry budget is
	// computed from survives the copy.
	PropPriorDeliveries = "jobq-prior-deliveries"
	// PropUncountedDeliveries carries how many of those deliveries ended in
	// a requeue that must not use up a retry (a gate miss, a busy key, a
	// stopping worker).
	PropUncountedDeliveries = "jobq-uncounted-deliveries"
	// PropDeadAt is when jobq dead-lettered a message (the broker's own
	// dead-lettering, at the max delivery count, does not set it).
	PropDeadAt = "jobq-dead-at"
)

// Requeue modes (the requeue= URL parameter).
const (
	RequeueRedeliver = "redeliver"
	RequeueSchedule  = "schedule"
)

// DefaultOpener is the opener registered for both schemes. Programs may set
// its fields before opening queues.
var DefaultOpener = &URLOpener{}

func init() {
	if err := jobq.Register(Scheme, DefaultOpener); err != nil {
		panic(err)
	}
	if err := jobq.Register(LongScheme, DefaultOpener); err != nil {
		panic(err)
	}
}

// URLOpener opens sb:// and servicebus:// URLs. The zero value reads
// credentials from the environment (see the package documentation).
type URLOpener struct {
	// ConnectionString, when set, is used instead of the environment's.
	ConnectionString string
	// Credential, when set, authenticates URLs without a connection string
	// instead of DefaultAzureCredential.
	Credential azcore.TokenCredential
}

// String describes the opener for debugging without credentials.
func (o *URLOpener) String() string {
	return fmt.Sprintf("servicebus.URLOpener{connection string set: %t, credential set: %t}", o.ConnectionString != "", o.Credential != nil)
}

// Capabilities returns what a Service Bus queue declares with the default
// parameters.
func (o *URLOpener) Capabilities() driver.Capabilities {
	return capabilities(RequeueSchedule, true)
}

func capabilities(requeue string, dedup bool) driver.Capabilities {
	delayed := driver.Support{Level: driver.Emulated,
		Fallback: "Service Bus cannot delay an abandon: Requeue(delay) schedules a copy at the delay (a new message ID), then completes the original; if the original's fate is unclear (a lost acknowledgement) the copy stays and the task may run twice, never zero times"}
	putBack := "a task put back because its key is busy is requeued as a copy and uses up neither a retry nor a broker delivery"
	retry := "a message's body cannot change: the retry budget is counted from the delivery count (a lock that expires uses up a retry; requeues do not)"
	if requeue == RequeueRedeliver {
		delayed.Fallback = "Service Bus cannot delay an abandon: requeue=redeliver makes Requeue(delay) an abandon, visible at once, which uses up a retry and one of the queue's max delivery count (remove requeue=redeliver to schedule a copy instead)"
		putBack = "a task put back because its key is busy is abandoned (requeue=redeliver): that uses up a retry and one of the queue's max delivery count"
		retry = "a message's body cannot change: the retry budget is counted from the delivery count, so a lock that expires and every requeue (requeue=redeliver) use up a retry"
	}
	dd := driver.Support{Level: driver.Emulated,
		Fallback: "the broker's duplicate detection drops a task whose ID was pushed within the queue's detection window (even if it already completed), but Service Bus does not report it: PushResult.Duplicate is always false"}
	if !dedup {
		dd = driver.Support{Level: driver.Unsupported,
			Fallback: "the queue has duplicate detection off: pushing a task ID again stores a second message (create the queue with duplicate detection to drop them)"}
	}
	return driver.Capabilities{
		Features: map[driver.Feature]driver.Support{
			driver.DelayedRequeue: delayed,
			driver.DelayedPush:    {Level: driver.Native},
			driver.LeaseRenewal:   {Level: driver.Native},
			driver.DeadLetter:     {Level: driver.Native},
			driver.Priority:       {Level: driver.Unsupported, Fallback: "priority is ignored; Service Bus delivers in enqueue order"},
			driver.Peek:           {Level: driver.Native},
			driver.ExactCount: {Level: driver.Unsupported,
				Fallback: "counts come from the admin API: they can lag by seconds, Ready includes locked (in-flight) messages, and in-flight is not known"},
			driver.Dedup:         dd,
			driver.InPlaceUpdate: {Level: driver.Unsupported, Fallback: retry},
			driver.ConcurrencyLimit: {Level: driver.Emulated,
				Fallback: "each worker enforces concurrency caps for its own process only (policies are kept in the queue's user metadata): N workers may run up to N times the cap; " + putBack},
			driver.RateLimit: {Level: driver.Emulated,
				Fallback: "each worker enforces rate limits for its own process only (policies are kept in the queue's user metadata): N workers may start up to N times the rate; " + strings.Replace(putBack, "its key is busy", "its key is over its rate", 1)},
			driver.TransactionalPush: {Level: driver.Unsupported,
				Fallback: "Service Bus cannot join an application's database transaction; push after the commit"},
			driver.Results:        {Level: driver.Unsupported, Fallback: noResults},
			driver.Cancel:         {Level: driver.Unsupported, Fallback: "cancel needs result records, so a results= container (see results)"},
			driver.WorkerRegistry: {Level: driver.Unsupported, Fallback: "the worker registry needs the result container: " + noResults},
			driver.Schedules:      {Level: driver.Emulated, Fallback: schedulesFallback(dedup)},
			driver.ResultHistory:  {Level: driver.Unsupported, Fallback: "the history is added up from the result records, so it needs a results= container (with one it is emulated, as on azqueue): " + noResults},
			driver.Groups:         {Level: driver.Unsupported, Fallback: "a Service Bus queue keeps no group counts yet: push without a group"},
			driver.Dependencies:   {Level: driver.Unsupported, Fallback: "held tasks (dependencies and group steps) are kept in the result container, so they need a results= container (with one they are emulated, as on azqueue): " + noResults},
			driver.Pause: {Level: driver.Emulated,
				Fallback: "pauses are kept in the queue's user metadata, which the admin API serves with a lag: every worker stops (or starts again) within about 2s plus that lag (seconds), and a worker may take one more task per receive, which it puts back unrun"},
			driver.BulkActions: {Level: driver.Native},
		},
		MaxMessageBytes:    MaxMessageBytes,
		MaxReceiveBatch:    MaxReceiveBatch,
		SharedWithAI4SJobq: true,
		// CompleteMessage settles one message per disposition.
		CompleteBatch: 1,
	}
}

// Driver is one open Service Bus queue.
type Driver struct {
	queue   string
	where   string // namespace host, for messages
	cfg     config
	caps    driver.Capabilities
	log     *slog.Logger
	client  *azservicebus.Client
	admin   *admin.Client // nil when no admin endpoint can be reached
	sender  *azservicebus.Sender
	recv    *azservicebus.Receiver // peek-lock on the queue
	dead    *azservicebus.Receiver // peek-lock on the dead-letter sub-queue
	recvSem chan struct{}          // ReceiveMessages cannot run concurrently
	deadSem chan struct{}
	clock   brokerClock
	// maxDelivery is the queue's max delivery count: an abandon that
	// reaches it dead-letters the message.
	maxDelivery int
	// warnCarriedOver warns, once, that a retry was carried over to a copy
	// because of the max delivery count.
	warnCarriedOver sync.Once

	// ownsClient is set when the URL opener built client: Close closes
	// it. A driver from New closes only the links it opened.
	ownsClient bool

	// deadBatch is how many dead letters a scan receives at once (0:
	// MaxReceiveBatch); tests lower it.
	deadBatch int

	// rec keeps the result records (driver.ResultStore).
	rec blobresults.Records

	closing *driver.Closing
}

// Options configure a Driver built by New. Only Queue is required; the
// zero value of every other field means its default.
type Options struct {
	// Queue names the queue (letters, digits, '.', '-', '_', '/'). Required.
	Queue string
	// Requeue is how Requeue(delay) puts a task back: RequeueSchedule
	// (default) schedules a copy at the delay and completes the original,
	// so it uses up neither a retry nor a broker delivery;
	// RequeueRedeliver abandons it, visible at once, and the delivery
	// counts.
	Requeue string
	// Create creates the queue when it is missing, with LockDuration,
	// MaxDeliveryCount and DedupWindow. Default false. It needs the admin
	// client.
	Create bool
	// LockDuration of a created queue, 5s to 5m. Default
	// DefaultLockDuration (1m).
	LockDuration time.Duration
	// MaxDeliveryCount of a created queue. Default DefaultMaxDeliveryCount
	// (100).
	MaxDeliveryCount int
	// DedupWindow is a created queue's duplicate-detection history, 20s to
	// 7 days; negative turns detection off. Default DefaultDedupWindow
	// (10m).
	DedupWindow time.Duration
	// Namespace names the namespace in messages and logs only (the client
	// already knows where it connects). Default "servicebus".
	Namespace string
	// Results is the client of the blob container that keeps the queue's
	// result records (Queue.Result, Queue.Wait, Admin.Cancel), built with
	// the program's own credentials. Default nil: the queue keeps no
	// results, and those calls fail with Unimplemented.
	Results *container.Client
	// Logger receives the driver's warnings and debug logs. Default
	// slog.Default().
	Logger *slog.Logger
}

// config validates o and applies its defaults.
func (o Options) config() (config, error) {
	c := config{
		queue: o.Queue, requeue: o.Requeue, create: o.Create,
		lockDuration: o.LockDuration, maxDelivery: o.MaxDeliveryCount, dedupWindow: o.DedupWindow,
	}
	if c.requeue == "" {
		c.requeue = RequeueSchedule
	}
	if c.lockDuration == 0 {
		c.lockDuration = DefaultLockDuration
	}
	if c.maxDelivery == 0 {
		c.maxDelivery = DefaultMaxDeliveryCount
	}
	switch {
	case c.dedupWindow == 0:
		c.dedupWindow = DefaultDedupWindow
	case c.dedupWindow < 0:
		c.dedupWindow = 0
	}
	if err := checkQueueName(c.queue); err != nil {
		return c, err
	}
	switch {
	case c.requeue != RequeueRedeliver && c.requeue != RequeueSchedule:
		return c, driver.Errorf(errcode.InvalidArgument, "servicebus: Options.Requeue=%q must be %q or %q", c.requeue, RequeueSchedule, RequeueRedeliver)
	case c.lockDuration < MinLockDuration || c.lockDuration > MaxLockDuration:
		return c, driver.Errorf(errcode.InvalidArgument, "servicebus: Options.LockDuration=%v must be between %v and %v, as Azure allows", c.lockDuration, MinLockDuration, MaxLockDuration)
	case c.maxDelivery < 1 || c.maxDelivery > math.MaxInt32:
		return c, driver.Errorf(errcode.InvalidArgument, "servicebus: Options.MaxDeliveryCount=%d must be at least 1", c.maxDelivery)
	case c.dedupWindow != 0 && (c.dedupWindow < 20*time.Second || c.dedupWindow > 7*24*time.Hour):
		return c, driver.Errorf(errcode.InvalidArgument, "servicebus: Options.DedupWindow=%v must be negative (off) or between 20s and 7 days", c.dedupWindow)
	}
	return c, nil
}

// New returns the queue opts.Queue reached through client, which the
// program built and keeps: the driver opens its own sender and receivers
// on it and closes only those, never the client.
//
// adminClient, when not nil, serves the admin (ATOM) API: it reads the
// queue's lock duration, max delivery count and duplicate detection,
// creates the queue when opts.Create, keeps queue policies, and gives
// Stats its counts. It may be nil (credentials without Manage rights):
// the driver then assumes duplicate detection on and a max delivery count
// of AzureMaxDeliveryCount, Stats and the policy commands fail with
// Unimplemented, and opts.Create is refused.
func New(ctx context.Context, client *azservicebus.Client, adminClient *admin.Client, opts Options) (*Driver, error) {
	if client == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "servicebus.New: the azservicebus.Client is nil: build one with azservicebus.NewClient or NewClientFromConnectionString")
	}
	cfg, err := opts.config()
	if err != nil {
		return nil, err
	}
	if cfg.create && adminClient == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "servicebus.New: Options.Create needs the admin client: pass an *admin.Client, or create the queue beforehand")
	}
	where := opts.Namespace
	if where == "" {
		where = "servicebus"
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var store *blobresults.Store
	if opts.Results != nil {
		store = blobresults.FromClient(opts.Results)
	}
	return open(ctx, cfg, client, adminClient, where, log, false, store)
}

// Open opens the queue named by u: a thin adapter that builds the clients
// from the URL and the credentials (see the package documentation) and
// opens the queue as New does. The driver owns these clients and closes
// them.
func (o *URLOpener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	cfg, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	cfg.createSkipped = opts.ReadOnly && cfg.create
	cfg.create = cfg.create && !opts.ReadOnly // a read creates nothing
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	var store *blobresults.Store
	if cfg.results != "" {
		if store, err = blobresults.Open(cfg.results, o.Credential, nil); err != nil {
			return nil, err
		}
	}
	conn, err := o.connect(cfg, opts.ConnectionString, log)
	if err != nil {
		return nil, err
	}
	return open(ctx, cfg, conn.client, conn.admin, conn.where, log, true, store)
}

// open builds the driver on client and adm; with owns it closes the client
// on failure and on Close. store keeps the result records (nil: none).
func open(ctx context.Context, cfg config, client *azservicebus.Client, adm *admin.Client, where string, log *slog.Logger, owns bool, store *blobresults.Store) (*Driver, error) {
	d := &Driver{
		queue: cfg.queue, where: where, cfg: cfg, log: log,
		client: client, admin: adm, ownsClient: owns,
		recvSem: make(chan struct{}, 1), deadSem: make(chan struct{}, 1),
		closing: driver.NewClosing(fmt.Sprintf("servicebus queue %q", cfg.queue)),
	}
	d.maxDelivery = AzureMaxDeliveryCount // until the queue's settings say otherwise
	dedup, err := d.checkQueue(ctx)
	if err != nil {
		_ = d.release(context.WithoutCancel(ctx))
		return nil, err
	}
	d.caps = capabilities(cfg.requeue, dedup)
	d.setResults(store)
	d.setWorkers()
	if adm == nil {
		d.caps.Features[driver.ExactCount] = driver.Support{Level: driver.Unsupported,
			Fallback: "no admin client was given: counts (Stats) are not available"}
	}
	if d.sender, err = d.client.NewSender(cfg.queue, nil); err == nil {
		if d.recv, err = d.client.NewReceiverForQueue(cfg.queue, nil); err == nil {
			d.dead, err = d.client.NewReceiverForQueue(cfg.queue, &azservicebus.ReceiverOptions{SubQueue: azservicebus.SubQueueDeadLetter})
		}
	}
	if err != nil {
		_ = d.release(context.WithoutCancel(ctx))
		return nil, d.fail("open", err)
	}
	return d, nil
}

// checkQueue reads the queue's settings through the admin API (creating the
// queue when create=true), logs the settings that change jobq's behaviour,
// and reports whether duplicate detection is on. Without admin rights it
// logs why and assumes the documented settings.
func (d *Driver) checkQueue(ctx context.Context) (dedup bool, err error) {
	if d.admin == nil {
		return true, nil
	}
	got, err := d.admin.GetQueue(ctx, d.queue, nil)
	if err != nil {
		if errcode.Of(d.fail("open", err)) == errcode.PermissionDenied {
			d.log.Warn("servicebus: cannot read the queue's settings (the credentials lack Manage rights); Stats will fail",
				"queue", d.queue, "namespace", d.where)
			return true, nil
		}
		return false, d.fail("open", err)
	}
	if got == nil {
		if d.cfg.createSkipped {
			return false, driver.Errorf(errcode.NotFound,
				"Service Bus queue %q does not exist in %s: this command only reads, so create=true does not create it; push to it, or run a worker, to create it", d.queue, d.where)
		}
		if !d.cfg.create {
			return false, driver.Errorf(errcode.NotFound,
				"Service Bus queue %q does not exist in %s: create it (see docs/backends/servicebus.md) or add create=true to the URL", d.queue, d.where)
		}
		if err := d.createQueue(ctx); err != nil {
			return false, err
		}
		d.clock.lock, d.maxDelivery = d.cfg.lockDuration, d.cfg.maxDelivery
		d.warnMaxDelivery()
		return d.cfg.dedupWindow > 0, nil
	}
	p := got.QueueProperties
	if p.RequiresSession != nil && *p.RequiresSession {
		return false, driver.Errorf(errcode.FailedPrecondition,
			"Service Bus queue %q requires sessions, which jobq does not use: create the queue without sessions", d.queue)
	}
	if p.DefaultMessageTimeToLive != nil {
		if ttl, err := parseISODuration(*p.DefaultMessageTimeToLive); err == nil && ttl < 365*24*time.Hour {
			d.log.Warn("servicebus: the queue expires messages; tasks older than its default time-to-live are lost silently",
				"queue", d.queue, "default_message_ttl", ttl.String())
		}
	}
	if p.LockDuration != nil {
		if l, err := parseISODuration(*p.LockDuration); err == nil {
			d.clock.lock = l
		}
	}
	if p.MaxDeliveryCount != nil {
		d.maxDelivery = int(*p.MaxDeliveryCount)
		d.warnMaxDelivery()
	}
	return p.RequiresDuplicateDetection != nil && *p.RequiresDuplicateDetection, nil
}

// warnMaxDelivery warns when the queue's max delivery count is below
// Azure's default, so that Service Bus may dead-letter tasks before jobq's
// own retry budget would: jobq keeps its requeues and retries off the
// count (a retry that would reach it is carried over to a copy), but lock
// expiries, requeue=redeliver and ai4s-jobq workers sharing the queue count.
func (d *Driver) warnMaxDelivery() {
	if d.maxDelivery >= AzureMaxDeliveryCount {
		return
	}
	what := "tasks whose lock expires that often (crashed or hung workers) are dead-lettered by Service Bus (reason MaxDeliveryCountExceeded)"
	if d.cfg.requeue == RequeueRedeliver {
		what = "with requeue=redeliver every requeue (a gate miss, a busy concurrency key, a rate limit) and every retry uses up one of its deliveries, so a task with num_retries at or above it, or requeued that often, is dead-lettered by Service Bus (reason MaxDeliveryCountExceeded) before it ran or spent its retries"
	}
	d.log.Warn("servicebus: the queue's max delivery count is low: "+what+"; raise it (az servicebus queue update --max-delivery-count 100)",
		"queue", d.queue, "max_delivery_count", d.maxDelivery, "requeue", d.cfg.requeue)
}

func (d *Driver) createQueue(ctx context.Context) error {
	lock := isoDuration(d.cfg.lockDuration)
	maxDel := int32(d.cfg.maxDelivery)
	dedup := d.cfg.dedupWindow > 0
	props := &admin.QueueProperties{
		LockDuration:               &lock,
		MaxDeliveryCount:           &maxDel,
		RequiresDuplicateDetection: &dedup,
	}
	if dedup {
		w := isoDuration(d.cfg.dedupWindow)
		props.DuplicateDetectionHistoryTimeWindow = &w
	}
	_, err := d.admin.CreateQueue(ctx, d.queue, &admin.CreateQueueOptions{Properties: props})
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode == 409 {
		return nil // created concurrently by another process
	}
	if err != nil {
		return d.fail("create queue", err)
	}
	d.log.Info("servicebus: created queue", "queue", d.queue, "namespace", d.where,
		"lock_duration", d.cfg.lockDuration.String(), "max_delivery_count", d.cfg.maxDelivery, "dedup_window", d.cfg.dedupWindow.String())
	return nil
}

// Capabilities implements driver.Driver.
func (d *Driver) Capabilities() driver.Capabilities { return d.caps }

// As implements driver.Driver; see the package documentation.
func (d *Driver) As(target any) bool {
	switch t := target.(type) {
	case **azservicebus.Client:
		*t = d.client
	case **azservicebus.Sender:
		*t = d.sender
	case **azservicebus.Receiver:
		*t = d.recv
	case **admin.Client:
		if d.admin == nil {
			return false
		}
		*t = d.admin
	default:
		return false
	}
	return true
}

// Close implements driver.Driver.
func (d *Driver) Close() error {
	if !d.closing.Close() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.release(ctx)
}

// release closes what the driver opened: the client when it owns it
// (which closes the links too), else its sender and receivers.
func (d *Driver) release(ctx context.Context) error {
	if d.ownsClient {
		if err := d.client.Close(ctx); err != nil {
			return fmt.Errorf("close Service Bus client: %w", err)
		}
		return nil
	}
	var errs []error
	if d.sender != nil {
		errs = append(errs, d.sender.Close(ctx))
	}
	for _, r := range []*azservicebus.Receiver{d.recv, d.dead} {
		if r != nil {
			errs = append(errs, r.Close(ctx))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close Service Bus links: %w", err)
	}
	return nil
}

// queueURL names the queue in messages.
func (d *Driver) queueURL() string {
	return "sb://" + strings.TrimSuffix(d.where, ".servicebus.windows.net") + "/" + d.queue
}
