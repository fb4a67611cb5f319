package confsuite

import (
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/stash"
	"github.com/jobq/jobq/wire"
)

// stashTaskBytes is the size of the large task checkStash pushes: several
// MiB, beyond the limits of the cloud queues (64 and 256 KiB).
const stashTaskBytes = 3 << 20

// CheckStashAt runs the Stash check with the stash store at stashURL (see
// conformance.RunStash).
func CheckStashAt(c *C, stashURL string) { checkStashAt(c, stashURL) }

// checkStash runs the Stash check with a fresh directory store.
func checkStash(c *C) {
	dir, err := os.MkdirTemp("", "jobq-conformance-stash-")
	if err != nil {
		c.Fatalf("make a stash directory: %v", err)
	}
	c.Cleanup(func() { _ = os.RemoveAll(dir) })
	checkStashAt(c, "file://"+filepath.ToSlash(dir))
}

// checkStashAt: with the stash at stashURL configured, a task of several
// MiB round-trips whole, its object exists only while the task is queued,
// and the queued message fits the backend's limit; without a stash,
// pushing it fails with TooLarge and says how to configure one. Backends
// whose limit is larger (or absent) carry the task inline and must not
// touch the stash.
func checkStashAt(c *C, stashURL string) {
	url := c.newQueue()
	plain := c.openQueue(url)
	limit := plain.Capabilities().MaxMessageBytes
	big := &jobq.Task{Command: "echo stash " + rand.Text() + " " + strings.Repeat("0123456789abcdef", stashTaskBytes/16)}
	body, err := wire.Marshal(&jobq.Task{Command: big.Command})
	if err != nil {
		c.Fatalf("encode the large task: %v", err)
	}
	stashed := limit > 0 && len(body) > limit
	if stashed {
		_, err := plain.Push(c.ctx(), &jobq.Task{Command: big.Command})
		c.expectCode(err, errcode.TooLarge, fmt.Sprintf("push of a %d-byte task without a stash (limit %d)", len(body), limit))
		if err != nil && !strings.Contains(err.Error(), "stash") {
			c.Errorf("the TooLarge error does not say how to configure a stash: %v", err)
		}
	}

	store, err := stash.Open(c.ctx(), stashURL)
	if err != nil {
		c.Fatalf("open stash %s: %v", stashURL, err)
	}
	c.Cleanup(func() { _ = store.Close() })
	sq, err := c.openWith(url, jobq.Options{StashURL: stashURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		c.Fatalf("open %s with stash %s: %v", redact.URL(url), stashURL, err)
	}
	c.Cleanup(func() { _ = sq.Close() })
	q := &handle{Queue: sq, ref: url, logs: &logStore{}}

	c.push(q, big)
	// The object is the task as pushed (its ID set), named by its SHA-256.
	pushed, err := wire.Marshal(big)
	if err != nil {
		c.Fatalf("encode the pushed task: %v", err)
	}
	name := stash.Sum(pushed)
	exists := func() bool {
		_, err := store.Get(c.ctx(), name, 1)
		if err != nil && errcode.Of(err) != errcode.NotFound {
			c.Fatalf("look for the stash object %s: %v", name, err)
		}
		return err == nil
	}
	if got := exists(); got != stashed {
		c.Errorf("stash object present: %v after pushing a %d-byte task to a backend limited to %d bytes (0: none); want %v", got, len(body), limit, stashed)
	}
	e := c.receive(q, c.longVis(q))
	if e.Task.ID != big.ID || e.Task.Command != big.Command || e.Task.Stash != nil {
		c.Fatalf("the large task came back changed: id %s (want %s), %d-byte command (want %d), stash %v",
			e.Task.ID, big.ID, len(e.Task.Command), len(big.Command), e.Task.Stash)
	}
	c.complete(e)
	if exists() {
		c.Errorf("the stash object remains after the task completed; Complete must delete it")
	}
	c.Logf("a %d-byte task round-tripped through %s (stashed: %v)", len(body), store.Location(), stashed)
}
