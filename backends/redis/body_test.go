package redis

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/bodypack"
	"github.com/jobq/jobq/wire"
)

// wireMessage is t as the portable layer pushes it: its ai4s-jobq body and
// task ID.
func wireMessage(t testing.TB, task *jobq.Task) *driver.Message {
	t.Helper()
	body, err := wire.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	return &driver.Message{ID: task.ID, Body: body}
}

func TestPackBody(t *testing.T) {
	t.Parallel()
	kwargs := json.RawMessage(`{"n": 4}`)
	tests := []struct {
		name   string
		msg    *driver.Message
		packs  bool
		within int // the packed body's most bytes; 0 for no bound
	}{
		{"v1", wireMessage(t, &jobq.Task{Payload: kwargs}), true, 64},
		{"v1 with a reply requested", wireMessage(t, &jobq.Task{Payload: kwargs, ReplyRequested: true}), true, 64},
		{"v1 retried", wireMessage(t, &jobq.Task{Payload: kwargs, NumRetries: 3}), true, 0},
		{"v2", wireMessage(t, &jobq.Task{Payload: kwargs, Kind: "render", Metadata: map[string]string{"a": "b"}}), true, 0},
		{"v2 with a reply requested", wireMessage(t, &jobq.Task{Payload: kwargs, Kind: "render", ReplyRequested: true}), true, 0},
		{"own ID with quotes", wireMessage(t, &jobq.Task{Payload: kwargs, ID: `a"b\c`}), true, 0},
		{"no task ID", &driver.Message{Body: []byte(`{"version": 1, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": ""}`)}, true, 64},
		{"body ID not the task ID", &driver.Message{ID: "x", Body: []byte(`{"version": 1, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": "y"}`)}, true, 0},
		{"suffix only", &driver.Message{ID: "x", Body: []byte(`{"version": 3, "num_retries": 0, "id": "x"}`)}, true, 0},
		{"plain text", &driver.Message{ID: "x", Body: []byte("body-x")}, false, 0},
		{"empty", &driver.Message{ID: "x", Body: nil}, false, 0},
		{"prefix cut short", &driver.Message{ID: "x", Body: []byte(`{"version": 1, "reply_requested": false, "kwarg`)}, false, 0},
		{"id tail cut short", &driver.Message{ID: "x", Body: []byte(`"id": "x"}`)}, false, 0},
		{"binary", &driver.Message{ID: "x", Body: []byte{0, 0xff, '"', '}'}}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			packed, ok := bodypack.Pack(tt.msg.Body, tt.msg.ID)
			if ok != tt.packs {
				t.Fatalf("bodypack.Pack(%q) packs: %v; want %v", tt.msg.Body, ok, tt.packs)
			}
			if !ok {
				return
			}
			if tt.within > 0 && len(packed) > tt.within {
				t.Errorf("packed %q to %d bytes (%q); want at most %d", tt.msg.Body, len(packed), packed, tt.within)
			}
			got, ok := bodypack.Unpack(string(packed), tt.msg.ID)
			if !ok || !bytes.Equal(got, tt.msg.Body) {
				t.Errorf("bodypack.Unpack(%q) = %q, %v; want %q", packed, got, ok, tt.msg.Body)
			}
		})
	}
}

func TestUnpackBodyRejectsUnknownHeaders(t *testing.T) {
	t.Parallel()
	for _, packed := range []string{"", "a", "a{}", "p{}", "Z", "\x00"} {
		if body, ok := bodypack.Unpack(packed, "x"); ok {
			t.Errorf("bodypack.Unpack(%q) = %q; want it refused", packed, body)
		}
	}
}

func FuzzPackBody(f *testing.F) {
	f.Add([]byte(`{"version": 1, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": "x"}`), "x")
	f.Add([]byte(`{"version": 2, "reply_requested": true, "kwargs": "{}", "num_retries": 1, "id": "x"}`), "x")
	f.Add([]byte("body"), "")
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		packed, ok := bodypack.Pack(body, id)
		if !ok {
			return
		}
		got, ok := bodypack.Unpack(string(packed), id)
		if !ok || !bytes.Equal(got, body) {
			t.Fatalf("bodypack.Pack(%q, %q) = %q, which unpacks to %q, %v", body, id, packed, got, ok)
		}
	})
}

// TestPackedBodyLayout checks where a pushed ai4s-jobq task goes: a
// packed body in field z of a listpack hash, and no field b, which is all
// that a reader of the layout before packing looks at (it dead-letters
// the message as having no body, rather than running something else). The
// body comes back byte for byte from a claim, a peek and the dead letters.
func TestPackedBodyLayout(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := testCtx(t)
	m := wireMessage(t, &jobq.Task{Payload: json.RawMessage(`{"cmd": "render --frame 1234 --scene city"}`)})
	res := push(t, d, m)
	k := d.prefix + "m:" + res[0].MessageID
	fields, err := d.client.HGetAll(ctx, k).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["b"]; ok || fields["z"] == "" {
		t.Fatalf("message hash %v; want a packed body in z and no b", fields)
	}
	if enc := d.client.ObjectEncoding(ctx, k).Val(); enc != "listpack" && enc != "ziplist" {
		t.Errorf("message hash encoded as %s; want listpack", enc)
	}

	peek, err := d.Peek(ctx, 1)
	if err != nil || len(peek) != 1 || !bytes.Equal(peek[0].Body, m.Body) {
		t.Fatalf("peek: %+v, %v; want the body %q", peek, err, m.Body)
	}
	recs := receive(t, d, 1, time.Minute)
	if len(recs) != 1 || !bytes.Equal(recs[0].Body, m.Body) || recs[0].ID != m.ID {
		t.Fatalf("received %+v; want the body %q", recs, m.Body)
	}
	if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: recs[0].Lease, Reason: "r"}}); errs != nil {
		t.Fatal(errs)
	}
	dead, err := d.ListDead(ctx, 1)
	if err != nil || len(dead) != 1 || !bytes.Equal(dead[0].Body, m.Body) {
		t.Fatalf("dead letters: %+v, %v; want the body %q", dead, err, m.Body)
	}
}

