package blobresults

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func held(id, group string) *driver.HeldMessage {
	return &driver.HeldMessage{Message: driver.Message{ID: id, Body: []byte(`{"id":"` + id + `"}`), Group: group}, After: []string{"p"}, Created: time.Now()}
}

// pusher records what Release pushes; fail makes the next push fail.
type pusher struct {
	mu     sync.Mutex
	pushed []string
	fail   error
}

func (p *pusher) push(_ context.Context, msgs []*driver.Message) ([]driver.PushResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.fail; err != nil {
		p.fail = nil
		return nil, err
	}
	out := make([]driver.PushResult, len(msgs))
	for i, m := range msgs {
		if m.Group != "" {
			return nil, errors.New("a released message carries its group (counted at Hold, not again)")
		}
		p.pushed = append(p.pushed, m.ID)
		out[i].MessageID = m.ID
	}
	return out, nil
}

// TestHeldListOrder: ListHeld pages through held IDs in ascending byte
// order, whatever their characters (the blob names are hex); an ID too
// long for a blob name is refused naming the limit.
func TestHeldListOrder(t *testing.T) {
	s, ctx := newStore(t), ctxOf(t)
	ids := []string{"b", "a", "aa", "A", "a-b", "a/b", "~x", "ü", "a b", "Z", strings.Repeat("x", MaxHeldIDLen)}
	var msgs []*driver.HeldMessage
	for _, id := range ids {
		msgs = append(msgs, held(id, ""))
	}
	if _, err := s.Hold(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		hs, next, err := s.ListHeld(ctx, cursor, 3)
		if err != nil || len(hs) > 3 || page > len(ids) {
			t.Fatalf("ListHeld page %d = %d, %v", page, len(hs), err)
		}
		for _, h := range hs {
			got = append(got, h.Message.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ListHeld paged through %q; want %q", got, want)
	}
	_, err := s.Hold(ctx, []*driver.HeldMessage{held(strings.Repeat("y", MaxHeldIDLen+1), "")})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), strconv.Itoa(MaxHeldIDLen)) {
		t.Errorf("Hold of a %d-byte ID: %v; want InvalidArgument naming the limit", MaxHeldIDLen+1, err)
	}
}

// setClaim puts a claim made at t by another sweeper on held task id.
func setClaim(t *testing.T, s *Store, id string, at time.Time) {
	t.Helper()
	meta := map[string]*string{heldClaim: to.Ptr("other " + strconv.FormatInt(at.UnixMilli(), 10))}
	if _, err := s.client.NewBlobClient(heldName(id)).SetMetadata(ctxOf(t), meta, nil); err != nil {
		t.Fatal(err)
	}
}

// TestHeldReleaseClaims: a release claims before it pushes. A standing
// claim of another sweeper keeps the task out of Release and Drop; one
// older than the grace is the claimer's death and is taken over (the
// task pushed again: at least once); a failed push unclaims, so the next
// release pushes it.
func TestHeldReleaseClaims(t *testing.T) {
	tests := []struct {
		name       string
		claimAge   time.Duration // 0: no claim
		failFirst  bool
		wantFirst  []string // released by the first Release
		wantDrop   bool     // Drop removes it after the first Release
		wantPushed []string
	}{
		{name: "unclaimed", wantFirst: []string{"t"}, wantPushed: []string{"t"}},
		{name: "claim standing", claimAge: time.Second, wantDrop: false},
		{name: "claim lapsed", claimAge: heldClaimGrace + time.Second, wantFirst: []string{"t"}, wantPushed: []string{"t"}},
		{name: "push fails", failFirst: true, wantDrop: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ctx := newStore(t), ctxOf(t)
			if r, err := s.Hold(ctx, []*driver.HeldMessage{held("t", "")}); err != nil || r[0].Duplicate {
				t.Fatalf("Hold = %v, %v", r, err)
			}
			if tt.claimAge > 0 {
				setClaim(t, s, "t", time.Now().Add(-tt.claimAge))
			}
			p := &pusher{}
			if tt.failFirst {
				p.fail = driver.Errorf(errcode.Unavailable, "push failed")
			}
			got, err := s.Release(ctx, []string{"t", "never-held"}, p.push)
			if tt.failFirst != (err != nil) || !slices.Equal(got, tt.wantFirst) {
				t.Errorf("Release = %v, %v; want %v (error %v)", got, err, tt.wantFirst, tt.failFirst)
			}
			if !slices.Equal(p.pushed, tt.wantPushed) {
				t.Errorf("pushed %v; want %v", p.pushed, tt.wantPushed)
			}
			left, err := s.HeldOf(ctx, []string{"t"})
			if err != nil || (len(left) == 1) != (len(tt.wantFirst) == 0) {
				t.Errorf("HeldOf after Release = %d, %v", len(left), err)
			}
			if len(tt.wantFirst) > 0 {
				return
			}
			dropped, err := s.Drop(ctx, []string{"t"})
			if err != nil || (len(dropped) == 1) != tt.wantDrop {
				t.Errorf("Drop = %v, %v; want dropped %v", dropped, err, tt.wantDrop)
			}
			if tt.failFirst {
				// Unclaimed by the failed release: held until dropped.
				if again, err := s.Release(ctx, []string{"t"}, p.push); err != nil || len(again) != 0 {
					t.Errorf("Release after Drop = %v, %v; want none", again, err)
				}
			}
		})
	}
}

