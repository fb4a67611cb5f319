package redis

import (
	"fmt"
	"testing"

	"github.com/jobq/jobq/driver"
)

// TestReleaseManyAtOnce: one Release of more messages than one Lua unpack
// can take (about 8,000 values) stores them all.
func TestReleaseManyAtOnce(t *testing.T) {
	t.Parallel()
	d, ctx := openDriver(t), t.Context()
	const n = 5000
	msgs := make([]*driver.HeldMessage, n)
	ids := make([]string, n)
	for i := range msgs {
		ids[i] = fmt.Sprintf("many-%04d", i)
		msgs[i] = &driver.HeldMessage{Message: driver.Message{ID: ids[i], Body: []byte("b")}}
	}
	if _, err := d.Hold(ctx, msgs); err != nil {
		t.Fatalf("hold: %v", err)
	}
	rel, err := d.Release(ctx, ids)
	if err != nil || len(rel) != n {
		t.Fatalf("Release of %d = %d, %v; want all", n, len(rel), err)
	}
	st, err := d.Stats(ctx)
	if err != nil || st.Ready != n {
		t.Errorf("stats after the release = %+v, %v; want Ready %d", st, err, n)
	}
}