// TestDeadLetterReplacesBody checks the driver contract on a dead letter's
// Body: nil keeps the stored body, any other value, even an empty one,
// replaces it.
func TestDeadLetterReplacesBody(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		body []byte
		want string
	}{
		{"nil keeps", nil, "original"},
		{"empty replaces", []byte{}, ""},
		{"new replaces", []byte("with history"), "with history"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			ctx := t.Context()
			if _, err := d.Push(ctx, []*driver.Message{{ID: "t", Body: []byte("original")}}); err != nil {
				t.Fatal(err)
			}
			recs := receive(t, d, 1, time.Minute)
			if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: recs[0].Lease, Reason: "r", Body: tt.body}}); errs != nil {
				t.Fatal(errs)
			}
			dead, err := d.ListDead(ctx, 1)
			if err != nil || len(dead) != 1 || string(dead[0].Body) != tt.want {
				t.Fatalf("dead letters: %+v, %v; want the body %q", dead, err, tt.want)
			}
		})
	}
}

// TestBodyLayouts checks that a message whose body is in field b, as every
// release before packing wrote it, is read after an upgrade, and that a
// new body (Requeue) replaces a packed one.
func TestBodyLayouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		change  func(t *testing.T, d *Driver, key string, body []byte)
		replace []byte // a new body given to Requeue; nil for none
	}{
		{"written before packing", func(t *testing.T, d *Driver, k string, body []byte) {
			ctx := testCtx(t)
			if err := d.client.HDel(ctx, k, "z").Err(); err != nil {
				t.Fatal(err)
			}
			if err := d.client.HSet(ctx, k, "b", body).Err(); err != nil {
				t.Fatal(err)
			}
		}, nil},
		{"packed, then replaced", func(*testing.T, *Driver, string, []byte) {}, []byte(`{"version": 2, "attempts": []}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			ctx := testCtx(t)
			m := wireMessage(t, &jobq.Task{Payload: json.RawMessage(`{"n": 1}`)})
			res := push(t, d, m)
			k := d.prefix + "m:" + res[0].MessageID
			tt.change(t, d, k, m.Body)
			want := m.Body
			if tt.replace != nil {
				recs := receive(t, d, 1, time.Minute)
				if errs := d.Requeue(ctx, []driver.RequeueParams{{Lease: recs[0].Lease, Body: tt.replace}}); errs != nil {
					t.Fatal(errs)
				}
				if n := d.client.HExists(ctx, k, "z").Val(); n {
					t.Error("the replaced body's hash still has a packed body")
				}
				want = tt.replace
			}
			recs := receive(t, d, 1, time.Minute)
			if len(recs) != 1 || !bytes.Equal(recs[0].Body, want) {
				t.Fatalf("received %+v; want the body %q", recs, want)
			}
		})
	}
}

// TestLayoutMark checks what New does to a queue an earlier release laid
// out (delayed messages in P..'delayed', max-depth in P..'pold'): it moves
// them to the keys this release reads, and leaves in the old names keys on
// which the earlier release's scripts fail before changing anything.
func TestLayoutMark(t *testing.T) {
	t.Parallel()
	raw := newQueueURL(t, "")
	d := openURL(t, raw)
	ctx := testCtx(t)
	push(t, d, &driver.Message{ID: "later", Body: []byte("x"), NotBefore: time.Now().Add(time.Hour)})
	// Lay the keys out as an earlier release did.
	c, P := d.client, d.prefix
	for _, cmd := range [][]any{
		{"del", P + "delayed", P + "pold"},
		{"rename", P + "due", P + "delayed"},
		{"set", P + "pold", "7"},
	} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}

	d2 := openURL(t, raw)
	if s := stats(t, d2); s.Delayed != 1 {
		t.Errorf("after the layout mark, stats %+v; want the delayed message counted", s)
	}
	pols, err := d2.ListPolicies(ctx)
	if err != nil || len(pols) != 1 || pols[0].Kind != driver.MaxDepthPolicy || pols[0].Limit != 7 {
		t.Errorf("after the layout mark, policies %+v, %v; want max-depth 7", pols, err)
	}
	// The first commands of an earlier release's claim (promoting due
	// delayed messages) and push (reading max-depth) now fail.
	if err := c.ZRangeByScore(ctx, P+"delayed", &goredis.ZRangeBy{Min: "-inf", Max: "+inf"}).Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("an earlier release's claim reads the delayed set: %v; want WRONGTYPE", err)
	}
	if err := c.Get(ctx, P+"pold").Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("an earlier release's push reads max-depth: %v; want WRONGTYPE", err)
	}
	// Opening again changes nothing.
	d3 := openURL(t, raw)
	if s := stats(t, d3); s.Delayed != 1 {
		t.Errorf("after a second open, stats %+v; want the delayed message counted once", s)
	}
}
