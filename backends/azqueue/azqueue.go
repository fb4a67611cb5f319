// Package azqueue is the jobq backend for Azure Storage Queue, the engine
// ai4s-jobq users run today: a jobq worker can take over their queues, and
// jobq and ai4s-jobq producers can share one.
//
// Importing the package registers the scheme "azqueue":
//
//	azqueue://ACCOUNT/QUEUE[?param=value...]
//
// ai4s-jobq's bare form ACCOUNT/QUEUE is accepted too (the CLI
// turns it into the URL above). Dead letters go to the queue QUEUE-failed,
// as in ai4s-jobq.
//
// # From a client
//
// A program that already holds an *azqueue.ServiceClient passes it to New,
// or a credential and the service URL to NewFromCredential, and hands the
// driver to jobq.New; Options replace the URL parameters. The driver never
// closes the client.
//
// # Authentication (URLs)
//
// A connection string, when one is given, wins and the URL's account is
// ignored (as in ai4s-jobq); it comes from the ConnectionString of the
// jobq open options (the CLI's --conn-str), else URLOpener.ConnectionString,
// else $JOBQ_CONNECTION_STRING, else $AZURE_STORAGE_CONNECTION_STRING.
// "UseDevelopmentStorage=true" means the local Azurite emulator on
// 127.0.0.1:10001; an AccountKey that is not valid base64 is reported by
// name (never by value). Without a connection
// string the driver uses Microsoft Entra ID through azidentity:
// URLOpener.Credential if set, else the DefaultAzureCredential chain
// (environment service principal, AKS workload identity, managed identity —
// user-assigned when $AZURE_CLIENT_ID names one —, Azure CLI, Azure
// Developer CLI), followed by the managed identity that
// $DEFAULT_IDENTITY_CLIENT_ID names, when set. Keys and SAS tokens never
// appear in logs or errors.
//
// # URL parameters
//
//	poll_min=50ms     first pause between the dequeues of an idle queue (Storage Queue has no long poll)
//	poll_max=500ms    longest pause; each empty dequeue doubles the pause up to this
//	retries=6         retries of throttled (503 ServerBusy), timed-out (500) and failed requests
//	retry_delay=200ms first retry backoff, doubling up to 30s
//	create=true       create QUEUE and QUEUE-failed on open when they are missing
//	endpoint=URL      queue service URL when not https://ACCOUNT.queue.core.windows.net (Entra ID only: refused with a connection string)
//	results=NAME      blob container of the result records, in the same account (default QUEUE-results)
//
// # Result records
//
// Result records (Queue.Result, Queue.Wait, Admin.Cancel) are blobs in a
// container of the queue's storage account, QUEUE-results unless results=
// names another, created on first use; the credentials must allow Blob
// Storage too. Storage Queue cannot delete a message by task ID, so a
// cancelled queued task is dropped by the worker that next receives it.
//
// # Escape hatch
//
// Queue.As accepts a **azqueue.QueueClient (the SDK's client for the main
// queue) and a *DeadLetterQueue (the client for QUEUE-failed).
package azqueue

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/blobresults"
)

// Scheme is the URL scheme this backend registers.
const Scheme = "azqueue"

// Limits of Azure Storage Queue.
const (
	// MaxMessageBytes is the largest message text the service accepts
	// (64 KiB of UTF-8, measured after jobq's encoding).
	MaxMessageBytes = 64 * 1024
	// MaxVisibility is the longest visibility timeout, and the longest delay
	// of a push or requeue: 7 days.
	MaxVisibility = 7 * 24 * time.Hour
	// MaxBatch is the most messages one dequeue or peek returns.
	MaxBatch = 32
	// FailedSuffix is appended to a queue's name to name its dead-letter
	// queue, as ai4s-jobq does.
	FailedSuffix = "-failed"
)

// Defaults of the URL parameters.
const (
	DefaultPollMin    = 50 * time.Millisecond
	DefaultPollMax    = 500 * time.Millisecond
	DefaultRetries    = 6
	DefaultRetryDelay = 200 * time.Millisecond
)

// Environment variables the URL opener reads for a connection string, in
// order, when the program passes none.
const (
	// EnvConnectionString is jobq's own variable (the CLI's --conn-str
	// defaults to it).
	EnvConnectionString = "JOBQ_CONNECTION_STRING"
	// EnvAzureConnectionString is the Azure SDKs' conventional variable.
	EnvAzureConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
)

// DevelopmentConnectionString is the connection string of the Azurite
// emulator's queue service on 127.0.0.1:10001 with its public development
// account. "UseDevelopmentStorage=true" expands to it.
const DevelopmentConnectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"QueueEndpoint=http://127.0.0.1:10001/devstoreaccount1;"

