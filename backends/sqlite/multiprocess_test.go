package sqlite

import (
	"context"
	"errors"
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

// Environment of a claimer child process (see TestMain).
const (
	envClaimerDB  = "JOBQ_SQLITE_TEST_CLAIMER_DB"
	envClaimerOut = "JOBQ_SQLITE_TEST_CLAIMER_OUT"
	envClaimerMax = "JOBQ_SQLITE_TEST_CLAIMER_MAX"
	envClaimerGo  = "JOBQ_SQLITE_TEST_CLAIMER_GO" // a file whose creation starts the claimers
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
	start := filepath.Join(dir, "go")
	var cmds []*exec.Cmd
	for p := range procs {
		cmd := exec.CommandContext(b.ctx, os.Args[0])
		cmd.Env = append(os.Environ(),
			envClaimerDB+"="+b.path,
			envClaimerOut+"="+filepath.Join(dir, fmt.Sprint(p)),
			envClaimerMax+"="+fmt.Sprint(1+p%3), // batch sizes 1, 2, 3
			envClaimerGo+"="+start,
		)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	// Start them together once every process has opened the file.
	for p := range procs {
		for {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprint(p)) + ".ready"); err == nil {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := os.WriteFile(start, nil, 0o644); err != nil {
		t.Fatal(err)
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

// TestMain runs the claimer instead of the tests when the test binary is
// re-executed as a child of TestMultiProcessClaimsExactlyOnce.
func TestMain(m *testing.M) {
	if os.Getenv(envClaimerDB) != "" {
		if err := runClaimer(); err != nil {
			fmt.Fprintln(os.Stderr, "claimer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runClaimer drains the queue in the file named by the environment, writing
// the task IDs it claimed to a file.
func runClaimer() error {
	ctx := context.Background()
	path := os.Getenv(envClaimerDB)
	u := &url.URL{Scheme: Scheme, Path: path}
	d, err := URLOpener{}.Open(ctx, u, driver.OpenOptions{})
	if err != nil {
		return err
	}
	defer d.Close()
	max, err := strconv.Atoi(os.Getenv(envClaimerMax))
	if err != nil {
		return err
	}
	if err := os.WriteFile(os.Getenv(envClaimerOut)+".ready", nil, 0o644); err != nil {
		return err
	}
	for {
		if _, err := os.Stat(os.Getenv(envClaimerGo)); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	var out strings.Builder
	for {
		got, err := d.Receive(ctx, driver.ReceiveParams{Max: max, Visibility: 10 * time.Minute})
		if err != nil {
			return err
		}
		if len(got) == 0 {
			break
		}
		var leases []driver.Lease
		for _, r := range got {
			out.WriteString(r.ID + "\n")
			leases = append(leases, r.Lease)
		}
		if errs := d.Complete(ctx, driver.Completions(leases...)); errs != nil {
			return errors.Join(errs...)
		}
	}
	return os.WriteFile(os.Getenv(envClaimerOut), []byte(out.String()), 0o644)
}