// TestHeldPushFailsThenReleased: a release whose push fails leaves the
// task held and unclaimed, and the next release pushes it once.
func TestHeldPushFailsThenReleased(t *testing.T) {
	s, ctx := newStore(t), ctxOf(t)
	if _, err := s.Hold(ctx, []*driver.HeldMessage{held("t", "")}); err != nil {
		t.Fatal(err)
	}
	p := &pusher{fail: driver.Errorf(errcode.Unavailable, "push failed")}
	if got, err := s.Release(ctx, []string{"t"}, p.push); err == nil || len(got) != 0 {
		t.Fatalf("Release with a failing push = %v, %v; want an error", got, err)
	}
	got, err := s.Release(ctx, []string{"t"}, p.push)
	if err != nil || !slices.Equal(got, []string{"t"}) || !slices.Equal(p.pushed, []string{"t"}) {
		t.Errorf("the next Release = %v, %v, pushed %v; want t released and pushed once", got, err, p.pushed)
	}
}

// TestHeldGroupCounts: a held task counts in its group as pushed (the
// group open) from Hold, is not counted again by its release, and a Drop
// with no cancelled record written first ends it as cancelled.
func TestHeldGroupCounts(t *testing.T) {
	s, ctx := newStore(t), ctxOf(t)
	if _, err := s.Hold(ctx, []*driver.HeldMessage{held("x", "g"), held("y", "g")}); err != nil {
		t.Fatal(err)
	}
	counts := func(when string, want driver.GroupCounters) {
		t.Helper()
		c, err := s.GroupCounts(ctx, "g")
		if err != nil || c == nil {
			t.Fatalf("GroupCounts %s = %v, %v", when, c, err)
		}
		if c.Pushed != want.Pushed || c.Cancelled != want.Cancelled || c.Done() != want.Done() {
			t.Errorf("group %s: pushed %d, cancelled %d, done %v; want %d, %d, %v", when, c.Pushed, c.Cancelled, c.Done(), want.Pushed, want.Cancelled, want.Done())
		}
	}
	counts("after Hold", driver.GroupCounters{Pushed: 2})
	p := &pusher{}
	if got, err := s.Release(ctx, []string{"x"}, p.push); err != nil || len(got) != 1 {
		t.Fatalf("Release = %v, %v", got, err)
	}
	if dropped, err := s.Drop(ctx, []string{"y"}); err != nil || len(dropped) != 1 {
		t.Fatalf("Drop = %v, %v", dropped, err)
	}
	counts("after a Release and a Drop", driver.GroupCounters{Pushed: 2, Cancelled: 1})
}

// TestHeldIdleListing: a store whose listing found no held task answers
// the next from that, without a request, for heldIdleRecheck (another
// store's hold is not seen yet), and lists again once it holds one.
func TestHeldIdleListing(t *testing.T) {
	a, ctx := newStore(t), ctxOf(t)
	b := New(a.client, a.where)
	if hs, _, err := a.ListHeld(ctx, "", 10); err != nil || len(hs) != 0 {
		t.Fatalf("ListHeld of an empty store = %d, %v", len(hs), err)
	}
	if _, err := b.Hold(ctx, []*driver.HeldMessage{held("from-b", "")}); err != nil {
		t.Fatal(err)
	}
	if hs, _, err := a.ListHeld(ctx, "", 10); err != nil || len(hs) != 0 {
		t.Errorf("ListHeld right after an empty listing = %d, %v; want none without a request", len(hs), err)
	}
	if hs, _, err := b.ListHeld(ctx, "", 10); err != nil || len(hs) != 1 {
		t.Errorf("ListHeld of the store that held = %d, %v; want 1", len(hs), err)
	}
	if _, err := a.Hold(ctx, []*driver.HeldMessage{held("from-a", "")}); err != nil {
		t.Fatal(err)
	}
	if hs, _, err := a.ListHeld(ctx, "", 10); err != nil || len(hs) != 2 {
		t.Errorf("ListHeld after this store held one = %d, %v; want both", len(hs), err)
	}
}
