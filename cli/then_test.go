package cli_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/driver"
)

// depsQueues are a fresh queue URL on every backend the CLI tests can
// reach that holds tasks (the dependencies feature); the others are
// skipped, saying so.
func depsQueues(t *testing.T, name string) map[string]string {
	t.Helper()
	all := map[string]string{
		"mem":    "mem://" + name + "-" + strings.ToLower(rand.Text()[:8]),
		"sqlite": "sqlite://" + filepath.Join(t.TempDir(), name+".db") + "?queue=" + name,
	}
	out := map[string]string{}
	for b, u := range all {
		q, err := jobq.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		if q.Capabilities().Level(driver.Dependencies) == driver.Unsupported {
			t.Logf("%s: dependencies unsupported, not tested here", b)
		} else {
			out[b] = u
		}
		_ = q.Close()
	}
	if len(out) == 0 {
		t.Fatalf("no backend of %v holds tasks; mem must", all)
	}
	return out
}

// TestSweepThenStepAndRerun is a campaign as a user runs one: 2,000 tasks
// pushed in a group, 5 % of them failing, with a --then aggregation step
// that writes the counts it reads from its environment; workers run the
// sweep and then, once, the step; the sweep pushed again with
// --skip-succeeded pushes only the failed ones.
func TestSweepThenStepAndRerun(t *testing.T) {
	t.Parallel()
	for backend, q := range depsQueues(t, "then-sweep") {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
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
			agg := filepath.Join(dir, "aggregate.txt")
			step := `echo "$JOBQ_GROUP pushed=$JOBQ_GROUP_PUSHED succeeded=$JOBQ_GROUP_SUCCEEDED dead=$JOBQ_GROUP_DEAD_LETTERED cancelled=$JOBQ_GROUP_CANCELLED" >> ` + agg

			code, _, errOut := runIn(t, sweep, q, "push", "--group", "sweep-1", "--then", step, "--then-if", "always")
			if code != 0 || !strings.Contains(errOut, "tasks=2000") || !strings.Contains(errOut, "step of group sweep-1 held as task "+jobq.ThenTaskID("sweep-1")) {
				t.Fatalf("push --group --then: exit %d: %s", code, errOut)
			}
			g := groupJSON(t, q, "sweep-1")
			if st, _ := g["step"].(map[string]any); st["state"] != "held" || st["then_if"] != "always" {
				t.Fatalf("group --json after the push: step %v; want held, then_if always", g["step"])
			}
			if code, out, _ := run(t, q, "group", "sweep-1"); code != 0 || !strings.Contains(out, "step: task "+jobq.ThenTaskID("sweep-1")+" held") {
				t.Errorf("group: exit %d:\n%s\nwant the held step", code, out)
			}
			code, _, errOut = run(t, q, "group", "sweep-1", "then", "echo second step")
			if code != 2 || !strings.Contains(errOut, "has a step already") {
				t.Errorf("a second step: exit %d: %s; want a usage error saying the group has one", code, errOut)
			}

			if code, _, errOut := run(t, q, "worker", "-n", "8"); code != 0 {
				t.Fatalf("worker: exit %d: %s", code, errOut)
			}
			got, err := os.ReadFile(agg)
			want := fmt.Sprintf("sweep-1 pushed=2000 succeeded=%d dead=%d cancelled=0\n", 2000-failing, failing)
			if err != nil || string(got) != want {
				t.Fatalf("the step wrote %q (%v); want it once: %q", got, err, want)
			}
			g = groupJSON(t, q, "sweep-1")
			if st, _ := g["step"].(map[string]any); st["state"] != "succeeded" || g["done"] != true {
				t.Errorf("group --json after the workers: done %v, step %v; want done, step succeeded", g["done"], g["step"])
			}

			// The rerun: same lines, another group; only the failed tasks go
			// in, with a step that runs only if all of them succeed.
			code, _, errOut = runIn(t, sweep, q, "push", "--group", "sweep-1-rerun", "--skip-succeeded", "--then", step)
			wantLog := regexp.MustCompile(fmt.Sprintf(`tasks=%d duplicates=0 skipped=%d group=sweep-1-rerun`, failing, 2000-failing))
			if code != 0 || !wantLog.MatchString(errOut) {
				t.Fatalf("push --skip-succeeded: exit %d: %s; want %s", code, errOut, wantLog)
			}
			if g := groupJSON(t, q, "sweep-1-rerun"); g["pushed"] != float64(failing) || g["queued"] != float64(failing) {
				t.Errorf("the rerun's group: %v; want %d pushed and queued", g, failing)
			}
			if code, _, errOut := run(t, q, "worker", "-n", "8", "--max-consecutive-failures", "-1"); code != 0 {
				t.Fatalf("worker of the rerun: exit %d: %s", code, errOut)
			}
			// The failures fail again: the all-succeeded step is cancelled,
			// its record naming the group.
			g = groupJSON(t, q, "sweep-1-rerun")
			if st, _ := g["step"].(map[string]any); st["state"] != "cancelled" {
				t.Errorf("the rerun's step: %v; want cancelled (its tasks failed again)", g["step"])
			}
			code, out, errOut := run(t, q, "result", jobq.ThenTaskID("sweep-1-rerun"), "--json")
			if code != 0 || !strings.Contains(out, `"state": "cancelled"`) || !strings.Contains(out, `group \"sweep-1-rerun\"`) {
				t.Errorf("result of the cancelled step: exit %d:\n%s%s\nwant it cancelled, its reason naming the group", code, out, errOut)
			}
			if got2, _ := os.ReadFile(agg); string(got2) != want {
				t.Errorf("the step file after the rerun: %q; want the first step's line only", got2)
			}
		})
	}
}

