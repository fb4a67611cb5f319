package jobq_test

import (
	"context"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// countingOpener opens mem queues and counts its calls.
type countingOpener struct {
	mem.URLOpener
	opens *int
}

func (o countingOpener) Open(ctx context.Context, u *url.URL, opts driver.OpenOptions) (driver.Driver, error) {
	*o.opens++
	u2 := *u
	u2.Scheme = mem.Scheme
	return o.URLOpener.Open(ctx, &u2, opts)
}

// TestURLMuxOwnSchemes: a mux of the test's own opens its schemes, and only
// its schemes; the default mux knows nothing of them.
func TestURLMuxOwnSchemes(t *testing.T) {
	t.Parallel()
	var opens int
	var m jobq.URLMux // the zero value is ready to use
	if err := m.Register("Mine", countingOpener{opens: &opens}); err != nil {
		t.Fatal(err)
	}

	if got := m.Schemes(); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("Schemes() = %v, want [mine]", got)
	}
	if _, ok := m.Opener("MINE"); !ok {
		t.Error("Opener(MINE) not found: schemes are case-insensitive")
	}
	if _, ok := jobq.DefaultURLMux().Opener("mine"); ok {
		t.Error("a scheme registered on a mux of its own reached the default mux")
	}

	ctx := t.Context()
	q, err := m.Open(ctx, "mine://urlmux-own", jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if opens != 1 || hooks.Scheme(q) != "mine" || q.Name() != "urlmux-own" {
		t.Errorf("opens=%d scheme=%q name=%q; want 1, mine, urlmux-own", opens, hooks.Scheme(q), q.Name())
	}
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo hi"}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ url, want string }{
		{"mem://x", `unknown queue scheme "mem": registered schemes are mine`},
		{"no-scheme", "is not a queue URL"},
		{"", "no queue given"},
	} {
		_, err := m.Open(ctx, tc.url, jobq.Options{})
		if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v; want InvalidArgument containing %q", tc.url, err, tc.want)
		}
	}
}

// TestURLMuxRegisterRefuses: a scheme registered twice (in any case), an
// empty scheme and a nil opener are errors, not panics, and leave the mux
// as it was.
func TestURLMuxRegisterRefuses(t *testing.T) {
	t.Parallel()
	var m jobq.URLMux
	if err := m.Register("dup", mem.URLOpener{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		scheme string
		opener driver.Opener
		want   errcode.Code
	}{
		{"twice", "DUP", mem.URLOpener{}, errcode.AlreadyExists},
		{"empty scheme", "", mem.URLOpener{}, errcode.InvalidArgument},
		{"nil opener", "other", nil, errcode.InvalidArgument},
	}
	for _, tt := range tests {
		if err := m.Register(tt.scheme, tt.opener); errcode.Of(err) != tt.want {
			t.Errorf("%s: Register(%q) = %v; want code %v", tt.name, tt.scheme, err, tt.want)
		}
	}
	if got := m.Schemes(); len(got) != 1 || got[0] != "dup" {
		t.Errorf("Schemes() = %v after the refused registrations; want [dup]", got)
	}
}

// TestNew builds a queue from a driver value, with no URL and no mux.
func TestNew(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	if _, err := jobq.New(nil, jobq.Options{}); errcode.Of(err) != errcode.InvalidArgument {
		t.Errorf("New(nil) = %v, want InvalidArgument", err)
	}
	u, _ := url.Parse("mem://new-from-driver")
	d, err := mem.URLOpener{}.Open(ctx, u, driver.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobq.New(d, jobq.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo new"}); err != nil {
		t.Fatal(err)
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Task.Command != "echo new" {
		t.Errorf("received %q, want %q", e.Task.Command, "echo new")
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Stats(ctx); errcode.Of(err) != errcode.FailedPrecondition {
		t.Errorf("the driver after Queue.Close: %v; want FailedPrecondition (Close closes the driver)", err)
	}
}

// TestPushTxUnimplemented: a backend whose driver cannot join a transaction
// refuses PushTx with Unimplemented, before looking at the tasks.
func TestPushTxUnimplemented(t *testing.T) {
	t.Parallel()
	q, err := jobq.Open(t.Context(), "mem://pushtx-unimplemented")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = q.PushTx(t.Context(), struct{}{}, []*jobq.Task{{Command: "echo"}}, jobq.PushOptions{})
	if errcode.Of(err) != errcode.Unimplemented || !strings.Contains(err.Error(), "mem cannot push inside") {
		t.Errorf("PushTx on mem: %v; want Unimplemented naming the backend", err)
	}
}
