package wire_test

import (
	"errors"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/wire"
)

// TestRoundTrip: the public codec reaches the root's, in both directions,
// and the ID it computes is the one Marshal sets.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	in := &jobq.Task{Command: "echo hi"}
	id, err := wire.TaskID(in)
	if err != nil {
		t.Fatal(err)
	}
	body, err := wire.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if in.ID != id {
		t.Errorf("Marshal set ID %q; TaskID said %q", in.ID, id)
	}
	out, err := wire.Unmarshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if out.Command != in.Command || out.ID != id {
		t.Errorf("Unmarshal(Marshal(t)) = %q %q; want %q %q", out.ID, out.Command, id, in.Command)
	}
	if _, err := wire.Unmarshal([]byte("not json")); !errors.Is(err, errcode.InvalidArgument) {
		t.Errorf("Unmarshal(garbage) = %v; want an InvalidArgument error", err)
	}
}