// TestPushAfter: push --after and a JSON line's "after" hold tasks until
// their parents succeeded; an unknown parent, a cycle and --after without
// dependencies are refused before anything is stored.
func TestPushAfter(t *testing.T) {
	t.Parallel()
	for backend, q := range depsQueues(t, "after") {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			log := filepath.Join(dir, "order.txt")
			code, out, errOut := run(t, q, "push", "--print-ids", "-c", "echo first >> "+log)
			if code != 0 {
				t.Fatalf("push: exit %d: %s", code, errOut)
			}
			first := strings.TrimSpace(out)
			lines := fmt.Sprintf(`{"cmd": "echo second >> %s", "after": %q}`+"\n", log, first)
			code, out, errOut = runIn(t, lines, q, "push", "--print-ids")
			if code != 0 {
				t.Fatalf("push a JSON line with after: exit %d: %s", code, errOut)
			}
			second := strings.TrimSpace(out)
			if code, _, errOut := run(t, q, "push", "--after", second, "-c", "echo third >> "+log); code != 0 {
				t.Fatalf("push --after: exit %d: %s", code, errOut)
			}
			if code, _, errOut := run(t, q, "push", "--after", "no-such-id", "-c", "echo orphan"); code == 0 || !strings.Contains(errOut, "no-such-id") {
				t.Errorf("push --after an unknown ID: exit %d: %s; want a refusal naming it", code, errOut)
			}
			cycle := `{"cmd": "echo x", "after": "` + "y-id" + `"}` + "\n"
			if code, _, errOut := runIn(t, cycle, q, "push"); code == 0 || !strings.Contains(errOut, "y-id") {
				t.Errorf("push after an unknown ID in a JSON line: exit %d: %s; want a refusal naming it", code, errOut)
			}
			if code, _, errOut := run(t, q, "worker", "-n", "4"); code != 0 {
				t.Fatalf("worker: exit %d: %s", code, errOut)
			}
			if got, err := os.ReadFile(log); err != nil || string(got) != "first\nsecond\nthird\n" {
				t.Errorf("the tasks ran as %q (%v); want first, second, third in order", got, err)
			}
		})
	}
}

