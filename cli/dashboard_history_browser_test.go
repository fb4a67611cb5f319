package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
)

// The drain of TestDashboardHistoryInBrowser: historyTasks tasks, of which
// the first historyFailA fail with exit 3 and the next historyFailB with
// exit 137 (no retries: each is one dead letter), and historyLong more
// that a preempted worker was running.
const (
	historyTasks = 5000
	historyFailA = 30
	historyFailB = 20
	historyLong  = 4
)

// preemptingMetadata is an Azure instance metadata server that announces
// the eviction of VM spot-1 from after, and the VM's name always.
func preemptingMetadata(t *testing.T, after time.Time) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metadata/instance/compute/name":
			io.WriteString(w, "spot-1")
		case "/metadata/scheduledevents":
			if r.Method != http.MethodGet {
				return
			}
			if time.Now().Before(after) {
				io.WriteString(w, `{"DocumentIncarnation": 1, "Events": []}`)
				return
			}
			io.WriteString(w, `{"DocumentIncarnation": 2, "Events": [{"EventId": "X", "EventType": "Preempt", "EventStatus": "Scheduled",
				"Resources": ["spot-1"], "NotBefore": "`+time.Now().Add(time.Minute).UTC().Format(http.TimeFormat)+`"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDashboardHistoryInBrowser: a dashboard opened after a drain of
// 5,000 tasks, with preemptions and failures, shows it from the result
// records and the worker registry: the tasks that ended, the preempted
// attempts by environment, the errors grouped by exit code and first
// output line with example tasks that open their records, and the
// workers' churn and use. On SQLite; with $JOBQ_DASHBOARD_SCREENSHOTS set
// to a directory it saves the screenshots docs/dashboard.md shows.
func TestDashboardHistoryInBrowser(t *testing.T) {
	chrome := chromiumPath()
	if chrome == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium found and CI is set: install it with .ci/install-chromium.sh (Debian's chromium package), or point $JOBQ_CHROMIUM at a binary")
		}
		t.Skip("no Chromium found: install Debian's chromium (.ci/install-chromium.sh) or set $JOBQ_CHROMIUM to run the dashboard's browser test")
	}
	shots := os.Getenv("JOBQ_DASHBOARD_SCREENSHOTS")
	q := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=sweep"

	// A spot worker takes the long tasks and is preempted while it runs
	// them: each is requeued, an interrupted attempt, with no retry spent.
	var long strings.Builder
	for i := range historyLong {
		fmt.Fprintf(&long, "sleep 4 # long %d\n", i)
	}
	if code, _, errOut := runIn(t, long.String(), q, "-q", "push", "--group", "spot"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	md := preemptingMetadata(t, time.Now().Add(1500*time.Millisecond))
	if code, _, errOut := run(t, q, "-q", "worker", "-n", strconv.Itoa(historyLong), "--preemption", "azure", "--metadata-endpoint", md, "--wait"); code != cli.ExitPreempted {
		t.Fatalf("the spot worker exited %d; want %d (preempted): %s", code, cli.ExitPreempted, errOut)
	}
	// The sweep: failures of two kinds, and successes.
	var batch strings.Builder
	for i := range historyTasks {
		switch {
		case i < historyFailA:
			fmt.Fprintf(&batch, "echo 'error: model weights not found'; echo shard %d; exit 3\n", i)
		case i < historyFailA+historyFailB:
			fmt.Fprintf(&batch, "echo; echo '  out of memory (shard %d)' | cut -c1-15; exit 137\n", i)
		default:
			fmt.Fprintf(&batch, "true # shard %d\n", i)
		}
	}
	if code, _, errOut := runIn(t, batch.String(), q, "-q", "push", "--num-retries", "0", "--group", "sweep-1"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, q, "-q", "worker", "-n", "8", "--max-consecutive-failures", "-1"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	if st := statsJSON(t, q); st["ready"] != float64(0) || st["dead_lettered"] != float64(historyFailA+historyFailB) {
		t.Fatalf("after the drain stats --json says %v; want nothing ready and %d dead letters", st, historyFailA+historyFailB)
	}

	// Another machine's worker, preempted without notice 5 minutes ago
	// (it vanished); the workers above ran in this process, as one.
	announce(t, q, &jobq.WorkerInfo{ID: "spot-vm-12-77", Host: "spot-vm-12", PID: 77, Version: "v1.4.0",
		Started: time.Now().Add(-47 * time.Minute), Heartbeat: time.Now().Add(-5 * time.Minute), Done: 310, Failed: 1,
		CPUPercent: 95, RSSBytes: 900 << 20, Interval: 10 * time.Second})

	// Only now does the dashboard start.
	base := startDashboard(t, q)
	ctx, consoleErrors := browse(t, chrome)
	if err := chromedp.Do(ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS(`#history[data-ready="1"]`))); err != nil {
		t.Fatalf("loading %s: %v", base, err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("reading %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	eval := func(expr string) []string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	// The history plots and totals.
	succeeded := historyTasks - historyFailA - historyFailB + historyLong
	for id, want := range map[string]int{"hist-succeeded": succeeded, "hist-dead-lettered": historyFailA + historyFailB, "hist-cancelled": 0} {
		if got := text("#" + id); got != strconv.Itoa(want) {
			t.Errorf("#%s shows %q; want %d", id, got, want)
		}
	}
	attr := func(sel, name string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
		if err != nil {
			t.Fatalf("%s[%s]: %v", sel, name, err)
		}
		return v.Value
	}
	if got := attr("#plot-history-ends", "data-total"); got != strconv.Itoa(historyTasks+historyLong) {
		t.Errorf("the tasks-ended plot adds up to %s; want %d", got, historyTasks+historyLong)
	}
	if got := attr("#plot-history-runtimes", "data-points"); got == "0" {
		t.Error("the runtime plot has no points")
	}
	// The preemption panel: each long task's preempted attempt, on this
	// machine (the worker's environment), where the dead letters' final
	// failures ran too. jobq records a preemption as
	// the stop it is ("preempted" where attempts say so, else "requeued").
	pre, _ := strconv.Atoi(text("#hist-preempted"))
	req, _ := strconv.Atoi(text("#hist-requeued"))
	if pre+req != historyLong || text("#hist-lease-expired") != "0" {
		t.Errorf("the preemption cards show %d preempted, %d stopped, %s leases expired; want %d interrupted attempts, no lease expired", pre, req, text("#hist-lease-expired"), historyLong)
	}
	if got := attr("#plot-history-preemptions", "data-total"); got != strconv.Itoa(historyLong) {
		t.Errorf("the preemption plot adds up to %s; want %d", got, historyLong)
	}
	host, _ := os.Hostname()
	envRows := eval(`[...document.querySelectorAll("#env-table tbody tr")].map(tr => [...tr.children].map(td => td.textContent).join("|"))`)
	if want := fmt.Sprintf("%s|%d|%d|0|%d", host, pre, req, historyFailA+historyFailB); len(envRows) != 1 || envRows[0] != want {
		t.Errorf("the environments table shows %q; want one row %q", envRows, want)
	}
	// The error groups, largest first, with examples.
	groups := eval(`[...document.querySelectorAll("#errors-table tbody tr")].map(tr => [...tr.children].slice(0, 3).map(td => td.textContent).join("|"))`)
	wantGroups := []string{fmt.Sprintf("3|error: model weights not found|%d", historyFailA), fmt.Sprintf("137|out of memory|%d", historyFailB)}
	if strings.Join(groups, "\n") != strings.Join(wantGroups, "\n") {
		t.Errorf("the error groups are\n%s\nwant\n%s", strings.Join(groups, "\n"), strings.Join(wantGroups, "\n"))
	}
	if n := eval(`[...document.querySelectorAll("#errors-table a.example")].map(a => a.dataset.id)`); len(n) != 6 {
		t.Errorf("the error groups link %d examples %q; want 3 per group", len(n), n)
	}
	// The fleet: this process's worker and the vanished one started and
	// ended.
	if got := attr("#plot-churn", "data-total"); got != "4" {
		t.Errorf("the churn plot adds up to %s; want 4 (two workers started, two ended)", got)
	}
	if got := attr("#plot-cpu", "data-points"); got != "2" {
		t.Errorf("the CPU plot shows %s workers; want 2", got)
	}
	screenshot(t, ctx, shots, "dashboard-history.png", "#history")
	screenshot(t, ctx, shots, "dashboard-fleet.png", "#fleet")

	// The groups: the sweep and the spot worker's long tasks, with their
	// counts and the work their tasks cost (the long tasks' preemptions).
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#groups[data-ready="1"] #groups-table`))); err != nil {
		t.Fatalf("the groups section: %v", err)
	}
	rows := eval(`[...document.querySelectorAll("#groups-table tbody tr")].map(tr => [tr.dataset.group, ...[...tr.children].slice(2, 9).map(td => td.textContent), tr.children[10].textContent, tr.children[14].textContent].join("|"))`)
	wantRows := []string{
		fmt.Sprintf("sweep-1|%d|%d|%d|0|0|–|0|done|0", historyTasks, historyTasks-historyFailA-historyFailB, historyFailA+historyFailB),
		fmt.Sprintf("spot|%d|%d|0|0|0|–|0|done|%d", historyLong, historyLong, pre),
	}
	// The table lists the groups most recently changed first (the
	// conformance suite checks that order): here whichever of the sweep
	// and the spot worker's long tasks (4 s each, run beside the sweep)
	// ended last, which depends on the machine's speed.
	slices.Sort(rows)
	slices.Sort(wantRows)
	if strings.Join(rows, "\n") != strings.Join(wantRows, "\n") {
		t.Errorf("the groups table shows\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}
	if done := eval(`[...document.querySelectorAll("#groups-table tbody tr")].map(tr => tr.children[11].textContent)`); len(done) != 2 || done[0] == "–" || done[1] == "–" {
		t.Errorf("the groups' work done shows %q; want a time for each", done)
	}
	screenshot(t, ctx, shots, "dashboard-groups.png", "#groups")

	// An example opens its task's record.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#errors-table a.example`)),
		chromedp.WaitVisible(chromedp.CSS(`#record[open] pre.tail`)),
	); err != nil {
		t.Fatalf("opening an example: %v", err)
	}
	if body := text("#record-body"); !strings.Contains(body, "dead-lettered, exit code 3") || !strings.Contains(body, "model weights not found") {
		t.Errorf("the example's record shows %q; want a dead letter with exit code 3 and its output", body)
	}
	screenshot(t, ctx, shots, "dashboard-error-example.png", "")
	if errs := consoleErrors(); len(errs) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(errs, "\n"))
	}
}

// browse starts headless Chromium that can reach only 127.0.0.1, and
// returns its context and what the page logged as errors so far.
func browse(t *testing.T, chrome string) (context.Context, func() []string) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 1000),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("disable-component-update", true),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, tcancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(tcancel)
	var mu sync.Mutex
	var errs []string
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning && m.Source == "security" {
				mu.Lock()
				errs = append(errs, m.String()+" "+m.URL)
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// screenshot saves the element sel (the screen when sel is empty) as
// name in dir, unless dir is empty.
func screenshot(t *testing.T, ctx context.Context, dir, name, sel string) {
	t.Helper()
	if dir == "" {
		return
	}
	shot := chromedp.CaptureScreenshot()
	if sel != "" {
		shot = chromedp.Screenshot(chromedp.CSS(sel))
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatalf("screenshot of %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}
