package azqueue_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/wire"
)

// A priority (which Storage Queue ignores) and a delay (which it applies
// natively) do not change how a task runs here, so the body stays schema v1
// with ai4s-jobq's ID, which ai4s-jobq workers can run. A task that needs v2
// draws one warning per queue.
func TestV2OnlyWhenItChangesHowTheTaskRuns(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	u := newQueueURL(t)
	q, err := jobq.OpenWithOptions(t.Context(), u, jobq.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	plain := &jobq.Task{Command: "echo v1"}
	wantID, err := wire.TaskID(plain)
	if err != nil {
		t.Fatal(err)
	}
	res, err := q.Push(t.Context(), &jobq.Task{Command: "echo v1", Priority: 7, NotBefore: time.Now().Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != wantID {
		t.Errorf("ID %s; want ai4s-jobq's %s (the v1 body's)", res.ID, wantID)
	}
	if strings.Contains(logs.String(), "schema v2") {
		t.Errorf("a v1 task drew the v2 warning:\n%s", logs.String())
	}
	for range 2 {
		if _, err := q.Push(t.Context(), &jobq.Task{Command: "echo gated", GateCmd: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "ai4s-jobq workers cannot run"); n != 1 {
		t.Errorf("%d warnings about v2 bodies; want 1 per queue:\n%s", n, logs.String())
	}
	time.Sleep(1100 * time.Millisecond) // the delayed task becomes visible
	ps, err := q.Admin().Peek(t.Context(), 32)
	if err != nil {
		t.Fatal(err)
	}
	versions := map[string]int{}
	for _, p := range ps {
		versions[p.Task.Command] = p.Task.Version
		if p.Task.Command == "echo v1" && !bytes.HasPrefix(p.Body, []byte(`{"version": 1,`)) {
			t.Errorf("body %s; want schema v1", p.Body)
		}
	}
	if versions["echo v1"] != 1 || versions["echo gated"] != 2 {
		t.Errorf("versions %v; want echo v1 → 1, echo gated → 2", versions)
	}
}
