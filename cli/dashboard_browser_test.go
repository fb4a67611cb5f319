package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
)

// chromiumPath finds a Chromium to drive: $JOBQ_CHROMIUM, then Debian's
// chromium and the usual other names.
func chromiumPath() string {
	if p := os.Getenv("JOBQ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// startDashboard runs `jobq Q dashboard` in-process on a free loopback
// port and returns its URL; the dashboard stops when the test ends.
func startDashboard(t *testing.T, q string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	args := append([]string{q, "dashboard", "--addr", "127.0.0.1:0", "--interval", "200ms"}, extra...)
	go func() { done <- cli.Run(ctx, args, strings.NewReader(""), &out, &errOut) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("dashboard exited %d: %s", code, errOut.String())
		}
	})
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+/)`)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("dashboard exited %d before listening: %s", code, errOut.String())
		default:
		}
	}
	t.Fatalf("dashboard did not say where it listens; stdout %q, stderr %q", out.String(), errOut.String())
	return ""
}

// announce writes a worker's record into the queue's registry.
func announce(t *testing.T, queue string, w *jobq.WorkerInfo) {
	t.Helper()
	q, err := jobq.Open(t.Context(), queue)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := hooks.AnnounceWorker(t.Context(), q, w); err != nil {
		t.Fatalf("announcing worker %s: %v", w.ID, err)
	}
}

// runIn runs the jobq command in-process with stdin.
func runIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(t.Context(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// statsJSON runs `stats --json --sample 0` and returns its document.
func statsJSON(t *testing.T, q string) map[string]any {
	t.Helper()
	code, out, errOut := run(t, q, "stats", "--json", "--sample", "0")
	if code != 0 {
		t.Fatalf("stats --json: exit %d: %s", code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("stats --json printed %q: %v", out, err)
	}
	return m
}

// TestDashboardInBrowser drives the dashboard in headless Chromium against
// a live queue, on SQLite and on Postgres: the page loads without console
// errors, its numbers match `stats --json`, the plots have points, the
// workers and policies show, a filtered redrive (the bulk form: count,
// then run, confirmed) requeues only the dead letters it matches, the
// requeue button, once confirmed, moves a dead letter back to the queue
// (and Cancel does not), and pause and resume, confirmed, show on the page. With
// $JOBQ_DASHBOARD_SCREENSHOTS set to a directory, the SQLite run saves the
// screenshots docs/dashboard.md shows.
func TestDashboardInBrowser(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium found and CI is set: install it with .ci/install-chromium.sh (Debian's chromium package), or point $JOBQ_CHROMIUM at a binary")
		}
		t.Skip("no Chromium found: install Debian's chromium (.ci/install-chromium.sh) or set $JOBQ_CHROMIUM to run the dashboard's browser test")
	}
	t.Run("sqlite", func(t *testing.T) {
		dashboardInBrowser(t, chrome, "sqlite://"+filepath.Join(t.TempDir(), "q.db")+"?queue=render", os.Getenv("JOBQ_DASHBOARD_SCREENSHOTS"))
	})
	t.Run("postgres", func(t *testing.T) {
		base := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
		if s := os.Getenv("JOBQ_TEST_POSTGRES_URL"); s != "" {
			base = s
		}
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		q := base + sep + "queue=dash-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		t.Cleanup(func() {
			// The queue's rows go; its worker records expire on their own.
			for _, args := range [][]string{{"clear", "--yes"}, {"dlq", "purge", "--all", "--yes"}, {"policy", "unset", "concurrency", "gpu"}} {
				run(t, append([]string{"-q", q}, args...)...)
			}
		})
		dashboardInBrowser(t, chrome, q, "")
	})
}

// dashboardInBrowser is TestDashboardInBrowser on the queue q (empty and
// unused), saving screenshots into shots unless it is empty.
func dashboardInBrowser(t *testing.T, chrome, q, shots string) {
	if code, _, errOut := run(t, q, "policy", "set", "concurrency", "gpu=2"); code != 0 {
		t.Fatalf("policy set: exit %d: %s", code, errOut)
	}
	// Two tasks that fail twice each become dead letters with an attempt
	// history and an output tail.
	for _, c := range []string{"echo connecting; sleep 0.2; echo 'error: model weights not found' >&2; exit 3", "sleep 0.05; echo 'out of memory'; exit 137"} {
		if code, _, errOut := run(t, q, "-q", "push", "--num-retries", "1", "--retry-backoff", "1ms,1ms", "-c", c); code != 0 {
			t.Fatalf("push: exit %d: %s", code, errOut)
		}
	}
	if code, _, errOut := run(t, q, "-q", "worker", "--max-consecutive-failures", "-1"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	// Two more workers in the registry: one live on another machine, one
	// that stopped heartbeating five minutes ago.
	announce(t, q, &jobq.WorkerInfo{ID: "gpu-node-7-311", Host: "gpu-node-7", PID: 311, Version: "v1.4.0",
		Started: time.Now().Add(-3 * time.Hour), Tasks: []string{"render-0042", "render-0043"}, Done: 1204, Failed: 3,
		CPUPercent: 187, RSSBytes: 3 << 30, Interval: 10 * time.Second})
	announce(t, q, &jobq.WorkerInfo{ID: "spot-vm-12-77", Host: "spot-vm-12", PID: 77, Version: "v1.4.0",
		Started: time.Now().Add(-47 * time.Minute), Heartbeat: time.Now().Add(-5 * time.Minute), Done: 310, Failed: 1,
		CPUPercent: 95, RSSBytes: 900 << 20, Interval: 10 * time.Second})
	// With a token, as off loopback: the page is opened once with
	// ?token=, which it trades for a cookie.
	const token = "browser-test-token"
	base := startDashboard(t, q, "--token", token)
	// A batch drains while the dashboard samples, then three tasks stay.
	var batch strings.Builder
	for i := range 40 {
		fmt.Fprintf(&batch, "sleep 0.0%d # frame %d\n", i%10, i)
	}
	if code, _, errOut := runIn(t, batch.String(), q, "-q", "push"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	time.Sleep(600 * time.Millisecond) // a few samples of the full queue, for the plot
	if code, _, errOut := run(t, q, "-q", "worker", "-n", "2"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	for i := range 3 {
		if code, _, errOut := run(t, q, "-q", "push", "--concurrency-key", "gpu", "-c", "echo later "+strconv.Itoa(i)); code != 0 {
			t.Fatalf("push: exit %d: %s", code, errOut)
		}
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000),
		// Nothing but the dashboard: no name resolves, no proxy, no
		// component updates.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("disable-component-update", true),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, tcancel := context.WithTimeout(bctx, 90*time.Second)
	defer tcancel()

	// Every console error, uncaught exception and browser-log error (a
	// failed load, a CSP violation) is collected.
	var mu sync.Mutex
	var consoleErrors []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning && m.Source == "security" {
				mu.Lock()
				consoleErrors = append(consoleErrors, m.String()+" "+m.URL)
				mu.Unlock()
			}
		}
	}()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"?token="+token), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatalf("loading %s: %v", base, err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || strings.Contains(loc, token) {
		t.Errorf("the address bar shows %q (%v); want the token dropped from it", loc, err)
	}
	poll := func(expr, what string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}

	// The numbers match stats --json.
	want := statsJSON(t, q)
	if want["dead_lettered"] != float64(2) || want["ready"] != float64(3) {
		t.Fatalf("stats --json: %v; want 3 ready and 2 dead-lettered", want)
	}
	poll(`document.getElementById("stat-ready").textContent === "3"`, "the page never showed 3 ready tasks")
	for id, field := range map[string]string{"stat-ready": "ready", "stat-in-flight": "in_flight", "stat-delayed": "delayed", "stat-dead-lettered": "dead_lettered"} {
		if got, w := text("#"+id), fmt.Sprint(want[field]); got != w {
			t.Errorf("#%s shows %q; stats --json says %s = %s", id, got, field, w)
		}
	}

	// The depth plot has data points, and the runtime plot counts the dead
	// letters' four attempts.
	poll(`Number(document.getElementById("plot-counts").getAttribute("data-points")) >= 8`, "the depth plot has no data points")
	if got := text("#plot-counts path.line.s-ready"); got != "" {
		t.Errorf("a plot line holds text %q", got)
	}
	rt, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#plot-runtimes"), "data-points"))
	if err != nil {
		t.Fatal(err)
	}
	// Four are the dead letters' attempts (two each); the rest are the
	// batch's successes whose result records the dashboard read, on a
	// backend that keeps them (it learns task IDs by peeking, so it may
	// have seen fewer than all 40).
	n, err := strconv.Atoi(rt.Value)
	switch {
	case err != nil || n < 4 || n > 44:
		t.Errorf("the runtime plot counts %q attempts; want 4 (two dead letters, two attempts each) plus at most the batch's 40 successes", rt.Value)
	case keepsResults(t, q) && n == 4:
		t.Errorf("the runtime plot counts only the dead letters' 4 attempts; the backend keeps result records, so the batch's successes should count too")
	}
	if keys := text("#policies-table tbody"); !strings.Contains(keys, "gpu") {
		t.Errorf("the policies table shows %q; want the gpu key", keys)
	}
	// The worker runs above (one process: one worker ID) registered and
	// withdrew; the announced ones are live and vanished.
	if note := text("#workers-summary"); !strings.Contains(note, "1 live, 1 vanished, 1 withdrawn") {
		t.Errorf("workers section says %q; want 1 live, 1 vanished and 1 withdrawn", note)
	}
	workerRows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#workers-table tbody tr td:first-child")].map(td => td.textContent)`))
	if err != nil || len(workerRows) != 3 || workerRows[0] != "gpu-node-7-311" || workerRows[1] != "spot-vm-12-77" {
		t.Errorf("the workers table lists %q (%v); want the live worker, then the vanished one, then the withdrawn one", workerRows, err)
	}

	// screenshot saves the whole page, or with viewport only what is on
	// the screen (a modal dialog's backdrop covers only that).
	screenshot := func(name string, viewport bool) {
		t.Helper()
		if shots == "" {
			return
		}
		shot := chromedp.FullScreenshot(100)
		if viewport {
			shot = chromedp.CaptureScreenshot()
		}
		png, err := chromedp.Run(ctx, shot)
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join(shots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	screenshot("dashboard-overview.png", false)

	// Purge asks first; Cancel keeps the dead letter.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr.dead-row button.purge`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`#confirm-cancel`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#confirm[open]`)),
	); err != nil {
		t.Fatalf("purge, then cancel: %v", err)
	}
	if got := statsJSON(t, q)["dead_lettered"]; got != float64(2) {
		t.Fatalf("after Cancel, %v dead letters; want 2 (nothing purged)", got)
	}

	// The details show the attempt history and the output tail.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr.dead-row button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.detail:not([hidden]) pre.tail`)),
	); err != nil {
		t.Fatalf("opening a dead letter's details: %v", err)
	}
	if tail := text(`tr.detail:not([hidden]) pre.tail`); !strings.Contains(tail, "model weights not found") {
		t.Errorf("the first dead letter's output tail is %q; want the task's stderr", tail)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr.detail:not([hidden]) table.attempts tr").length - 1`))
	if err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("the attempt history shows %d attempts; want 2", rows)
	}
	screenshot("dashboard-dead-letters.png", false)

	// A filtered redrive: the bulk form counts the dead letters that
	// exited 137 (one of two), and Run, confirmed with that count,
	// requeues only that one.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`#bulk-action`), "requeue"),
		chromedp.SendKeys(chromedp.CSS(`#bulk-exit-code`), "137"),
		chromedp.Click(chromedp.CSS(`#bulk-count`)),
	); err != nil {
		t.Fatalf("bulk count: %v", err)
	}
	poll(`document.getElementById("bulk-result").textContent.startsWith("1 of 2 dead letters match")`, "the bulk form's count never said 1 of 2 dead letters match")
	if got := statsJSON(t, q)["dead_lettered"]; got != float64(2) {
		t.Fatalf("after the bulk count (a dry run), %v dead letters; want 2", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#bulk-run`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
	); err != nil {
		t.Fatalf("bulk run: %v", err)
	}
	if q := text("#confirm-text"); !strings.HasPrefix(q, "Requeue 1 dead letter of ") {
		t.Errorf("the bulk confirmation says %q; want it to ask to requeue the 1 match", q)
	}
	screenshot("dashboard-bulk.png", true)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm-ok`))); err != nil {
		t.Fatal(err)
	}
	poll(`document.getElementById("bulk-result").textContent.startsWith("requeue: 1 of 1 matching dead letter done")`, "the bulk form never reported the requeue")
	poll(`document.getElementById("stat-dead-lettered").textContent === "1"`, "after the filtered redrive the page never showed 1 dead letter")
	if got := statsJSON(t, q); got["dead_lettered"] != float64(1) || got["ready"] != float64(4) {
		t.Errorf("after the filtered redrive stats --json says %v; want 1 dead-lettered and 4 ready", got)
	}
	if code, out, _ := run(t, q, "requeue", "--exit-code", "137", "--dry-run"); code != 0 || !strings.HasPrefix(out, "would requeue 0 dead letters") {
		t.Errorf("after the filtered redrive, requeue --exit-code 137 --dry-run: exit %d, %q; want 0 left", code, out)
	}

	// Requeue, confirmed, moves the last dead letter back to the queue.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`tr.dead-row button.requeue`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
	); err != nil {
		t.Fatalf("requeue: %v", err)
	}
	if q := text("#confirm-text"); !strings.HasPrefix(q, "Requeue dead letter") {
		t.Errorf("the confirmation says %q; want it to ask to requeue", q)
	}
	screenshot("dashboard-confirm.png", true)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm-ok`))); err != nil {
		t.Fatal(err)
	}
	poll(`document.getElementById("stat-dead-lettered").textContent === "0"`, "after the confirmed requeue the page never showed 0 dead letters")
	if got := statsJSON(t, q); got["dead_lettered"] != float64(0) || got["ready"] != float64(5) {
		t.Errorf("after the requeue stats --json says %v; want 0 dead-lettered and 5 ready", got)
	}
	poll(`document.getElementById("stat-ready").textContent === "5"`, "the page never showed the requeued task as ready")

	// Pause, confirmed, shows who paused the queue and since when; Resume
	// lifts it. The queue's policies say the same.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#pause-queue`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	); err != nil {
		t.Fatalf("pause: %v", err)
	}
	poll(`!document.getElementById("paused-note").hidden && document.getElementById("paused-note").textContent.startsWith("Paused: the whole queue")`, "after the confirmed pause the page never said the queue is paused")
	if code, out, _ := run(t, q, "policy", "list"); code != 0 || !strings.Contains(out, "pause") {
		t.Errorf("after the pause, policy list: exit %d, %q; want the pause listed", code, out)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#resume-queue`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm[open]`)),
		chromedp.Click(chromedp.CSS(`#confirm-ok`)),
	); err != nil {
		t.Fatalf("resume: %v", err)
	}
	poll(`document.getElementById("paused-note").hidden`, "after the confirmed resume the page still says the queue is paused")
	if code, out, _ := run(t, q, "policy", "list"); code != 0 || strings.Contains(out, "pause") {
		t.Errorf("after the resume, policy list: exit %d, %q; want no pause", code, out)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
}

// keepsResults reports whether the backend of q keeps result records.
func keepsResults(t *testing.T, q string) bool {
	t.Helper()
	qq, err := jobq.Open(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = qq.Close() }()
	return qq.Capabilities().Level(driver.Results) != driver.Unsupported
}
