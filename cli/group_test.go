package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGroupSweepAndRerun is a sweep as a user runs one: 2,000 tasks pushed
// in a group, 5 % of them failing; the group's counts once workers have
// run them all; group --wait exiting 1 for the failures; then the sweep
// pushed again with --skip-succeeded, which pushes only the failed ones.
func TestGroupSweepAndRerun(t *testing.T) {
	t.Parallel()
	q := "sqlite://" + filepath.Join(t.TempDir(), "sweep.db") + "?queue=sweep"
	var in strings.Builder
	failing := 0
	for i := range 2000 {
		if i%20 == 7 {
			fmt.Fprintf(&in, "echo sim %d; exit 3\n", i)
			failing++
			continue
		}
		fmt.Fprintf(&in, "echo sim %d\n", i)
	}
	sweep := in.String()

	code, _, errOut := runIn(t, sweep, q, "push", "--group", "sweep-1")
	if code != 0 || !strings.Contains(errOut, "tasks=2000") || !strings.Contains(errOut, "group=sweep-1") {
		t.Fatalf("push --group: exit %d: %s", code, errOut)
	}
	if g := groupJSON(t, q, "sweep-1"); g["pushed"] != 2000.0 || g["queued"] != 2000.0 || g["done"] != false {
		t.Fatalf("group after the push: %v; want 2000 pushed, all queued", g)
	}
	if code, _, errOut := run(t, q, "worker", "-n", "8"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	g := groupJSON(t, q, "sweep-1")
	want := map[string]any{"pushed": 2000.0, "succeeded": float64(2000 - failing), "dead_lettered": float64(failing),
		"cancelled": 0.0, "open": 0.0, "queued": 0.0, "running": 0.0, "delayed": 0.0, "done": true}
	for k, v := range want {
		if g[k] != v {
			t.Errorf("group after the workers: %s = %v; want %v (all: %v)", k, g[k], v, g)
		}
	}
	if w, _ := g["work"].(map[string]any); w == nil || w["records"] != 2000.0 || !(w["done_s"].(float64) > 0) || w["preemptions"] != 0.0 || w["lost_s"] != 0.0 {
		t.Errorf("group --json work: %v; want 2000 records, some work done, none lost", g["work"])
	}
	code, out, errOut := run(t, q, "group", "sweep-1", "--wait")
	if code != 1 || !strings.Contains(errOut, fmt.Sprintf("%d of 2000 tasks did not succeed", failing)) || !strings.Contains(out, "done") ||
		!strings.Contains(out, "preemptions (from 2000 records)") {
		t.Errorf("group --wait of a group with failures: exit %d, out %q, err %q; want exit 1 naming %d failures", code, out, errOut, failing)
	}
	code, out, errOut = run(t, q, "groups", "--work", "--json")
	var gw map[string]any
	if err := json.Unmarshal([]byte(out), &gw); code != 0 || err != nil || gw["name"] != "sweep-1" {
		t.Fatalf("groups --work --json: exit %d, %v: %s %s", code, err, out, errOut)
	}
	if w, _ := gw["work"].(map[string]any); w == nil || w["records"] != 2000.0 {
		t.Errorf("groups --work --json: work %v; want 2000 records", gw["work"])
	}

	// The export of the failures, as pandas or DuckDB would read it.
	code, out, errOut = run(t, q, "results", "--jsonl", "--group", "sweep-1", "--state", "dead-lettered")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != failing {
		t.Fatalf("results --jsonl --group --state: exit %d, %d lines: %s; want %d", code, len(lines), errOut, failing)
	}
	for _, l := range lines {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil || r["group"] != "sweep-1" || r["state"] != "dead-lettered" || r["exit_code"] != 3.0 ||
			!strings.HasPrefix(r["output"].(string), "sim ") || r["worker"] == "" || r["finished"] == nil {
			t.Fatalf("results line %s (%v); want a dead-lettered record of sweep-1 with exit code 3, its output, worker and times", l, err)
		}
	}
	if code, out, _ := run(t, q, "results", "--jsonl"); code != 0 || strings.Count(out, "\n") != 2000 {
		t.Errorf("results --jsonl: exit %d, %d lines; want 2000", code, strings.Count(out, "\n"))
	}

	// The rerun: same lines, another group; only the failed tasks go in.
	code, _, errOut = runIn(t, sweep, q, "push", "--group", "sweep-1-rerun", "--skip-succeeded")
	wantLog := regexp.MustCompile(fmt.Sprintf(`tasks=%d duplicates=0 skipped=%d group=sweep-1-rerun`, failing, 2000-failing))
	if code != 0 || !wantLog.MatchString(errOut) {
		t.Fatalf("push --skip-succeeded: exit %d: %s; want %s", code, errOut, wantLog)
	}
	if g := groupJSON(t, q, "sweep-1-rerun"); g["pushed"] != float64(failing) || g["queued"] != float64(failing) {
		t.Errorf("the rerun's group: %v; want %d pushed and queued", g, failing)
	}
	code, out, _ = run(t, q, "groups")
	if code != 0 || strings.Index(out, "sweep-1-rerun") > strings.Index(out, "sweep-1 ") {
		t.Errorf("groups: exit %d:\n%s\nwant the rerun listed first", code, out)
	}
}

// groupJSON runs `group NAME --json` and returns its object.
func groupJSON(t *testing.T, q, name string) map[string]any {
	t.Helper()
	code, out, errOut := run(t, q, "group", name, "--json")
	if code != 0 {
		t.Fatalf("group %s --json: exit %d: %s", name, code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("group --json printed %q: %v", out, err)
	}
	return m
}

// TestGroupWorkLineSaysWhyRecordsAreMissing: pushing a sweep again in
// another group moves its tasks' records (one per task ID) to the new
// run, so the first group's work line, read from records, must not pass
// off "0s done (from 0 records)" as the work of tasks that ran: it says
// how many ended tasks have no record in the group and why, and
// `groups --work` shows how many records its work columns add up.
func TestGroupWorkLineSaysWhyRecordsAreMissing(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	sweep := "echo one\necho two\necho three\n"
	for _, g := range []string{"first", "second"} {
		if code, _, errOut := runIn(t, sweep, q, "-q", "push", "--group", g); code != 0 {
			t.Fatalf("push --group %s: exit %d: %s", g, code, errOut)
		}
		if code, _, errOut := run(t, q, "-q", "worker"); code != 0 {
			t.Fatalf("worker: exit %d: %s", code, errOut)
		}
	}
	tests := []struct {
		group, want, notWant string
	}{
		{"first", "(from 0 records; 3 ended tasks of the group have no record in it: the same task ran again since in another group", ""},
		{"second", "(from 3 records)", "no record in it"},
	}
	code, out, errOut := run(t, q, "groups", "--work")
	if code != 0 || !strings.Contains(out, "PREEMPTIONS  RECORDS") || !regexp.MustCompile(`(?m)^second .* 3\s*$`).MatchString(out) || !regexp.MustCompile(`(?m)^first .* 0\s*$`).MatchString(out) {
		t.Errorf("groups --work: exit %d, out %q, err %q; want a RECORDS column of 3 for second and 0 for first", code, out, errOut)
	}
	for _, tt := range tests {
		code, out, errOut := run(t, q, "group", tt.group)
		if code != 0 || !strings.Contains(out, "3/3 ended") || !strings.Contains(out, tt.want) ||
			(tt.notWant != "" && strings.Contains(out, tt.notWant)) {
			t.Errorf("group %s: exit %d, out %q, err %q; want %q", tt.group, code, out, errOut, tt.want)
		}
	}
}

// TestGroupWaitHintSaysRerunTasksAreListedElsewhere: after a rerun in
// another group, the first group's failed tasks keep their records only
// under the rerun's group, so group --wait's hint to list them says how
// many its list leaves out and why; the rerun's own hint says nothing of
// the kind.
func TestGroupWaitHintSaysRerunTasksAreListedElsewhere(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	sweep := "echo fine\necho broken; exit 3\n"
	for _, g := range []string{"first", "rerun"} {
		args := []string{q, "-q", "push", "--group", g, "--num-retries", "0"}
		if g == "rerun" {
			args = append(args, "--skip-succeeded")
		}
		if code, _, errOut := runIn(t, sweep, args...); code != 0 {
			t.Fatalf("push --group %s: exit %d: %s", g, code, errOut)
		}
		if code, _, errOut := run(t, q, "-q", "worker"); code != 0 {
			t.Fatalf("worker: exit %d: %s", code, errOut)
		}
	}
	const leftOut = "which leaves out the 1 ended task with no record in first (a task keeps only the record of its latest run: one pushed again in another group is listed under that group)"
	tests := []struct {
		group       string
		wantLeftOut bool
	}{
		{"first", true},
		{"rerun", false},
	}
	for _, tt := range tests {
		code, _, errOut := run(t, q, "group", tt.group, "--wait")
		if code != 1 || !strings.Contains(errOut, "results --jsonl --group "+tt.group+" --state dead-lettered") {
			t.Fatalf("group %s --wait: exit %d, err %q; want exit 1 with the hint to list the dead-lettered task", tt.group, code, errOut)
		}
		if got := strings.Contains(errOut, leftOut); got != tt.wantLeftOut {
			t.Errorf("group %s --wait: err %q; says the list leaves a task out: %v, want %v", tt.group, errOut, got, tt.wantLeftOut)
		}
	}
}
