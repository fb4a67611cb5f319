package mem

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestNewSharesByName: drivers built by New with one Name share the queue,
// which outlives a closed driver.
func TestNewSharesByName(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	name := "new-" + t.Name()
	a, err := New(Options{Queue: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Push(ctx, []*driver.Message{{ID: "t1", Body: []byte("a")}, {ID: "t2", Body: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: time.Minute, Wait: time.Second})
	if err != nil || len(got) != 1 || got[0].ID != "t1" {
		t.Fatalf("receive = %v, %v; want t1", got, err)
	}
	if errs := a.Complete(ctx, driver.Completions(got[0].Lease)); errs != nil {
		t.Fatalf("complete: %v", errs)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Queue: name})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st, err := b.Stats(ctx); err != nil || st.Ready != 1 {
		t.Fatalf("stats through a second driver = %+v, %v; want t2 ready", st, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		opts Options
		want string
	}{
		{Options{MaxMessageBytes: -1}, "max_message_bytes"},
		{Options{MaxVisibility: -time.Second}, "max_visibility"},
		{Options{MaxPeek: -1}, "max_peek"},
		{Options{Unsupported: []driver.Feature{driver.TransactionalPush}}, "cannot be declared unsupported"},
		{Options{Emulated: []driver.Feature{driver.InPlaceUpdate}}, "cannot be declared emulated"},
		{Options{Unsupported: []driver.Feature{driver.Peek}, Emulated: []driver.Feature{driver.Peek}}, "both"},
	}
	for _, tt := range tests {
		if _, err := New(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) || errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("New(%+v) = %v; want an InvalidArgument error containing %q", tt.opts, err, tt.want)
		}
	}
}
