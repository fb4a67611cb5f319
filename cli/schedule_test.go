package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
)

// TestScheduleCommands: add, list, pause, resume and rm, and the bad input
// each refuses with a message that names the problem and a non-zero exit.
func TestScheduleCommands(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	steps := []cliStep{
		{[]string{"schedule", "add", "nightly", "0 3 * * *", "--tz", "Europe/Berlin", "-c", "./report.sh", "-e", "OUT=/srv"}, 0, "added schedule nightly: 0 3 * * * (Europe/Berlin, missed runs: skip); next run "},
		{[]string{"schedule", "add", "sync", "*/15 * * * *", "--kind", "sync", "--payload", `{"source": "crm"}`, "--missed", "once"}, 0, "(UTC, missed runs: once)"},
		{[]string{"schedule", "add", "nightly", "0 4 * * *", "-c", "true"}, cli.ExitFailure, `schedule "nightly" already exists in this queue`},
		{[]string{"schedule", "add", "bad", "0 25 * * *", "-c", "true"}, cli.ExitUsage, `cron expression "0 25 * * *"`},
		{[]string{"schedule", "add", "bad", "every day", "-c", "true"}, cli.ExitUsage, "write five fields"},
		{[]string{"schedule", "add", "bad", "0 3 * * *", "--tz", "Europe/Atlantis", "-c", "true"}, cli.ExitUsage, `unknown time zone "Europe/Atlantis"`},
		{[]string{"schedule", "add", "bad", "0 3 * * *", "--missed", "twice", "-c", "true"}, cli.ExitUsage, `missed-run policy "twice": use skip`},
		{[]string{"schedule", "add", "bad name", "0 3 * * *", "-c", "true"}, cli.ExitUsage, `schedule name "bad name" contains ' '`},
		{[]string{"schedule", "add", "bad", "0 3 * * *"}, cli.ExitUsage, "schedule add needs a task"},
		{[]string{"schedule", "add", "bad", "0 3 * * *", "-c", "true", "--kind", "k"}, cli.ExitUsage, "not both"},
		{[]string{"schedule", "add", "bad", "0 3 * * *", "--kind", "k", "--payload", "[1]"}, cli.ExitUsage, "is not a JSON object"},
		{[]string{"schedule", "add", "bad", "0 3 * * *", "-c", strings.Repeat("x", 3000)}, cli.ExitUsage, "put a long command in a script"},
		{[]string{"schedule", "add", "only-one-arg"}, cli.ExitUsage, "accepts 2 arg(s)"},
		{[]string{"schedule", "list"}, 0, "nightly  0 3 * * *     Europe/Berlin  skip    active"},
		{[]string{"schedule", "list"}, 0, `kind sync {"source": "crm"}`},
		{[]string{"schedule", "pause", "nightly"}, 0, "paused schedule nightly"},
		{[]string{"schedule", "list", "--json"}, 0, `{"name":"nightly","cron":"0 3 * * *","tz":"Europe/Berlin","missed":"skip","paused":true,`},
		{[]string{"schedule", "resume", "nightly"}, 0, "resumed schedule nightly: it fires from its next slot ("},
		{[]string{"schedule", "pause", "weekly"}, cli.ExitFailure, `no schedule "weekly"`},
		{[]string{"policy", "list"}, 0, "no policies"},
		{[]string{"policy", "unset", "schedule", "x"}, cli.ExitUsage, "schedule rm NAME"},
		{[]string{"schedule", "rm", "nightly"}, 0, "removed schedule nightly"},
		{[]string{"schedule", "rm", "nightly"}, cli.ExitFailure, `no schedule "nightly"`},
		{[]string{"scheduler", "--once"}, 0, ""},
		{[]string{"schedule", "list"}, 0, "sync "},
		{[]string{"schedule", "rm", "sync"}, 0, "removed schedule sync"},
		{[]string{"schedule", "list"}, 0, "no schedules"},
	}
	runSteps(t, q, steps)
}

