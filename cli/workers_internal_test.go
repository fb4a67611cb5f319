package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{54136832, "51.6 MiB"}, {3 << 30, "3.0 GiB"},
	} {
		if got := humanBytes(tc.n); got != tc.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestTaskList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{nil, "0"},
		{[]string{"a"}, "1 (a)"},
		{[]string{"b2a546ae4f20defefa4b583a60e35d69", "c"}, "2 (b2a546ae4..., c)"},
		{[]string{"a", "b", "c"}, "3 (a, b, ...)"},
	} {
		if got := taskList(tc.ids); got != tc.want {
			t.Errorf("taskList(%q) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}

// TestPrintWorkers: the table shows each worker's state, uptime, tasks,
// CPU, memory and heartbeat age; the JSON has the documented fields.
func TestPrintWorkers(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ws := []*jobq.WorkerInfo{{
		ID: "vm-7", Host: "vm", PID: 7, Started: now.Add(-2 * time.Hour), Heartbeat: now.Add(-4 * time.Second),
		Tasks: []string{"t1"}, Done: 9, Failed: 1, CPUPercent: 97.4, CPUSeconds: 120, RSSBytes: 2 << 20,
		Interval: 10 * time.Second, State: jobq.WorkerVanished,
	}}
	var table bytes.Buffer
	if err := printWorkers(&table, ws, now); err != nil {
		t.Fatal(err)
	}
	row := strings.Fields(strings.Split(table.String(), "\n")[1])
	want := []string{"vm-7", "vanished", "vm", "7", "1h59m56s", "1", "(t1)", "9", "1", "97%", "(2m0s)", "2.0", "MiB", "4s", "ago"}
	if strings.Join(row, " ") != strings.Join(want, " ") {
		t.Errorf("table row %q, want %q", row, want)
	}
	var js bytes.Buffer
	if err := printWorkersJSON(&js, ws, now); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "state", "host", "pid", "version", "started", "heartbeat", "uptime_s",
		"heartbeat_age_s", "interval_s", "tasks", "done", "failed", "cpu_percent", "cpu_seconds", "rss_bytes"} {
		if _, ok := got[0][k]; !ok {
			t.Errorf("workers --json lacks %q: %s", k, js.String())
		}
	}
	if got[0]["heartbeat_age_s"] != 4.0 || got[0]["state"] != "vanished" {
		t.Errorf("workers --json = %s", js.String())
	}
	var empty bytes.Buffer
	if err := printWorkers(&empty, nil, now); err != nil || !strings.Contains(empty.String(), "no live or vanished workers") {
		t.Errorf("empty table: %q, %v", empty.String(), err)
	}
}
