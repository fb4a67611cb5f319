package jobq_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
)

// unpauseWatch is an SQLite driver that, after each policy change, reads
// the stored policies as a worker would and counts the reads that found
// the queue not paused.
type unpauseWatch struct {
	*sqlite.Driver
	watching atomic.Bool
	unpaused atomic.Int32
}

func (d *unpauseWatch) look(ctx context.Context) {
	if !d.watching.Load() {
		return
	}
	pols, err := d.ListPolicies(ctx)
	if err != nil {
		panic(err)
	}
	for _, p := range pols {
		if s, err := driver.ParsePause(p); err == nil && s.Whole() {
			return
		}
	}
	d.unpaused.Add(1)
}

func (d *unpauseWatch) SetPolicy(ctx context.Context, p driver.Policy) error {
	err := d.Driver.SetPolicy(ctx, p)
	d.look(ctx)
	return err
}

func (d *unpauseWatch) UnsetPolicy(ctx context.Context, k driver.PolicyKind, key string) (bool, error) {
	had, err := d.Driver.UnsetPolicy(ctx, k, key)
	d.look(ctx)
	return had, err
}

// TestPauseAgainNeverUnpauses: pausing a paused queue again (another
// author records the new pause) never leaves a moment in which the
// stored policies say the queue is not paused, which a worker reading
// them then would take tasks in.
func TestPauseAgainNeverUnpauses(t *testing.T) {
	t.Parallel()
	d, err := sqlite.New(t.Context(), filepath.Join(t.TempDir(), "pause.db"), sqlite.Options{Queue: "pause-again"})
	if err != nil {
		t.Fatal(err)
	}
	w := &unpauseWatch{Driver: d}
	q, err := jobq.New(w, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	for _, by := range []string{"alice@a", "bob@b", "bob@b"} {
		if _, err := q.Admin().Pause(t.Context(), jobq.PauseOptions{By: by}); err != nil {
			t.Fatal(err)
		}
		w.watching.Store(true)
	}
	if n := w.unpaused.Load(); n > 0 {
		t.Errorf("pausing the paused queue again left it unpaused at %d of its writes", n)
	}
	pols, err := q.Admin().Policies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var pauses []driver.PauseState
	for _, p := range pols {
		if s, err := driver.ParsePause(p); err == nil {
			pauses = append(pauses, s)
		}
	}
	if len(pauses) != 1 || pauses[0].By != "bob@b" {
		t.Errorf("stored pauses %+v; want one, by bob@b", pauses)
	}
}