// TestPushThenStepRefusedBeforeThePush: a push whose --then the group
// refuses (it has a step) is refused before its tasks are stored (exit 2,
// nothing pushed), where it used to store them and then exit 1; a queue
// that keeps no records refuses --then, --after and --after-group before
// anything is pushed too.
func TestPushThenStepRefusedBeforeThePush(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	steps := []struct {
		args     []string
		wantCode int
		want     string
	}{
		{[]string{"push", "-c", "echo a", "--after", ""}, cli.ExitUsage, `--after "" has an empty task ID`},
		{[]string{"push", "-c", "echo a", "--after", jobq.ThenTaskID("g") + ","}, cli.ExitUsage, "has an empty task ID"},
		{[]string{"push", "-c", "echo a", "--after-group", " "}, cli.ExitUsage, "--after-group is empty"},
		// A blank --then held no step; a blank --group made a group of a
		// blank name (an empty one, a new name).
		{[]string{"push", "-c", "echo a", "--then", ""}, cli.ExitUsage, "--then is empty; give the command the group's step runs"},
		{[]string{"push", "-c", "echo a", "--then", " \t"}, cli.ExitUsage, "--then is empty"},
		{[]string{"push", "-c", "echo a", "--group", "  "}, cli.ExitUsage, `--group "  " is blank; give the group a name`},
		{[]string{"push", "-c", "echo a", "--group", ""}, cli.ExitUsage, `--group "" is blank`},
		{[]string{"group", "g", "then", " "}, cli.ExitUsage, "the command is empty"},
		// A parent that does not exist is a usage error, group or task ID.
		{[]string{"push", "-c", "echo a", "--after-group", "nosuchgroup"}, cli.ExitUsage, "no group of this name"},
		{[]string{"push", "-c", "echo a", "--after", "0123456789abcdef0123456789abcdef"}, cli.ExitUsage, "no task with this ID"},
		{[]string{"push", "--group", "g", "-c", "echo a", "--then", "echo step"}, 0, "step of group g held"},
		{[]string{"push", "--group", "g", "-c", "echo b", "--then", "echo step 2"}, cli.ExitUsage, "group g has a step already (task " + jobq.ThenTaskID("g") + ", held); nothing was pushed"},
		{[]string{"size"}, 0, "1"},
		{[]string{"policy", "set", "results", "none"}, 0, ""},
		{[]string{"push", "-c", "echo c", "--then", "echo s"}, cli.ExitUsage, "push --then needs result records"},
		{[]string{"push", "-c", "echo c", "--after", jobq.ThenTaskID("g")}, cli.ExitUsage, "or leave --after out"},
		{[]string{"push", "-c", "echo c", "--after-group", "g"}, cli.ExitUsage, "push --after-group needs result records"},
		{[]string{"size"}, 0, "1"},
	}
	for _, s := range steps {
		code, out, errOut := run(t, append([]string{q}, s.args...)...)
		if code != s.wantCode || !strings.Contains(out+errOut, s.want) {
			t.Fatalf("jobq %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(s.args, " "), code, out, errOut, s.wantCode, s.want)
		}
	}
}

// TestPushOfDuplicatesNamesNoGroup: a push whose tasks were all duplicates
// (queued already, in another group) names no group in its summary: none
// of its tasks joined the group, which `group NAME` would not find.
func TestPushOfDuplicatesNamesNoGroup(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	if code, _, errOut := run(t, q, "push", "-c", "echo x", "--group", "g1"); code != 0 || !strings.Contains(errOut, "group=g1") {
		t.Fatalf("first push: exit %d: %s", code, errOut)
	}
	code, _, errOut := run(t, q, "push", "-c", "echo x", "--group", "g2")
	if code != 0 || !strings.Contains(errOut, "duplicates=1") || strings.Contains(errOut, "group=g2") {
		t.Fatalf("push of a duplicate: exit %d: %s; want duplicates=1 and no group=g2", code, errOut)
	}
	expect(t, cli.ExitFailure, []string{`no group "g2"`}, q, "group", "g2")
	// Nor does it claim the tasks were pushed when --then finds no group.
	expect(t, cli.ExitUsage, []string{"--then: no task of this push joined group g3"}, q, "push", "-c", "echo x", "--group", "g3", "--then", "echo s")
}

// TestPushAfterEndedParent: a parent dead-lettered or cancelled already is
// refused with exit 2 (docs/cli.md, --after), with advice that works for
// it: a dead letter is requeued by its message ID, which `show` prints; a
// cancelled task is pushed again. Nothing is stored.
func TestPushAfterEndedParent(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	pushID := func(args ...string) string {
		t.Helper()
		code, out, errOut := run(t, append([]string{q, "-q", "push", "--print-ids"}, args...)...)
		if code != 0 {
			t.Fatalf("push %q: exit %d: %s", args, code, errOut)
		}
		return strings.TrimSpace(out)
	}
	dead := pushID("-c", "exit 3")
	cancelled := pushID("-c", "echo never", "--delay", "1h")
	expect(t, 0, nil, q, "cancel", cancelled)
	expect(t, 0, nil, q, "-q", "worker", "--max-consecutive-failures", "5")
	tests := []struct {
		name   string
		parent string
		want   []string
		wrong  string
	}{
		{"dead-lettered", dead, []string{"after " + dead + ": that task was dead-lettered already", "`jobq '" + q + "' dlq requeue MESSAGE_ID`", "`jobq '" + q + "' show " + dead + "`"}, ""},
		{"cancelled", cancelled, []string{"after " + cancelled + ": that task was cancelled", "push the parent again"}, "dlq requeue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, q, "push", "--after", tt.parent, "-c", "echo child")
			if code != cli.ExitUsage {
				t.Errorf("exit %d; want %d: %s", code, cli.ExitUsage, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
			if tt.wrong != "" && strings.Contains(errOut, tt.wrong) {
				t.Errorf("stderr %q advises %q", errOut, tt.wrong)
			}
		})
	}
	expect(t, 0, []string{"0"}, q, "size")
	// The advice works: show names the dead letter's message ID, whose
	// requeue lets the push through.
	code, out, errOut := run(t, q, "show", dead, "--json")
	var shown struct {
		MessageID string `json:"message_id"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || shown.MessageID == "" {
		t.Fatalf("show %s --json: exit %d, %q, %s", dead, code, out, errOut)
	}
	expect(t, 0, nil, q, "dlq", "requeue", shown.MessageID)
	expect(t, 0, nil, q, "-q", "push", "--after", dead, "-c", "echo child")
}

// TestPushThenAllSkipped: a rerun with --skip-succeeded and --then whose
// tasks all succeeded already holds no step and says why: they were left
// out, not queued already.
func TestPushThenAllSkipped(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	if code, _, errOut := run(t, q, "push", "--group", "first", "-c", "echo a", "-c", "echo b"); code != 0 {
		t.Fatalf("push: exit %d: %s", code, errOut)
	}
	if code, _, errOut := run(t, q, "worker"); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, errOut)
	}
	code, _, errOut := run(t, q, "push", "--group", "rerun", "--skip-succeeded", "--then", "echo step", "-c", "echo a", "-c", "echo b")
	if code != cli.ExitUsage || !strings.Contains(errOut, "all 2 succeeded already and were left out by --skip-succeeded") {
		t.Errorf("rerun with nothing left: exit %d, stderr %q; want exit %d saying the 2 tasks were left out by --skip-succeeded", code, errOut, cli.ExitUsage)
	}
}