// DefaultOpener is the opener registered for the azqueue scheme. Programs may
// set its fields before opening queues; a connection string passed with
// the open options (the CLI's --conn-str) takes precedence.
var DefaultOpener = &URLOpener{}

func init() {
	if err := jobq.Register(Scheme, DefaultOpener); err != nil {
		panic(err)
	}
}

// URLOpener opens azqueue:// URLs. The zero value reads credentials from the
// environment (see the package documentation).
type URLOpener struct {
	// ConnectionString, when set, is used instead of the environment's.
	ConnectionString string
	// Credential, when set, authenticates URLs without a connection string
	// instead of the managed identity / DefaultAzureCredential chain.
	Credential azcore.TokenCredential
}

// Capabilities returns what an Azure Storage queue declares.
func (o *URLOpener) Capabilities() driver.Capabilities { return capabilities() }

func capabilities() driver.Capabilities {
	return driver.Capabilities{
		Features: map[driver.Feature]driver.Support{
			driver.DelayedRequeue: {Level: driver.Native},
			driver.DelayedPush:    {Level: driver.Native},
			driver.LeaseRenewal:   {Level: driver.Native},
			driver.DeadLetter: {Level: driver.Emulated, Fallback: "dead letters are messages in the queue <name>" + FailedSuffix +
				" (as in ai4s-jobq), moved by a send then a delete; a crash in between leaves a duplicate, and listing more than 32 or requeuing/purging by ID dequeues them briefly"},
			driver.Priority:          {Level: driver.Unsupported, Fallback: "priority is ignored; messages are received in roughly FIFO order"},
			driver.Peek:              {Level: driver.Native},
			driver.ExactCount:        {Level: driver.Unsupported, Fallback: "counts are Azure's approximate message count, which includes in-flight and delayed messages"},
			driver.Dedup:             {Level: driver.Unsupported, Fallback: "pushing a task ID that is already queued stores a second message"},
			driver.InPlaceUpdate:     {Level: driver.Native},
			driver.ConcurrencyLimit:  {Level: driver.Emulated, Fallback: "each worker enforces concurrency caps for its own process only (policies are kept in the queue's metadata): N workers may run up to N times the cap at once"},
			driver.RateLimit:         {Level: driver.Emulated, Fallback: "each worker enforces rate limits for its own process only (policies are kept in the queue's metadata): N workers may start up to N times the rate"},
			driver.TransactionalPush: {Level: driver.Unsupported, Fallback: "Storage Queue cannot join an application's transaction; push after your own transaction commits"},
			driver.Results:           {Level: driver.Emulated, Fallback: resultsFallback},
			driver.Cancel:            {Level: driver.Emulated, Fallback: cancelFallback},
			driver.WorkerRegistry:    {Level: driver.Emulated, Fallback: workerRegistryFallback},
			driver.Pause:             {Level: driver.Emulated, Fallback: pauseFallback},
			driver.BulkActions:       {Level: driver.Emulated, Fallback: bulkFallback},
			driver.Schedules:         {Level: driver.Emulated, Fallback: schedulesFallback},
			driver.ResultHistory:     {Level: driver.Emulated, Fallback: blobresults.HistoryFallback},
			driver.Groups:            {Level: driver.Emulated, Fallback: blobresults.GroupsFallback},
			driver.Dependencies:      {Level: driver.Emulated, Fallback: blobresults.DependenciesFallback},
		},
		MaxMessageBytes: MaxMessageBytes,
		MaxVisibility:   MaxVisibility,
		MaxPeek:         MaxBatch,
		MaxReceiveBatch: MaxBatch,
		// Delete Message takes one message.
		CompleteBatch: 1,
		// ai4s-jobq's own backend: its workers may share these queues.
		SharedWithAI4SJobq: true,
	}
}

