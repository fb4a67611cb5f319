package jobq_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/wire"
)

// TestGroupNames: a push refuses a group name no backend can keep, with
// an InvalidArgument error naming the problem, and stores nothing.
func TestGroupNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		group, want string
	}{
		{"sweep\x00", "NUL"},
		{"sweep\n2", "control character"},
		{strings.Repeat("g", driver.MaxGroupBytes+1), "the limit is"},
		{"\xff", "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			d, err := mem.New(mem.Options{Queue: "group-names-" + tt.want})
			if err != nil {
				t.Fatal(err)
			}
			q, err := jobq.New(d, jobq.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			_, err = q.Push(context.Background(), &jobq.Task{Command: "true", Group: tt.group})
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("push with group %q: %v; want InvalidArgument naming %q", tt.group, err, tt.want)
			}
			if n, _ := q.Admin().Size(context.Background()); n != 0 {
				t.Errorf("a refused push stored %d tasks", n)
			}
		})
	}
}

// TestGroupKeepsTheID: a task's group is not part of its ID or body.
func TestGroupKeepsTheID(t *testing.T) {
	t.Parallel()
	d, err := mem.New(mem.Options{Queue: "group-id"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(d, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ctx := context.Background()
	a, err := q.Push(ctx, &jobq.Task{Command: "echo same", Group: "a"})
	if err != nil {
		t.Fatal(err)
	}
	plain := &jobq.Task{Command: "echo same"}
	body, err := wire.Marshal(plain)
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != plain.ID {
		t.Fatalf("grouped task ID %s; the same task without a group has %s", a.ID, plain.ID)
	}
	ps, err := q.Admin().Peek(ctx, 1)
	if err != nil || len(ps) != 1 || string(ps[0].Body) != string(body) {
		t.Fatalf("peeked %v, %v; want the body without a group %s", ps, err, body)
	}
}
