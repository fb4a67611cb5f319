package redis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestClaimPastFullKeysGoesOnFromACursor: more than 1,024 ready messages
// of a key at its cap ahead of others no longer hide the others. Each
// claim looks at 1,024 more past the head, from where the last one
// stopped; once one finds work, the next ones look at the head's first 64
// and go on from there. A message of
// higher priority, at the head, is still claimed first, and a key that
// frees a slot has its next message claimed before the ones behind.
// Clearing the queue drops its cursor.
func TestClaimPastFullKeysGoesOnFromACursor(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	if err := d.SetPolicy(ctx, driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "full", Limit: 1}); err != nil {
		t.Fatal(err)
	}
	keyed := func(id, key string, pri int) *driver.Message {
		m := msg(id, pri)
		m.ConcurrencyKey = key
		return m
	}
	push(t, d, keyed("full-first", "full", 0))
	first := receive(t, d, 1, time.Minute)
	if len(first) != 1 {
		t.Fatalf("claimed %d; want full-first", len(first))
	}
	for b := 0; b < 3; b++ {
		msgs := make([]*driver.Message, 1000)
		for i := range msgs {
			msgs[i] = keyed(fmt.Sprintf("full-%d", b*1000+i), "full", 0)
		}
		push(t, d, msgs...)
	}
	for i := range 30 {
		push(t, d, keyed(fmt.Sprintf("late-%d", i), fmt.Sprintf("late%d", i%3), 0))
	}
	// 3,000 of full: the head's 1,024 and two more looks of 1,024 each.
	var got []*driver.Received
	claims := 0
	for len(got) == 0 && claims < 5 {
		got = receive(t, d, 5, time.Minute)
		claims++
	}
	if len(got) != 5 || !allPrefixed(got, "late-") {
		t.Fatalf("after %d claims got %v; want five of late", claims, ids(got))
	}
	if claims > 3 {
		t.Errorf("found late after %d claims; want 3 at most (1,024 more messages a claim)", claims)
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 5 || !allPrefixed(got, "late-") {
		t.Fatalf("the next claim got %v; want five of late, from the cursor", ids(got))
	}
	// A claim from the cursor looks at the head's first 64 messages only,
	// not at the rest before the cursor: a message there whose key is
	// changed behind the driver's back to one without a cap stays put.
	members, err := d.client.ZRange(ctx, d.prefix+"ready", 500, 500).Result()
	if err != nil || len(members) != 1 {
		t.Fatalf("ready message at rank 500: %v, %v", members, err)
	}
	if err := d.client.HSet(ctx, d.prefix+"m:"+members[0][16:], "c", "late1").Err(); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 5 || !allPrefixed(got, "late-") {
		t.Fatalf("a claim with the cursor held got %v; want five of late, none of the messages it skips", ids(got))
	}
	// Higher priority: the head itself.
	push(t, d, keyed("urgent", "late0", 5))
	if got := receive(t, d, 5, time.Minute); len(got) != 5 || got[0].ID != "urgent" || !allPrefixed(got[1:], "late-") {
		t.Fatalf("claim after an urgent push got %v; want urgent, then four of late", ids(got))
	}
	// full frees its slot: its next message comes first.
	if err := errors.Join(d.Complete(ctx, []driver.CompleteParams{{Lease: first[0].Lease}})...); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, d, 5, time.Minute); len(got) != 5 || got[0].ID != "full-0" || !allPrefixed(got[1:], "late-") {
		t.Fatalf("claim after full's slot freed got %v; want full-0, then four of late", ids(got))
	}
	// Clearing the queue drops its cursor.
	cursor := func() int64 {
		n, err := d.client.Exists(ctx, d.prefix+"ccur").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if cursor() != 1 {
		t.Fatal("the queue's cursor is gone before the clear")
	}
	if _, err := d.Clear(ctx); err != nil {
		t.Fatal(err)
	}
	if cursor() != 0 {
		t.Error("the queue's cursor outlived a clear")
	}
}

func allPrefixed(rs []*driver.Received, prefix string) bool {
	for _, r := range rs {
		if !strings.HasPrefix(r.ID, prefix) {
			return false
		}
	}
	return true
}

func ids(rs []*driver.Received) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}