// Options configure a Driver built by New or NewFromCredential. Only Queue
// is required; the zero value of every other field means its default.
type Options struct {
	// Queue names the queue: 3 to 56 lowercase letters, digits and single
	// hyphens (Azure's 63 less the "-failed" suffix of its dead-letter
	// queue, which jobq shares with ai4s-jobq). Required.
	Queue string
	// PollMin is the first pause between the dequeues of an idle queue
	// (Storage Queue has no long poll). Default DefaultPollMin (50ms).
	PollMin time.Duration
	// PollMax is the longest such pause: each empty dequeue doubles the
	// pause up to it. Default DefaultPollMax (500ms); at least PollMin.
	PollMax time.Duration
	// NoCreate keeps New from creating Queue and Queue-failed when they are
	// missing. Default false: they are created (an identity without the
	// right to create queues is assumed to use existing ones).
	NoCreate bool
	// Retries is how often NewFromCredential's client retries throttled
	// (503 ServerBusy), timed-out (500) and failed requests; negative
	// means never. Default DefaultRetries (6). New leaves retries to the
	// policy of the client it is given.
	Retries int
	// RetryDelay is NewFromCredential's first retry backoff, doubling up
	// to 30s. Default DefaultRetryDelay (200ms).
	RetryDelay time.Duration
	// ResultsContainer names the blob container of the result records in
	// the queue's storage account (NewFromCredential). Default
	// DefaultResultsContainer(Queue), QUEUE-results.
	ResultsContainer string
	// Results is the client of the result records' container, which the
	// program built with its own credentials. New needs it for results
	// (without it, Queue.Result and Admin.Cancel fail with Unimplemented);
	// for NewFromCredential it replaces ResultsContainer.
	Results *container.Client
	// Logger receives the driver's warnings and debug logs. Default
	// slog.Default().
	Logger *slog.Logger
}

// config is the validated settings of one queue.
type config struct {
	account    string
	queue      string
	pollMin    time.Duration
	pollMax    time.Duration
	retries    int // 0: none
	retryDelay time.Duration
	create     bool
	endpoint   string
	results    string // result container, "" for the default
}

