package servicebus_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jobq/jobq"
)

// TestShowRetriesLeftCountsDeliveries: Service Bus cannot rewrite a task,
// so its num_retries stays as pushed while failed deliveries use up the
// budget. `show` used to print num_retries as the retries left; it now
// prints the range the deliveries allow for a queued task, and none for a
// dead letter.
func TestShowRetriesLeftCountsDeliveries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the jobq binary")
	}
	t.Parallel()
	url := newQueueURL(t)
	bin := jobqBinary(t)
	q, _ := open(t, url)
	ctx := ctxT(t)
	pushed, err := q.Push(ctx, &jobq.Task{Command: "false", NumRetries: 3})
	if err != nil {
		t.Fatal(err)
	}
	show := func() string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, url, "show", pushed.ID)
		cmd.Env = append(os.Environ(), "JOBQ_SERVICEBUS_CONNECTION_STRING="+env.connStr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("show: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "retries left"); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("show printed no retries left:\n%s", out)
		return ""
	}
	abandon(ctx, t, q, 2)
	if got := show(); !strings.HasPrefix(got, "1 to 3 ") {
		t.Errorf("retries left of a task with num_retries 3 after 2 failed deliveries: %q; want 1 to 3", got)
	}
	if err := receive(t, q).DeadLetter(ctx, "bad", ""); err != nil {
		t.Fatal(err)
	}
	if got := show(); !strings.HasPrefix(got, "none ") {
		t.Errorf("retries left of a dead letter: %q; want none", got)
	}
}
