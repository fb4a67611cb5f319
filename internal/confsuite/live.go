package confsuite

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/queueurl"
	"github.com/jobq/jobq/internal/redact"
)

// Status is the outcome of one check run by RunLive.
type Status string

// The outcomes.
const (
	Passed  Status = "pass"
	Failed  Status = "FAIL"
	Skipped Status = "skip"
)

// Result is the outcome of one check run by RunLive.
type Result struct {
	// Name is the check's name, as in Names and the subtests of Run.
	Name   string
	Status Status
	// Reason is the first failure of a failed check, or why a check was
	// skipped.
	Reason string
	// Messages are what the check logged and why it failed or skipped, in
	// order.
	Messages []string
	Duration time.Duration
}

// liveCheckTimeout bounds one check in RunLive.
const liveCheckTimeout = 3 * time.Minute

// RunLive runs every check against live queues outside `go test`, for the
// CLI's `jobq QUEUE conformance`, and returns one Result per check in the
// order of Names. Each check gets its own scratch queue from
// h.NewLiveQueueURL (build one with ScratchQueues); after the check the
// runner clears it and purges its dead letters, but it does not delete the
// queue itself. Checks run four at a time unless h.Serial. RunLive never
// touches any queue other than the scratch queues. Canceling ctx fails the
// remaining checks.
//
// Without h.PushRaw the Poison check is skipped.
func RunLive(ctx context.Context, h Harness) []Result {
	cs := checks()
	results := make([]Result, len(cs))
	if h.NewLiveQueueURL == nil {
		for i, ck := range cs {
			const msg = "conformance: Harness.NewLiveQueueURL is nil; build one with conformance.ScratchQueues(queueURL)"
			results[i] = Result{Name: ck.name, Status: Failed, Reason: msg, Messages: []string{msg}}
		}
		return results
	}
	par := 4
	if h.Serial {
		par = 1
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, ck := range cs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			results[i] = runLiveCheck(ctx, h, ck)
		})
	}
	wg.Wait()
	return results
}

// runLiveCheck runs one check on its own goroutine, as testing does, so
// that Fatalf and Skipf can end it with runtime.Goexit.
func runLiveCheck(parent context.Context, h Harness, ck check) Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(parent, liveCheckTimeout)
	defer cancel()
	lt := &liveT{ctx: ctx}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer lt.runCleanups()
		defer cancel() // as testing: the context ends before the clean-ups
		defer func() {
			if r := recover(); r != nil {
				lt.fail(fmt.Sprintf("panic: %v", r))
			}
		}()
		h.NewDriver = nil // live checks open the user's queues by URL
		c := &C{T: lt, h: h}
		c.newURL = func() string {
			u, err := h.NewLiveQueueURL(ctx)
			if err != nil {
				c.Fatalf("create a scratch queue: %v", err)
			}
			c.Cleanup(func() { scrub(parent, u) })
			return u
		}
		c.newQueue = c.newURL
		ck.run(c)
	}()
	select {
	case <-done:
	case <-time.After(liveCheckTimeout + 30*time.Second):
		lt.fail(fmt.Sprintf("the check did not finish within %v; abandoned", liveCheckTimeout))
	}
	return lt.result(ck.name, time.Since(start))
}

// scrub empties a scratch queue after a live check.
func scrub(parent context.Context, u string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 30*time.Second)
	defer cancel()
	q, err := jobq.OpenWithOptions(ctx, u, jobq.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return
	}
	defer q.Close()
	_, _ = q.Admin().Clear(ctx)
	_, _ = q.Admin().PurgeDeadLetters(ctx)
	_, _ = q.Admin().PurgeWorkers(ctx, time.Now().Add(time.Hour)) // the worker checks' records, where there is a registry
}

// liveT implements T for RunLive.
type liveT struct {
	ctx context.Context

	mu       sync.Mutex
	msgs     []string
	failed   bool
	skipped  bool
	reason   string
	cleanups []func()
}

func (t *liveT) Helper()                  {}
func (t *liveT) Context() context.Context { return t.ctx }

func (t *liveT) log(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = append(t.msgs, s)
}

func (t *liveT) fail(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.failed {
		t.reason = s
	}
	t.failed = true
	t.msgs = append(t.msgs, s)
}

func (t *liveT) Logf(format string, args ...any)   { t.log(fmt.Sprintf(format, args...)) }
func (t *liveT) Errorf(format string, args ...any) { t.fail(fmt.Sprintf(format, args...)) }

