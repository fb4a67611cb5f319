package azqueue

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

func TestEncodeText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		body  []byte
		plain bool
	}{
		{"ai4s-jobq task", []byte(`{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"echo hi\"}", "num_retries": 0, "id": "x"}`), true},
		{"json with markup characters", []byte(`{"a": "<b>&amp;</b>"}`), true},
		{"json with non-ascii", []byte("{\"a\": \"\u00e9\"}"), true},
		{"empty (base64 of nothing is nothing)", []byte{}, true},
		{"text", []byte("hello"), false},
		{"brace with control character", []byte("{\x00}"), false},
		{"brace with invalid utf-8", []byte("{\xff}"), false},
		{"array", []byte(`[1, 2]`), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			text := encodeText(c.body)
			if got := text == string(c.body); got != c.plain {
				t.Errorf("encodeText(%q) = %q; plain = %v, want %v", c.body, text, got, c.plain)
			}
			if back := decodeText(text); !bytes.Equal(back, c.body) {
				t.Errorf("decodeText(encodeText(%q)) = %q", c.body, back)
			}
		})
	}
}

func TestDecodeTextReadsBothEncodings(t *testing.T) {
	t.Parallel()
	task := `{"version": 1, "kwargs": "{}", "num_retries": 0, "id": "a"}`
	cases := []struct {
		name, text, want string
	}{
		{"plain json as ai4s-jobq writes it", task, task},
		{"base64 json as Azure Functions write it", base64.StdEncoding.EncodeToString([]byte(task)), task},
		{"neither: returned as is for the poison path", "not base64!", "not base64!"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := string(decodeText(c.text)); got != c.want {
				t.Errorf("decodeText(%q) = %q, want %q", c.text, got, c.want)
			}
		})
	}
}

func TestDeadBodyRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		body []byte
	}{
		{"task", []byte(`{"version": 1, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 0, "id": "abc"}`)},
		{"empty object", []byte(`{}`)},
		{"object with inner spaces", []byte(`{ }`)},
		{"already has an error key", []byte(`{"error": "old", "id": "abc"}`)},
		{"poison text", []byte("not json at all")},
		{"poison binary", []byte{0, 1, 2}},
		{"truncated json", []byte(`{"id": "abc"`)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			info := deadInfo{Reason: "failed: exit 1", Detail: "tail\nof output", DeadAt: at, DeliveryCount: 3, MessageID: "m1"}
			dead, kept := deadBody(c.body, info, MaxMessageBytes)
			if !kept {
				t.Fatal("reason not kept for a small body")
			}
			orig, got := parseDead(dead)
			if !bytes.Equal(orig, c.body) {
				t.Errorf("restored body = %q, want %q (dead letter %s)", orig, c.body, dead)
			}
			if got.Reason != info.Reason || got.Detail != info.Detail || !got.DeadAt.Equal(at) || got.DeliveryCount != 3 || got.MessageID != "m1" {
				t.Errorf("record = %+v, want %+v", got, info)
			}
		})
	}
}

func TestDeadBodyFitsTheLimit(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id": "abc", "kwargs": "` + strings.Repeat("k", 60*1024) + `"}`)
	detail := strings.Repeat("line of output\n", 1000) + "LAST LINE"
	dead, kept := deadBody(body, deadInfo{Reason: "failed", Detail: detail}, MaxMessageBytes)
	if !kept || len(encodeText(dead)) > MaxMessageBytes {
		t.Fatalf("kept = %v, %d bytes; want the record kept within %d bytes", kept, len(dead), MaxMessageBytes)
	}
	orig, info := parseDead(dead)
	if !bytes.Equal(orig, body) {
		t.Error("body changed")
	}
	if !strings.HasSuffix(info.Detail, "LAST LINE") || !strings.HasPrefix(info.Detail, "...") {
		t.Errorf("detail should keep its tail: %q...", info.Detail[:min(40, len(info.Detail))])
	}

	full := []byte(`{"id": "abc", "kwargs": "` + strings.Repeat("k", MaxMessageBytes-30) + `"}`)
	dead, kept = deadBody(full, deadInfo{Reason: strings.Repeat("r", 500)}, MaxMessageBytes)
	if kept || !bytes.Equal(dead, full) {
		t.Errorf("a body at the limit must be kept as it is, without the record (kept = %v)", kept)
	}
}

func TestParseDeadFromAi4sJobq(t *testing.T) {
	t.Parallel()
	// ai4s-jobq stores the bare task; its Task.error never reaches the wire.
	task := []byte(`{"version": 1, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": "abc"}`)
	orig, info := parseDead(task)
	if !bytes.Equal(orig, task) || info.Reason != "" {
		t.Errorf("parseDead = %q, %+v", orig, info)
	}
	if id := taskID(orig); id != "abc" {
		t.Errorf("taskID = %q", id)
	}
}

func TestPollPause(t *testing.T) {
	t.Parallel()
	q := &Driver{cfg: config{pollMin: 50 * time.Millisecond, pollMax: time.Second}}
	want := []time.Duration{50, 50, 100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		q.empties.Store(int64(i))
		if got := q.pollPause(); got != w*time.Millisecond {
			t.Errorf("after %d empty polls: pause %v, want %v", i, got, w*time.Millisecond)
		}
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   time.Duration
		want int32
	}{
		{0, 0}, {-time.Second, 0}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {MaxVisibility, 604800},
	}
	for _, c := range cases {
		if got := seconds(c.in); got != c.want {
			t.Errorf("seconds(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}
