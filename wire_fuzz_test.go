package jobq

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq/errcode"
)

// sameTask reports how a and b differ in what the wire carries, or "".
func sameTask(a, b *Task) string {
	switch {
	case a.ID != b.ID:
		return "ID"
	case a.Command != b.Command || a.Cwd != b.Cwd || a.DirSyncTo != b.DirSyncTo:
		return "command, cwd or bg_dirsync_to"
	case !slices.Equal(a.Env, b.Env) && !(len(a.Env) == 0 && len(b.Env) == 0):
		return "env"
	case string(a.Payload) != string(b.Payload):
		return "payload"
	case a.IsShell() != b.IsShell():
		return "IsShell"
	case a.NumRetries != b.NumRetries || a.ReplyRequested != b.ReplyRequested || a.Priority != b.Priority:
		return "num_retries, reply_requested or priority"
	case !a.NotBefore.Equal(b.NotBefore):
		return "not_before"
	case a.GateCmd != b.GateCmd || a.ConcurrencyKey != b.ConcurrencyKey || a.RateLimitKey != b.RateLimitKey:
		return "gate or keys"
	case len(a.Metadata)+len(b.Metadata) > 0 && !reflect.DeepEqual(a.Metadata, b.Metadata):
		return "metadata"
	case !reflect.DeepEqual(a.Stash, b.Stash):
		return "stash"
	case len(a.Attempts)+len(b.Attempts) > 0 && !reflect.DeepEqual(a.Attempts, b.Attempts):
		return "attempts"
	case a.RetryBackoff != b.RetryBackoff || a.TimeLimit != b.TimeLimit:
		return "retry_backoff or time_limit"
	}
	return ""
}

// FuzzUnmarshalTask: any body decodes to a task or an InvalidArgument
// error, never a panic; a decoded task re-encodes (unless it holds what
// Validate refuses) to a body that decodes to the same task and re-encodes
// to the same bytes.
func FuzzUnmarshalTask(f *testing.F) {
	v := loadWireVectors(f)
	for _, m := range v.Marshal {
		f.Add([]byte(m.Body))
	}
	for _, d := range v.Decode {
		f.Add([]byte(d.Body))
	}
	f.Add([]byte(`{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 1, "attempts": [{"delivery": 1, "outcome": "failed"}], "id": "a"}`))
	f.Add([]byte(`{"kwargs": "{\"cmd\": \"\"}"}`))
	f.Add([]byte(`{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 1, "retry_backoff": {"base": 10.0, "cap": 3600.0}, "time_limit": 7200.5, "id": "a"}`))
	f.Add([]byte(`{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 1, "retry_backoff": {"base": 1e-4, "cap": 1e300}, "time_limit": -1, "id": "a"}`))
	f.Add([]byte(`{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 1, "attempts": [{"delivery": 1, "outcome": "failure", "retry_delay": 0.25}], "id": "a"}`))
	f.Add([]byte(`{"kwargs": "{\"cmd\": \"\\ud800\"}"}`))
	f.Add([]byte(`{"version": 2, "reply_requested": false, "kwargs": "{\"a\": [1e5, -0, NaN]}", "num_retries": 1, "stash": {"url": "u", "sha256": "h", "size": 1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		t1, err := unmarshalTask(body)
		if err != nil {
			if errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("decode error %v has code %v; want InvalidArgument", err, errcode.Of(err))
			}
			return
		}
		b1, err := encodeTask(t1)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != errcode.InvalidArgument {
				t.Fatalf("re-encoding a decoded task: %v; want nil or InvalidArgument", err)
			}
			return
		}
		t2, err := unmarshalTask(b1)
		if err != nil {
			t.Fatalf("jobq cannot decode its own encoding %s: %v", b1, err)
		}
		if d := sameTask(t1, t2); d != "" {
			t.Fatalf("decode(encode(t)) differs in %s\nbody %s\nre-encoded %s", d, body, b1)
		}
		b2, err := encodeTask(t2)
		if err != nil || string(b2) != string(b1) {
			t.Fatalf("encode(decode(b)) is not stable: %v\n%s\n%s", err, b1, b2)
		}
	})
}

// FuzzMarshalTask: a task built from fields encodes (or is refused with
// InvalidArgument), and decoding the body gives the task back.
func FuzzMarshalTask(f *testing.F) {
	f.Add("echo hi\n", "A", "1", "/tmp", "", 0, 0, "", "", "")
	f.Add("run", "NAME", "Zoë 🚀", "", "/mnt/out", 3, 5, "nvidia-smi", "k", "")
	f.Add("", "", "", "", "", 0, 0, "", "", `{"fn": "x", "n": [1, 2.5e300, null]}`)
	f.Add("x\u2028\x00\x7f", "B", "\xc3", "", "", 2147483647, -1000, "", "", "")
	f.Fuzz(func(t *testing.T, cmd, envName, envValue, cwd, dirsync string, retries, priority int, gate, key, payload string) {
		task := &Task{Command: cmd, Cwd: cwd, DirSyncTo: dirsync, NumRetries: retries, Priority: priority,
			GateCmd: gate, ConcurrencyKey: key}
		if envName != "" {
			task.Env = []EnvVar{{Name: envName, Value: envValue}}
		}
		if payload != "" {
			task.Payload = json.RawMessage(payload)
		}
		if key != "" {
			task.Metadata = map[string]string{key: envValue}
			task.NotBefore = time.Unix(int64(retries), int64(priority)).UTC()
			base := time.Duration(max(priority, -priority)+1) * time.Millisecond
			task.RetryBackoff = Backoff{Base: base, Cap: 3 * base}
		}
		if gate != "" {
			task.TimeLimit = time.Duration(retries) * time.Millisecond
		}
		want := *task
		b, err := encodeTask(task)
		if err != nil {
			if errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("MarshalTask: %v; want nil or InvalidArgument", err)
			}
			return
		}
		got, err := unmarshalTask(b)
		if err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		want.ID = task.ID
		if want.Payload != nil {
			// Payloads are re-serialised as Python writes them.
			want.Payload = got.Payload
			var a, c any
			if json.Unmarshal([]byte(payload), &a) != nil || json.Unmarshal(got.Payload, &c) != nil || !reflect.DeepEqual(a, c) {
				t.Fatalf("payload %s came back as %s", payload, got.Payload)
			}
		}
		if d := sameTask(&want, got); d != "" {
			t.Fatalf("decode(encode(t)) differs in %s: %s", d, b)
		}
		if b2, err := encodeTask(got); err != nil || string(b2) != string(b) {
			t.Fatalf("re-encoding is not stable: %v\n%s\n%s", err, b, b2)
		}
	})
}
