package redis

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

func TestParseClaimed(t *testing.T) {
	t.Parallel()
	member := "0000000000000042" + "42"
	for _, tc := range []struct {
		name string
		in   string
		want claimed
		ok   bool
	}{
		{"plain body", "18 1 1700000000000 3 0 b " + member + "t-1" + `{"a": 1}`,
			claimed{member: member, id: "t-1", body: `{"a": 1}`, deliveries: 1, enqueued: 1700000000000}, true},
		{"packed body", "18 2 5 0 0 z " + member + "\x01packed",
			claimed{member: member, body: "\x01packed", deliveries: 2, enqueued: 5, packed: true}, true},
		{"no enqueue time", "18 1  0 0 b " + member + "x",
			claimed{member: member, body: "x", deliveries: 1}, true},
		{"trace and group", "18 1 7 1 7 b " + member + "itrace\ngbody",
			claimed{member: member, id: "i", trace: "trace", group: "g", body: "body", deliveries: 1, enqueued: 7}, true},
		{"fields that look like a header", "18 3 7 9 0 b " + member + "a b\n1 2 3" + "18 1 7 0 0 b \n",
			claimed{member: member, id: "a b\n1 2 3", body: "18 1 7 0 0 b \n", deliveries: 3, enqueued: 7}, true},
		{"empty body", "18 1 7 0 0 b " + member,
			claimed{member: member, deliveries: 1, enqueued: 7}, true},
		{"a header field missing", "18 1 7 0 0", claimed{}, false},
		{"lengths beyond the string", "18 1 7 5 0 b " + member + "abc", claimed{}, false},
		{"a negative length", "18 1 7 -1 0 b " + member, claimed{}, false},
		{"a length that is not a number", "x 1 7 0 0 b " + member, claimed{}, false},
		{"an enqueue time that is not a number", "18 1 x 0 0 b " + member, claimed{}, false},
		{"an unknown kind", "18 1 7 0 0 q " + member, claimed{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseClaimed(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseClaimed(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestClaimedReceivedSplitsTheMember(t *testing.T) {
	t.Parallel()
	expiry := time.Unix(100, 0)
	for _, tc := range []struct{ member, token, mid string }{
		{"000000000000004242", "0000000000000042", "42"},
		{"short", "short", ""}, // another tool's member: the lease check fails it later
	} {
		c := claimed{member: tc.member, id: "t", body: "b"}
		r := c.received(expiry)
		if r.Lease.Token != tc.token || r.Lease.MessageID != tc.mid || !r.Lease.Expiry.Equal(expiry) || r.ID != "t" || string(r.Body) != "b" {
			t.Errorf("member %q: %+v; want token %q, message id %q", tc.member, r, tc.token, tc.mid)
		}
	}
}

// TestClaimCarriesEveryField round-trips messages whose task ID, trace
// context, group and body hold spaces, newlines and bytes of every value
// through the claim script's reply.
func TestClaimCarriesEveryField(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	msgs := []*driver.Message{
		{ID: "id with spaces\nand a newline", Body: []byte("18 1 7 0 0 b body that looks like a header"), Group: "g 1",
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{ID: "bytes", Body: all},
		{ID: "", Body: []byte(strings.Repeat("x", 5000))},
		{ID: "empty", Body: []byte{}},
	}
	if _, err := d.Push(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	got, err := d.Receive(t.Context(), driver.ReceiveParams{Max: len(msgs), Visibility: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(msgs) {
		t.Fatalf("received %d of %d messages", len(got), len(msgs))
	}
	for i, m := range msgs {
		r := got[i]
		if r.ID != m.ID || !bytes.Equal(r.Body, m.Body) || r.Group != m.Group || r.TraceParent != m.TraceParent || r.DeliveryCount != 1 ||
			r.EnqueuedAt.IsZero() || r.Lease.MessageID == "" || len(r.Lease.Token) != tokenLen {
			t.Errorf("message %d: received %+v (body %q); pushed %+v", i, r, r.Body, m)
		}
	}
	// The leases hold: completing every message succeeds.
	for i, err := range d.Complete(t.Context(), completeAll(got)) {
		if err != nil {
			t.Errorf("complete message %d: %v", i, err)
		}
	}
}

// completeAll is a completion of each message received.
func completeAll(rs []*driver.Received) []driver.CompleteParams {
	out := make([]driver.CompleteParams, len(rs))
	for i, r := range rs {
		out[i] = driver.CompleteParams{Lease: r.Lease}
	}
	return out
}