func (t *liveT) Fatalf(format string, args ...any) {
	t.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (t *liveT) Skipf(format string, args ...any) {
	t.mu.Lock()
	t.skipped = true
	if !t.failed {
		t.reason = fmt.Sprintf(format, args...)
	}
	t.msgs = append(t.msgs, fmt.Sprintf(format, args...))
	t.mu.Unlock()
	runtime.Goexit()
}

func (t *liveT) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

func (t *liveT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

// runCleanups runs the clean-ups last first, each guarded so that one
// failing does not stop the others.
func (t *liveT) runCleanups() {
	for {
		t.mu.Lock()
		n := len(t.cleanups)
		if n == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[n-1]
		t.cleanups = t.cleanups[:n-1]
		t.mu.Unlock()
		done := make(chan struct{})
		go func() { // its own goroutine, so a Fatalf in it ends only it
			defer close(done)
			defer func() {
				if r := recover(); r != nil {
					t.fail(fmt.Sprintf("panic in clean-up: %v", r))
				}
			}()
			f()
		}()
		<-done
	}
}

func (t *liveT) result(name string, d time.Duration) Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := Passed
	switch {
	case t.failed:
		st = Failed
	case t.skipped:
		st = Skipped
	}
	return Result{Name: name, Status: st, Reason: t.reason, Messages: append([]string(nil), t.msgs...), Duration: d}
}

// AllPassed reports whether no result failed (skips are fine).
func AllPassed(rs []Result) bool {
	for _, r := range rs {
		if r.Status == Failed {
			return false
		}
	}
	return true
}

// WriteTable prints results as a table: one row per check with its status,
// duration and reason; with verbose, every message follows its row.
func WriteTable(w io.Writer, rs []Result, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tTIME\tNOTE")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%.1fs\t%s\n", r.Name, r.Status, r.Duration.Seconds(), firstLine(r.Reason))
		if verbose {
			for _, m := range r.Messages {
				fmt.Fprintf(tw, "\t\t\t  %s\n", strings.ReplaceAll(m, "\n", " "))
			}
		}
	}
	var pass, fail, skip int
	for _, r := range rs {
		switch r.Status {
		case Passed:
			pass++
		case Failed:
			fail++
		default:
			skip++
		}
	}
	fmt.Fprintf(tw, "\n%d passed, %d failed, %d skipped\n", pass, fail, skip)
	return tw.Flush()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// queueParamSchemes name their queue with the queue= parameter rather than
// the URL path.
var queueParamSchemes = map[string]bool{
	"sqlite": true, "postgres": true, "postgresql": true, "redis": true, "rediss": true,
}

// ScratchQueues returns a Harness.NewLiveQueueURL that derives fresh
// scratch queue URLs from a user's queue URL: the same backend, account and
// settings, with the queue name replaced by NAME-conf-RUN-N (the queue=
// parameter for sqlite, postgres and redis; the last path element, or the
// host for mem, otherwise). Names are lowercase and at most 63 characters,
// valid for Azure queues.
func ScratchQueues(queueURL string) (func(ctx context.Context) (string, error), error) {
	u, err := url.Parse(queueurl.Normalize(queueURL))
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("conformance: %q is not a queue URL", redact.URL(queueURL))
	}
	run := strings.ToLower(rand.Text()[:6])
	var n atomic.Int64
	scheme := strings.ToLower(u.Scheme)
	return func(context.Context) (string, error) {
		v := *u
		q := v.Query()
		segs := strings.Split(strings.Trim(v.Path, "/"), "/")
		base := "jobq"
		switch {
		case queueParamSchemes[scheme] || q.Has("queue"):
			if b := q.Get("queue"); b != "" {
				base = b
			}
		case segs[len(segs)-1] != "":
			base = segs[len(segs)-1]
		case v.Host != "":
			base = v.Host
		}
		suffix := fmt.Sprintf("-conf-%s-%d", run, n.Add(1))
		base = strings.ToLower(base)
		if len(base)+len(suffix) > 63 {
			base = strings.TrimRight(base[:63-len(suffix)], "-")
		}
		name := base + suffix
		switch {
		case queueParamSchemes[scheme] || q.Has("queue"):
			q.Set("queue", name)
			v.RawQuery = q.Encode()
		case segs[len(segs)-1] != "":
			segs[len(segs)-1] = name
			v.Path = "/" + strings.Join(segs, "/")
			v.RawPath = ""
		default:
			v.Host = name
		}
		return v.String(), nil
	}, nil
}