// TestWorkersFireSchedules: two workers, both firing schedules in the
// background, run each slot of an @every 1s schedule once.
func TestWorkersFireSchedules(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	ticks := filepath.Join(t.TempDir(), "ticks")
	if code, _, errOut := run(t, q, "schedule", "add", "tick", "@every 1s", "-c", `echo "$JOBQ_TASK_ID" >> `+ticks); code != 0 {
		t.Fatalf("schedule add: exit %d: %s", code, errOut)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errOut bytes.Buffer
			cli.Run(ctx, []string{q, "worker", "--wait", "--status-interval", "0"}, strings.NewReader(""), &out, &errOut)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	var lines []string
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(ticks)
		if lines = strings.Fields(string(b)); len(lines) >= 4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if len(lines) < 4 {
		t.Fatalf("the workers ran %d slots in 30s; want at least 4 of an @every 1s schedule", len(lines))
	}
	seen := map[string]bool{}
	for _, id := range lines {
		if seen[id] {
			t.Errorf("slot task %s ran twice (runs: %v)", id, lines)
		}
		seen[id] = true
	}
}

// TestSchedulerOnceFires: `scheduler --once` pushes a due slot's task with
// the slot's ID, and says so.
func TestSchedulerOnceFires(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	if code, _, errOut := run(t, q, "schedule", "add", "tick", "@every 1s", "-c", "echo tick"); code != 0 {
		t.Fatalf("schedule add: exit %d: %s", code, errOut)
	}
	deadline := time.Now().Add(10 * time.Second)
	var out string
	for time.Now().Before(deadline) && !strings.Contains(out, "fired tick slot ") {
		var code int
		var errOut string
		if code, out, errOut = run(t, q, "scheduler", "--once"); code != 0 {
			t.Fatalf("scheduler --once: exit %d: %s", code, errOut)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// fired tick slot 2026-01-01T10:00:01Z: task ID
	f := strings.Fields(out)
	if len(f) < 6 || f[0] != "fired" {
		t.Fatalf("scheduler --once printed %q; want a fired line", out)
	}
	slot, err := time.Parse(time.RFC3339, strings.TrimSuffix(f[3], ":"))
	if err != nil {
		t.Fatalf("slot in %q: %v", out, err)
	}
	id := f[5]
	if want := driver.ScheduleTaskID("tick", slot); id != want {
		t.Errorf("task ID %s; want the slot's ID %s", id, want)
	}
	if code, show, errOut := run(t, q, "show", id); code != 0 || !strings.Contains(show, "echo tick") {
		t.Errorf("show %s: exit %d, %q, %s; want the scheduled task queued", id, code, show, errOut)
	}
}

// TestScheduleListJSONMembers: every member docs/cli.md lists is in each
// object, null where unknown (last_fired before the first fire), before
// and after a fire.
func TestScheduleListJSONMembers(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	expect(t, 0, nil, q, "schedule", "add", "tick", "@every 1s", "-c", "true")
	list := func() map[string]any {
		t.Helper()
		code, out, errOut := run(t, q, "schedule", "list", "--json")
		var m map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &m) != nil {
			t.Fatalf("schedule list --json: exit %d, %q: %s", code, out, errOut)
		}
		for _, k := range []string{"name", "cron", "tz", "missed", "paused", "next", "last_fired", "pending", "task"} {
			if _, ok := m[k]; !ok {
				t.Errorf("schedule list --json printed %s, without %q", out, k)
			}
		}
		return m
	}
	if m := list(); m["last_fired"] != nil || m["pending"] != false || m["next"] == nil {
		t.Errorf("before a fire: last_fired %v, pending %v, next %v; want null, false and a time", m["last_fired"], m["pending"], m["next"])
	}
	time.Sleep(1100 * time.Millisecond)
	expect(t, 0, []string{"fired tick"}, q, "scheduler", "--once")
	if m := list(); m["last_fired"] == nil {
		t.Errorf("after a fire: last_fired is null")
	}
}

// TestScheduleRmCutShort: a `schedule rm` whose wait for a slot a scheduler
// claimed is cut short (its context ends, as Ctrl-C ends it) says that the
// schedule is removed and that the claimed slot may still be pushed, and
// exits 1; once the slot is pushed, a second `schedule rm` finishes.
func TestScheduleRmCutShort(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	if code, _, errOut := run(t, q, "schedule", "add", "tick", "* * * * *", "-c", "true"); code != 0 {
		t.Fatalf("schedule add: exit %d: %s", code, errOut)
	}
	h, err := jobq.Open(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	now := time.Now().Truncate(time.Minute).Add(time.Minute + time.Second) // just after the next slot
	runs, _, err := hooks.FireSchedules(t.Context(), h, now, func(stage, _ string, _ time.Time) error {
		if stage != "claimed" {
			return nil
		}
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		var out, errOut bytes.Buffer
		code := cli.Run(ctx, []string{q, "schedule", "rm", "tick"}, strings.NewReader(""), &out, &errOut)
		if code != cli.ExitFailure || out.Len() != 0 || !strings.Contains(errOut.String(), `schedule "tick" is removed and claims no more slots, but slot `) ||
			!strings.Contains(errOut.String(), "may still be pushed; run `schedule rm tick` again") {
			t.Errorf("schedule rm cut short while a claimed slot is not pushed: exit %d, stdout %q, stderr %q; want exit 1 saying the schedule is removed and the slot may still be pushed", code, out.String(), errOut.String())
		}
		if code, out, errOut := run(t, q, "schedule", "list"); code != 0 || !strings.Contains(out, "no schedules") {
			t.Errorf("schedule list after an rm cut short: exit %d, %q %q; want no schedules", code, out, errOut)
		}
		return nil
	})
	if err != nil || len(runs) != 1 {
		t.Fatalf("FireSchedules = %+v, %v; want the claimed slot pushed", runs, err)
	}
	if code, out, errOut := run(t, q, "schedule", "rm", "tick"); code != 0 || !strings.Contains(out, "removed schedule tick") {
		t.Fatalf("schedule rm again: exit %d, %q %q; want removed", code, out, errOut)
	}
}
