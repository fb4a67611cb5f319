package jobq_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestPauseRefusesBadInput(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	cases := []struct {
		name string
		call func() error
		code errcode.Code
		want string
	}{
		{"control character in kind", func() error {
			_, err := q.Admin().Pause(t.Context(), jobq.PauseOptions{Kind: "a\nb"})
			return err
		}, errcode.InvalidArgument, "control character"},
		{"kind not UTF-8", func() error {
			_, err := q.Admin().Pause(t.Context(), jobq.PauseOptions{Kind: "g\xffpu"})
			return err
		}, errcode.InvalidArgument, "not valid UTF-8"},
		{"key too long", func() error {
			_, err := q.Admin().Resume(t.Context(), jobq.PauseOptions{Key: strings.Repeat("k", driver.MaxPolicyKeyLen+1)})
			return err
		}, errcode.InvalidArgument, "bytes long"},
		{"policy set pause", func() error {
			return q.Admin().SetPolicy(t.Context(), driver.PauseState{}.Policy())
		}, errcode.InvalidArgument, "Admin.Pause"},
		{"policy unset pause", func() error {
			_, err := q.Admin().UnsetPolicy(t.Context(), driver.PausePolicy, "")
			return err
		}, errcode.InvalidArgument, "Admin.Resume"},
		{"backend without pause", func() error {
			_, err := openMem(t, "unsupported=pause").Admin().Pause(t.Context(), jobq.PauseOptions{})
			return err
		}, errcode.Unimplemented, "does not support pause"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.code) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want code %v mentioning %q", err, tc.code, tc.want)
			}
		})
	}
	if pols, err := q.Admin().Policies(t.Context()); err != nil || len(pols) != 0 {
		t.Fatalf("refused calls stored policies: %v, %v", pols, err)
	}
}

func TestPauseScopes(t *testing.T) {
	t.Parallel()
	q := openMem(t, "")
	adm := q.Admin()
	for _, o := range []jobq.PauseOptions{{}, {Kind: "render"}, {Key: "gpu=a/b"}, {Kind: "render", Key: "gpu=a/b", By: "ops@x"}} {
		s, err := adm.Pause(t.Context(), o)
		if err != nil {
			t.Fatalf("Pause(%+v): %v", o, err)
		}
		if s.TaskKind != o.Kind || s.Key != o.Key || s.By == "" || (o.By != "" && s.By != o.By) {
			t.Errorf("Pause(%+v) = %+v", o, s)
		}
	}
	if _, err := adm.Pause(t.Context(), jobq.PauseOptions{By: "again@y"}); err != nil {
		t.Fatal(err)
	}
	pols, err := adm.Policies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ps := driver.Pauses(pols)
	if len(ps) != 4 {
		t.Fatalf("after four scopes paused (one twice) the queue has %d pauses: %+v", len(ps), ps)
	}
	for _, s := range ps {
		if s.Whole() && s.By != "again@y" {
			t.Errorf("pausing again kept the old author: %+v", s)
		}
	}
	task := &jobq.Task{Kind: "render", ConcurrencyKey: "gpu=a/b"}
	for _, s := range ps {
		if !s.Stops(task.Kind, task.ConcurrencyKey, task.RateLimitKey) {
			t.Errorf("%v does not stop a render task with key gpu=a/b", s)
		}
		if !s.Whole() && s.Stops("mail", "", "") {
			t.Errorf("%v stops a mail task without keys", s)
		}
	}
	for _, o := range []jobq.PauseOptions{{Kind: "render"}, {Key: "gpu=a/b"}, {Kind: "render", Key: "gpu=a/b"}, {}} {
		if had, err := adm.Resume(t.Context(), o); err != nil || !had {
			t.Errorf("Resume(%+v) = %v, %v; want true", o, had, err)
		}
	}
	if pols, _ := adm.Policies(t.Context()); len(driver.Pauses(pols)) != 0 {
		t.Errorf("pauses left after resuming every scope: %v", pols)
	}
}
