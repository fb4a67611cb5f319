package servicebus

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Defaults of the URL parameters.
const (
	DefaultLockDuration     = time.Minute
	DefaultMaxDeliveryCount = 100
	DefaultDedupWindow      = 10 * time.Minute
	DefaultRetries          = 3
	DefaultRetryDelay       = 500 * time.Millisecond
	// DefaultEmulatorAdminPort is where the official emulator serves the
	// admin API (plain HTTP).
	DefaultEmulatorAdminPort = 5300
)

// config is a parsed queue URL.
type config struct {
	namespace     string // host name, e.g. NAMESPACE.servicebus.windows.net
	queue         string
	requeue       string
	admin         string // HOST:PORT of a plain-HTTP admin endpoint, or ""
	create        bool
	createSkipped bool // create=true was given, but this open only reads, so it creates nothing
	lockDuration  time.Duration
	maxDelivery   int
	dedupWindow   time.Duration
	retries       int
	retryDelay    time.Duration
	results       string // the result container (results=), or ""
}

// Service Bus entity names: letters, digits, '.', '-', '_', and '/'
// separated segments, up to 260 characters.
var queueName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,258}[A-Za-z0-9_])?$`)

func checkQueueName(q string) error {
	if q == "" {
		return driver.Errorf(errcode.InvalidArgument, "servicebus: no queue name: set Options.Queue")
	}
	if !queueName.MatchString(q) || strings.Contains(q, "$") {
		return driver.Errorf(errcode.InvalidArgument,
			"invalid Service Bus queue name %q: use letters, digits, '.', '-', '_' and '/', starting with a letter or digit", q)
	}
	return nil
}

func parseURL(u *url.URL) (config, error) {
	c := config{namespace: u.Host, queue: strings.Trim(u.Path, "/")}
	if c.namespace != "" && !strings.Contains(c.namespace, ".") {
		c.namespace += ".servicebus.windows.net"
	}
	if c.queue == "" {
		return c, driver.Errorf(errcode.InvalidArgument, "no queue name in the URL: use sb://NAMESPACE/QUEUE")
	}
	if err := checkQueueName(c.queue); err != nil {
		return c, err
	}
	p := driver.NewParams(u)
	if p.Has("queue") {
		p.Fail("query parameter queue is not read by this backend: the queue is the URL's path, as in sb://NAMESPACE/QUEUE")
	}
	c.requeue = p.String("requeue", RequeueSchedule)
	if c.requeue != RequeueRedeliver && c.requeue != RequeueSchedule {
		p.Fail("query parameter requeue=%q must be %s or %s", c.requeue, RequeueRedeliver, RequeueSchedule)
	}
	c.admin = p.String("admin", "")
	c.create = p.Bool("create", false)
	c.lockDuration = p.Duration("lock_duration", DefaultLockDuration)
	if c.lockDuration < MinLockDuration || c.lockDuration > MaxLockDuration {
		p.Fail("query parameter lock_duration=%v must be between %v and %v, as Azure allows", c.lockDuration, MinLockDuration, MaxLockDuration)
	}
	c.maxDelivery = p.IntIn("max_delivery_count", DefaultMaxDeliveryCount, math.MinInt32, math.MaxInt32)
	if c.maxDelivery < 1 {
		p.Fail("query parameter max_delivery_count=%d must be at least 1", c.maxDelivery)
	}
	c.dedupWindow = p.Duration("dedup_window", DefaultDedupWindow)
	if c.dedupWindow != 0 && (c.dedupWindow < 20*time.Second || c.dedupWindow > 7*24*time.Hour) {
		p.Fail("query parameter dedup_window=%v must be 0 (off) or between 20s and 7 days", c.dedupWindow)
	}
	// The SDK keeps retries in an int32.
	c.retries = p.IntIn("retries", DefaultRetries, 0, math.MaxInt32)
	c.retryDelay = p.Duration("retry_delay", DefaultRetryDelay)
	c.results = p.String("results", "")
	if err := p.Done(); err != nil {
		return c, err
	}
	return c, nil
}

// isoDuration formats d as the ISO 8601 duration the admin API takes.
func isoDuration(d time.Duration) string {
	return "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
}

var isoDurationRE = regexp.MustCompile(`^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?)?$`)

// parseISODuration reads the ISO 8601 durations the admin API returns, such
// as PT1M or P10675199DT2H48M5.4775807S (which saturates).
func parseISODuration(s string) (time.Duration, error) {
	m := isoDurationRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("not an ISO 8601 duration: %q", s)
	}
	var secs float64
	for i, unit := range []float64{86400, 3600, 60, 1} {
		if m[i+1] != "" {
			v, err := strconv.ParseFloat(m[i+1], 64)
			if err != nil {
				return 0, fmt.Errorf("not an ISO 8601 duration: %q", s)
			}
			secs += v * unit
		}
	}
	if secs >= float64(1<<63-1)/1e9 {
		return time.Duration(1<<63 - 1), nil
	}
	return time.Duration(secs * float64(time.Second)), nil
}
