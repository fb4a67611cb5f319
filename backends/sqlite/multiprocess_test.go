package sqlite

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// Environment of a claimer child process (see TestClaimerProcess).
const (
	envClaimerDB  = "JOBQ_SQLITE_TEST_CLAIMER_DB"
	envClaimerOut = "JOBQ_SQLITE_TEST_CLAIMER_OUT"
	envClaimerMax = "JOBQ_SQLITE_TEST_CLAIMER_MAX"
)

// TestMultiProcessClaimsExactlyOnce runs several receiver processes (this
// test binary, re-executed) on one file and checks that every message is
// claimed by exactly one of them.
func TestMultiProcessClaimsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Parallel()
	b := setup(t, "")
	const n, procs = 3000, 4
	for i := 0; i < n; i += maxPushBatch {
		var batch []*driver.Message
		for j := i; j < min(i+maxPushBatch, n); j++ {
			batch = append(batch, msg(fmt.Sprint(j)))
		}
		b.push(t, batch...)
	}
	dir := t.TempDir()
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.CommandContext(b.ctx, os.Args[0], "-test.run=^TestClaimerProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			envClaimerDB+"="+b.path,
			envClaimerOut+"="+filepath.Join(dir, fmt.Sprint(p)),
			envClaimerMax+"="+fmt.Sprint(1+p%3), // batch sizes 1, 2, 3
		)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("claimer process: %v", err)
		}
	}
	owner := map[string]int{}
	busy := 0
	for p := range procs {
		data, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(p)))
		if err != nil {
			t.Fatal(err)
		}
		claimed := strings.Fields(string(data))
		t.Logf("process %d claimed %d messages", p, len(claimed))
		if len(claimed) > 0 {
			busy++
		}
		for _, id := range claimed {
			if q, dup := owner[id]; dup {
				t.Fatalf("message %s claimed by processes %d and %d", id, q, p)
			}
			owner[id] = p
		}
	}
	if len(owner) != n {
		t.Fatalf("%d messages claimed, want %d", len(owner), n)
	}
	if busy < 2 {
		t.Fatalf("only %d process claimed messages; the test did not exercise concurrent claims", busy)
	}
	if s := b.stats(t); s != (driver.Stats{}) {
		t.Fatalf("stats %+v after all claims completed, want empty", s)
	}
}

// TestClaimerProcess is the child of TestMultiProcessClaimsExactlyOnce: it
// drains the queue, writing the task IDs it claimed to a file. It does
// nothing when run normally.
func TestClaimerProcess(t *testing.T) {
	path := os.Getenv(envClaimerDB)
	if path == "" {
		t.Skip("only runs as a child of TestMultiProcessClaimsExactlyOnce")
	}
	u := &url.URL{Scheme: Scheme, Path: path}
	d, err := URLOpener{}.Open(t.Context(), u, driver.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	max, err := strconv.Atoi(os.Getenv(envClaimerMax))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for {
		got, err := d.Receive(t.Context(), driver.ReceiveParams{Max: max, Visibility: 10 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		var leases []driver.Lease
		for _, r := range got {
			out.WriteString(r.ID + "\n")
			leases = append(leases, r.Lease)
		}
		if errs := d.Complete(t.Context(), leases); errs != nil {
			t.Fatal(errs)
		}
	}
	if err := os.WriteFile(os.Getenv(envClaimerOut), []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}
