package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestPushOnAPoolOfOne: with pool_max_conns=1, a one-task push (which
// holds a connection of its own while it waits for the commit) and a batch
// push, with and without a max-depth policy, store their tasks instead of
// waiting forever for a second connection to read the policies.
func TestPushOnAPoolOfOne(t *testing.T) {
	t.Parallel()
	d := openDriver(t, "pool_max_conns=1")
	for _, step := range []struct {
		name  string
		setup func(ctx context.Context) error
	}{
		{"no policies", func(context.Context) error { return nil }},
		{"max-depth", func(ctx context.Context) error {
			return d.SetPolicy(ctx, driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 100})
		}},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		if err := step.setup(ctx); err != nil {
			cancel()
			t.Fatalf("%s: %v", step.name, err)
		}
		d.policies.mu.Lock()
		d.policies.loaded = time.Time{} // read them again, as a new process would
		d.policies.mu.Unlock()
		for _, n := range []int{1, 2} {
			msgs := make([]*driver.Message, n)
			for i := range msgs {
				msgs[i] = &driver.Message{Body: []byte("b")}
			}
			if _, err := d.Push(ctx, msgs); err != nil {
				t.Errorf("%s: push of %d on a pool of one: %v", step.name, n, err)
			}
		}
		cancel()
	}
	st, err := d.Stats(t.Context())
	if err != nil || st.Ready != 6 {
		t.Errorf("stats after the pushes = %+v, %v; want 6 ready", st, err)
	}
}