// config validates o and applies its defaults.
func (o Options) config() (config, error) {
	c := config{queue: o.Queue, pollMin: o.PollMin, pollMax: o.PollMax, retries: o.Retries, retryDelay: o.RetryDelay, create: !o.NoCreate, results: o.ResultsContainer}
	if c.pollMin == 0 {
		c.pollMin = DefaultPollMin
	}
	if c.pollMax == 0 {
		c.pollMax = max(DefaultPollMax, c.pollMin)
	}
	switch {
	case c.retries == 0:
		c.retries = DefaultRetries
	case c.retries < 0:
		c.retries = 0
	}
	if c.retryDelay == 0 {
		c.retryDelay = DefaultRetryDelay
	}
	switch {
	case c.pollMin < 0:
		return c, driver.Errorf(errcode.InvalidArgument, "azqueue: Options.PollMin=%v must be positive", c.pollMin)
	case c.pollMax < c.pollMin:
		return c, driver.Errorf(errcode.InvalidArgument, "azqueue: Options.PollMax=%v is shorter than PollMin=%v", c.pollMax, c.pollMin)
	case c.retryDelay < 0:
		return c, driver.Errorf(errcode.InvalidArgument, "azqueue: Options.RetryDelay=%v must be positive", c.retryDelay)
	}
	if c.results != "" {
		if err := blobresults.CheckContainerName(c.results); err != nil {
			return c, driver.Errorf(errcode.InvalidArgument, "azqueue: Options.ResultsContainer: %w", err)
		}
	}
	return c, checkQueueName(c.queue)
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

var (
	accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
	queueName   = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$`)
)

func checkQueueName(q string) error {
	maxName := 63 - len(FailedSuffix)
	switch {
	case q == "":
		return driver.Errorf(errcode.InvalidArgument, "no queue name: use azqueue://ACCOUNT/QUEUE, or set Options.Queue")
	case strings.Contains(q, "/"):
		return driver.Errorf(errcode.InvalidArgument, "queue name %q contains '/': use azqueue://ACCOUNT/QUEUE", q)
	case len(q) < 3 || len(q) > maxName || !queueName.MatchString(q):
		return driver.Errorf(errcode.InvalidArgument,
			"invalid queue name %q: Azure queue names are 3 to 63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit, and jobq needs room for the %q suffix of the dead-letter queue (at most %d characters)",
			q, FailedSuffix, maxName)
	}
	return nil
}

func parseURL(u *url.URL) (config, error) {
	p := driver.NewParams(u)
	c := config{
		account:    strings.ToLower(u.Host),
		queue:      strings.Trim(u.Path, "/"),
		pollMin:    p.Duration("poll_min", DefaultPollMin),
		pollMax:    p.Duration("poll_max", DefaultPollMax),
		retries:    p.IntIn("retries", DefaultRetries, math.MinInt32, math.MaxInt32), // the SDK keeps an int32
		retryDelay: p.Duration("retry_delay", DefaultRetryDelay),
		create:     p.Bool("create", true),
		endpoint:   p.String("endpoint", ""),
		results:    p.String("results", ""),
	}
	if p.Has("queue") {
		p.Fail("query parameter queue is not read by this backend: the queue is the URL's path, as in azqueue://ACCOUNT/QUEUE")
	}
	if c.pollMin <= 0 {
		p.Fail("query parameter poll_min must be positive")
	}
	if c.pollMax < c.pollMin {
		p.Fail("query parameter poll_max=%v is shorter than poll_min=%v", c.pollMax, c.pollMin)
	}
	if c.retries < 0 {
		p.Fail("query parameter retries=%d must be 0 or more", c.retries)
	}
	if c.endpoint != "" && checkServiceURL(c.endpoint) != nil {
		p.Fail("query parameter endpoint must be the queue service URL, like https://ACCOUNT.queue.core.windows.net (without credentials)")
	}
	if c.results != "" && blobresults.CheckContainerName(c.results) != nil {
		p.Fail("query parameter results=%q must be a blob container name: 3 to 63 lowercase letters, digits and single hyphens", c.results)
	}
	if err := p.Done(); err != nil {
		return c, err
	}
	return c, checkQueueName(c.queue)
}

// checkServiceURL accepts an http(s) queue service URL without a query.
func checkServiceURL(s string) error {
	e, err := url.Parse(s)
	if err != nil || (e.Scheme != "https" && e.Scheme != "http") || e.Host == "" || e.RawQuery != "" || e.User != nil {
		return driver.Errorf(errcode.InvalidArgument,
			"azqueue: the service URL must be the queue service's, like https://ACCOUNT.queue.core.windows.net/, without credentials or query")
	}
	return nil
}

// New returns the queue opts.Queue of the account svc serves, and its
// dead-letter queue opts.Queue-failed, creating both when missing unless
// opts.NoCreate. svc is used as it is, with its own credential and retry
// policy, and is never closed or changed; the driver holds nothing else
// to release. Pass the result to jobq.New.
//
// svc's pipeline lacks the policy with which the URL opener and
// NewFromCredential tell an unanswered attempt from a refused one; without
// it, a settlement whose response was lost and whose retry found the lease
// gone is reported as a lost lease, so the task may run again (never lost).
func New(ctx context.Context, svc *azqueue.ServiceClient, opts Options) (*Driver, error) {
	if svc == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "azqueue.New: the ServiceClient is nil: build one with azqueue.NewServiceClient or azqueue.NewServiceClientFromConnectionString")
	}
	c, err := opts.config()
	if err != nil {
		return nil, err
	}
	return open(ctx, c, svc, serviceAccount(svc.URL()), opts.logger(), opts.Results, nil)
}

// NewFromCredential is New with a client it builds for the queue service
// at serviceURL (https://ACCOUNT.queue.core.windows.net/) authenticated by
// cred, for example an azidentity.DefaultAzureCredential. opts.Retries and
// opts.RetryDelay set the client's retry policy.
func NewFromCredential(ctx context.Context, serviceURL string, cred azcore.TokenCredential, opts Options) (*Driver, error) {
	if cred == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "azqueue.NewFromCredential: the credential is nil: pass one such as azidentity.NewDefaultAzureCredential's")
	}
	if err := checkServiceURL(serviceURL); err != nil {
		return nil, err
	}
	c, err := opts.config()
	if err != nil {
		return nil, err
	}
	svc, err := azqueue.NewServiceClient(serviceURL, cred, clientOptions(c))
	if err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "azqueue: cannot use queue service %s: %w", serviceURL, err)
	}
	return open(ctx, c, svc, serviceAccount(serviceURL), opts.logger(), opts.Results, fromCredential(serviceURL, cred))
}

// open builds the driver on svc, creating the queues when c.create. The
// result records go to the container results, else to the one src
// builds (see setResults).
func open(ctx context.Context, c config, svc *azqueue.ServiceClient, where string, log *slog.Logger, results *container.Client, src resultsSource) (*Driver, error) {
	d := newDriver(c, svc.NewQueueClient(c.queue), svc.NewQueueClient(c.queue+FailedSuffix), where, log)
	d.setResults(results, src)
	d.setWorkers()
	if c.create {
		if err := d.createQueues(ctx); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Open opens the queue named by u: a thin adapter that builds the service
// client from the URL and the credentials (see the package documentation)
// and calls open, as New does.
func (o *URLOpener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	c, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	c.create = c.create && !opts.ReadOnly // a read creates nothing
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	svc, where, src, err := o.client(c, opts.ConnectionString, log)
	if err != nil {
		return nil, err
	}
	return open(ctx, c, svc, where, log, nil, src)
}

// String describes the opener for debugging without credentials.
func (o *URLOpener) String() string {
	return fmt.Sprintf("azqueue.URLOpener{connection string set: %t, credential set: %t}", o.ConnectionString != "", o.Credential != nil)
}
