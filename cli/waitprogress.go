package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
)

// The pace of wait's live line: redrawn every waitRedraw, the queue's
// counts read (one Stats call) at most every waitStatsEvery, and no sooner
// than waitStatsShare times the last read's duration after it: a count is
// a scan of the queue on some backends (0.5 s for 200,000 tasks on
// Postgres), which a wait must not repeat back to back.
const (
	waitRedraw     = 250 * time.Millisecond
	waitStatsEvery = time.Second
	waitStatsShare = 10
)

// statsPause is how long the live line waits after a Stats call that took
// took before the next.
func statsPause(took time.Duration) time.Duration {
	return max(waitStatsEvery, waitStatsShare*took)
}

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[K"

// liveLine is one line of status kept on a terminal and redrawn in place;
// lines printed through above never mix with it.
type liveLine struct {
	mu    sync.Mutex
	w     io.Writer
	text  string
	shown bool
}

// set draws text in place of the line.
func (l *liveLine) set(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown && text == l.text {
		return
	}
	l.text = text
	l.shown = true
	fmt.Fprint(l.w, clearLine+text)
}

// clear erases the line, for good until the next set.
func (l *liveLine) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	l.text = ""
}

func (l *liveLine) erase() {
	if l.shown {
		fmt.Fprint(l.w, clearLine)
		l.shown = false
	}
}

// above erases the line, runs print (which writes whole lines, to this
// terminal or another stream) and draws the line again under them.
func (l *liveLine) above(print func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.erase()
	err := print()
	if l.text != "" {
		fmt.Fprint(l.w, l.text)
		l.shown = true
	}
	return err
}

// waitCounts are what wait's live line shows.
type waitCounts struct {
	// total tasks waited for; succeeded and failed (any other end) of them.
	total, succeeded, failed int
	// recent counts the ends recorded since the wait started (the rate's
	// numerator: tasks that ended before it are reported at once).
	recent int
	// running is how many of the tasks not ended may be running: the
	// queue's in-flight count, at most the tasks not ended; -1 when the
	// backend cannot count them.
	running int
}

// waitProgressText is wait's live line: the ends by outcome, the tasks
// not ended as running and queued (or together, when the backend cannot
// count what runs), then the rate of the ends since the wait started and
// the time left at that rate, once elapsed is long enough to measure.
func waitProgressText(c waitCounts, elapsed time.Duration) string {
	left := c.total - c.succeeded - c.failed
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d ended: %d succeeded, %d failed; ", c.succeeded+c.failed, c.total, c.succeeded, c.failed)
	if c.running < 0 {
		fmt.Fprintf(&b, "%d running or queued", left)
	} else {
		running := min(c.running, left)
		fmt.Fprintf(&b, "%d running, %d queued", running, left-running)
	}
	if elapsed < minRateWindow || c.recent == 0 {
		return b.String()
	}
	rate := float64(c.recent) / elapsed.Seconds()
	fmt.Fprintf(&b, "; %s tasks/s", formatRate(rate))
	if rate > 0 && left > 0 {
		eta := time.Duration(float64(left) / rate * float64(time.Second))
		fmt.Fprintf(&b, ", ETA %s", formatDuration(eta.Round(time.Second)))
	}
	return b.String()
}

// formatRate prints a rate with one decimal below 10, none above.
func formatRate(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f", r)
	}
	return fmt.Sprintf("%.0f", r)
}

// showProgress keeps the live line of a wait for ids on standard error
// until ctx ends, and returns the function that stops it and erases the
// line. A Stats call (paced by statsPause) splits the tasks not ended into
// running and queued; nothing is read per task.
func (w *waiter) showProgress(ctx context.Context, ids []string) (stop func()) {
	w.live = &liveLine{w: w.a.stderr}
	start := w.started
	total := len(uniqueIDs(ids))
	running, nextStats := -1, time.Time{}
	draw := func(ctx context.Context) {
		if began := time.Now(); !began.Before(nextStats) {
			running = w.inFlight(ctx)
			nextStats = time.Now().Add(statsPause(time.Since(began)))
		}
		c := w.counts()
		c.total, c.running = total, running
		w.live.set(waitProgressText(c, time.Since(start)))
	}
	draw(ctx) // before the first outcome
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(waitRedraw)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				draw(ctx)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			w.live.clear()
		})
	}
}

// inFlight is the queue's count of tasks being run, or -1 when the backend
// cannot count them or the read fails.
func (w *waiter) inFlight(ctx context.Context) int {
	st, err := w.q.Admin().Stats(ctx)
	if err != nil || !st.Known.InFlight {
		return -1
	}
	return int(st.InFlight)
}

// counts returns the ends reported so far.
func (w *waiter) counts() waitCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	return waitCounts{succeeded: w.succeeded, failed: w.nFailed, recent: w.recent}
}

// tally counts r, an end just reported, for the live line; w.mu is held.
func (w *waiter) tally(r *jobq.Result) {
	if r.State == driver.ResultSucceeded {
		w.succeeded++
	} else {
		w.nFailed++
	}
	if !r.Recorded.Before(w.started) {
		w.recent++
	}
}

// uniqueIDs is ids without repeats (a repeated ID is waited for once).
func uniqueIDs(ids []string) map[string]struct{} {
	m := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		m[id] = struct{}{}
	}
	return m
}
