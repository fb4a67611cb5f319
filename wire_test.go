package jobq

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/pyjson"
)

// wireVectors mirrors testdata/wire/vectors.json, computed with python3's
// json.dumps and hashlib.md5 by testdata/wire/gen_vectors.py (run it from
// the repository root to regenerate).
type wireVectors struct {
	Marshal []struct {
		Name string
		Task struct {
			Command        string
			Env            [][2]string
			Cwd            string
			DirSyncTo      string `json:"bg_dirsync_to"`
			Payload        string
			NumRetries     int  `json:"num_retries"`
			ReplyRequested bool `json:"reply_requested"`
			Kind           string
			Priority       int
			NotBefore      string `json:"not_before"`
			GateCmd        string `json:"gate_cmd"`
			ConcurrencyKey string `json:"concurrency_key"`
			RateLimitKey   string `json:"rate_limit_key"`
			Metadata       map[string]string
			Stash          *StashRef
		}
		Body string
		ID   string
	}
	Decode []struct {
		Name string
		Body string
		Want struct {
			Command        *string
			Env            [][2]string
			Payload        string
			NumRetries     int `json:"num_retries"`
			ID             string
			ReplyRequested bool `json:"reply_requested"`
			Version        int
		}
		Reencoded string
	}
	Numbers [][2]string
}

func loadWireVectors(t testing.TB) wireVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/wire/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v wireVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Marshal) == 0 || len(v.Decode) == 0 || len(v.Numbers) == 0 {
		t.Fatal("testdata/wire/vectors.json has no vectors; regenerate it with python3 testdata/wire/gen_vectors.py")
	}
	return v
}

func envVars(pairs [][2]string) []EnvVar {
	var env []EnvVar
	for _, p := range pairs {
		env = append(env, EnvVar{Name: p[0], Value: p[1]})
	}
	return env
}

func TestMarshalTaskMatchesPython(t *testing.T) {
	t.Parallel()
	for _, tc := range loadWireVectors(t).Marshal {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			in := tc.Task
			task := &Task{
				Command: in.Command, Env: envVars(in.Env), Cwd: in.Cwd, DirSyncTo: in.DirSyncTo,
				NumRetries: in.NumRetries, ReplyRequested: in.ReplyRequested, Kind: in.Kind,
				Priority: in.Priority, GateCmd: in.GateCmd, ConcurrencyKey: in.ConcurrencyKey,
				RateLimitKey: in.RateLimitKey, Metadata: in.Metadata, Stash: in.Stash,
			}
			if in.Payload != "" {
				task.Payload = json.RawMessage(in.Payload)
			}
			if in.NotBefore != "" {
				nb, err := time.Parse(time.RFC3339Nano, in.NotBefore)
				if err != nil {
					t.Fatal(err)
				}
				task.NotBefore = nb.In(time.FixedZone("X", 3600)) // written in UTC whatever the zone
			}
			id, err := taskID(task)
			if err != nil {
				t.Fatalf("TaskID: %v", err)
			}
			if id != tc.ID || task.ID != "" {
				t.Errorf("TaskID = %s (task.ID now %q), want %s and task unchanged", id, task.ID, tc.ID)
			}
			body, err := encodeTask(task)
			if err != nil {
				t.Fatalf("MarshalTask: %v", err)
			}
			if string(body) != tc.Body {
				t.Errorf("MarshalTask body\n got %s\nwant %s", body, tc.Body)
			}
			if task.ID != tc.ID {
				t.Errorf("task.ID = %s, want %s", task.ID, tc.ID)
			}

			// Decoding Python's bytes gives the task back, and re-encoding it
			// gives the same bytes.
			got, err := unmarshalTask([]byte(tc.Body))
			if err != nil {
				t.Fatalf("UnmarshalTask: %v", err)
			}
			if got.ID != tc.ID || got.Command != task.Command || !slices.Equal(got.Env, pyEnv(task.Env)) ||
				got.Cwd != task.Cwd || got.Kind != task.Kind || got.NumRetries != task.NumRetries || got.ReplyRequested != task.ReplyRequested ||
				got.Priority != task.Priority || !got.NotBefore.Equal(task.NotBefore) || got.GateCmd != task.GateCmd ||
				got.ConcurrencyKey != task.ConcurrencyKey || got.RateLimitKey != task.RateLimitKey ||
				len(got.Metadata) != len(task.Metadata) || (task.Stash != nil) != (got.Stash != nil) {
				t.Errorf("UnmarshalTask = %+v\nwant fields of %+v", got, task)
			}
			if task.Stash != nil && *got.Stash != *task.Stash {
				t.Errorf("Stash = %+v, want %+v", got.Stash, task.Stash)
			}
			if task.Payload != nil {
				v, err := pyjson.Parse(task.Payload)
				if err != nil {
					t.Fatal(err)
				}
				if want := string(pyjson.AppendValue(nil, v)); string(got.Payload) != want {
					t.Errorf("Payload = %s, want %s", got.Payload, want)
				}
			}
			again, err := encodeTask(got)
			if err != nil {
				t.Fatalf("re-MarshalTask: %v", err)
			}
			if string(again) != tc.Body {
				t.Errorf("re-encoded body\n got %s\nwant %s", again, tc.Body)
			}
		})
	}
}

func TestUnmarshalTaskForeignBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range loadWireVectors(t).Decode {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			got, err := unmarshalTask([]byte(tc.Body))
			if err != nil {
				t.Fatalf("UnmarshalTask: %v", err)
			}
			w := tc.Want
			if w.Command != nil && got.Command != *w.Command {
				t.Errorf("Command = %q, want %q", got.Command, *w.Command)
			}
			if w.Command != nil && !slices.Equal(got.Env, envVars(w.Env)) {
				t.Errorf("Env = %v, want %v", got.Env, w.Env)
			}
			if w.Payload != "" && string(got.Payload) != w.Payload {
				t.Errorf("Payload = %s, want %s", got.Payload, w.Payload)
			}
			if got.NumRetries != w.NumRetries || got.ID != w.ID || got.ReplyRequested != w.ReplyRequested || got.Version != w.Version {
				t.Errorf("got retries=%d id=%s reply=%v version=%d, want %d %s %v %d",
					got.NumRetries, got.ID, got.ReplyRequested, got.Version, w.NumRetries, w.ID, w.ReplyRequested, w.Version)
			}
			again, err := encodeTask(got)
			if err != nil {
				t.Fatalf("MarshalTask: %v", err)
			}
			if string(again) != tc.Reencoded {
				t.Errorf("re-encoded\n got %s\nwant %s", again, tc.Reencoded)
			}
		})
	}
}

// The worker's in-place retry decrement re-encodes the received task with
// one retry fewer: only num_retries may change, never the kwargs or the id.
func TestRetryDecrementKeepsBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range loadWireVectors(t).Decode {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			task, err := unmarshalTask([]byte(tc.Body))
			if err != nil {
				t.Fatal(err)
			}
			next := *task
			next.NumRetries++
			body, err := encodeTask(&next)
			if err != nil {
				t.Fatal(err)
			}
			old := `"num_retries": ` + strconv.Itoa(task.NumRetries) + `, `
			want := strings.Replace(tc.Reencoded, old, `"num_retries": `+strconv.Itoa(task.NumRetries+1)+`, `, 1)
			if want == tc.Reencoded {
				t.Fatalf("vector %q has no %q", tc.Reencoded, old)
			}
			if string(body) != want {
				t.Errorf("decremented body\n got %s\nwant %s", body, want)
			}
		})
	}
}

// Changing a decoded task's kwargs re-encodes them from the fields; the
// received ID is kept (it names the message), while TaskID reflects the
// new content.
func TestMarshalChangedDecodedTask(t *testing.T) {
	t.Parallel()
	orig := &Task{Command: "echo a", Env: []EnvVar{{"A", "1"}}}
	body, err := encodeTask(orig)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*Task)
		want   string // in the new kwargs
	}{
		{"command", func(t *Task) { t.Command = "echo b" }, `echo b`},
		{"env value in place", func(t *Task) { t.Env[0].Value = "2" }, `\"A\": \"2\"`},
		{"env appended", func(t *Task) { t.Env = append(t.Env, EnvVar{"B", "3"}) }, `\"B\": \"3\"`},
		{"cwd", func(t *Task) { t.Cwd = "/w" }, `\"cwd\": \"/w\"`},
		{"to payload", func(t *Task) { t.Command, t.Env = "", nil; t.Payload = json.RawMessage(`{"k":1}`) }, `{\"k\": 1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := unmarshalTask(body)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(task)
			got, err := encodeTask(task)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(got), tc.want) || !strings.HasSuffix(string(got), `"id": "`+orig.ID+`"}`) {
				t.Errorf("got %s, want kwargs with %s and id %s", got, tc.want, orig.ID)
			}
			if id, _ := taskID(task); id == orig.ID {
				t.Errorf("TaskID of changed task = original ID %s", id)
			}
		})
	}
}

func TestUnmarshalTaskRejectsGarbage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, msg string
	}{
		{"empty", ``, "not JSON"},
		{"not json", `hello`, "not JSON"},
		{"truncated", `{"version": 1, "kwargs": "{}"`, "not JSON"},
		{"trailing data", `{"kwargs": "{\"a\": 1}"} x`, "after the end"},
		{"array", `[1, 2]`, "JSON array, not a task"},
		{"string", `"task"`, "JSON string, not a task"},
		{"invalid utf-8", "{\"kwargs\": \"\xff\"}", "UTF-8"},
		{"control char in string", "{\"kwargs\": \"a\nb\"}", "control character"},
		{"unknown version", `{"version": 3, "reply_requested": false, "kwargs": "{}", "num_retries": 0, "id": "x"}`, "version 3 is not supported"},
		{"version not int", `{"version": "1", "kwargs": "{}", "num_retries": 0}`, `"version" is a JSON string`},
		{"no kwargs", `{"version": 1, "reply_requested": false, "num_retries": 0, "id": "x"}`, `no "kwargs"`},
		{"kwargs object", `{"version": 1, "reply_requested": false, "kwargs": {"cmd": "x"}, "num_retries": 0}`, `must be a string`},
		{"kwargs not json", `{"version": 1, "reply_requested": false, "kwargs": "{cmd}", "num_retries": 0}`, "kwargs are not JSON"},
		{"kwargs list", `{"version": 1, "reply_requested": false, "kwargs": "[1]", "num_retries": 0}`, "kwargs are a JSON array"},
		{"no retries", `{"version": 1, "reply_requested": false, "kwargs": "{\"a\": 1}"}`, `no "num_retries"`},
		{"retries float", `{"version": 1, "reply_requested": false, "kwargs": "{\"a\": 1}", "num_retries": 1.5}`, `must be an integer`},
		{"no reply_requested in v1", `{"version": 1, "kwargs": "{\"a\": 1}", "num_retries": 0}`, `no "reply_requested"`},
		{"reply not bool", `{"version": 1, "reply_requested": 1, "kwargs": "{\"a\": 1}", "num_retries": 0}`, `true or false`},
		{"id number", `{"version": 1, "reply_requested": false, "kwargs": "{\"a\": 1}", "num_retries": 0, "id": 5}`, `"id" is a JSON number`},
		{"cmd not string", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": 5}", "num_retries": 0}`, `"cmd" must be a string`},
		{"bg_dirsync_to number", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\", \"bg_dirsync_to\": 1}", "num_retries": 0}`, `"bg_dirsync_to" is a JSON number`},
		{"env list", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\", \"env\": [1]}", "num_retries": 0}`, `"env" is a JSON array`},
		{"env value object", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\", \"env\": {\"A\": {}}}", "num_retries": 0}`, `"A" is a JSON object`},
		{"cwd number", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\", \"cwd\": 1}", "num_retries": 0}`, `"cwd" is a JSON number`},
		{"v2 bad time", `{"version": 2, "reply_requested": false, "kwargs": "{\"a\": 1}", "num_retries": 0, "not_before": "tomorrow"}`, "RFC 3339"},
		{"v2 priority string", `{"version": 2, "reply_requested": false, "kwargs": "{\"a\": 1}", "num_retries": 0, "priority": "high"}`, `"priority" is a JSON string`},
		{"v2 stash incomplete", `{"version": 2, "reply_requested": false, "kwargs": "{\"a\": 1}", "num_retries": 0, "stash": {"url": "gs://b/x"}}`, `"stash" must have`},
		{"v2 metadata number", `{"version": 2, "reply_requested": false, "kwargs": "{\"a\": 1}", "num_retries": 0, "metadata": {"a": 1}}`, `metadata "a"`},
		{"deep nesting", `{"kwargs": "{}", "x": ` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`, "nested deeper"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := unmarshalTask([]byte(tc.body))
			if err == nil {
				t.Fatalf("unmarshalTask(%q) = %+v, want an error", tc.body, task)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != errcode.InvalidArgument || !errors.Is(err, errcode.InvalidArgument) {
				t.Fatalf("error %v (%T) is not an InvalidArgument *Error", err, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
}

func TestUnmarshalTaskLenient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		check      func(*Task) bool
	}{
		{"negative retries read as 0", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": -1, "id": "a"}`,
			func(t *Task) bool { return t.NumRetries == 0 }},
		{"negative retries beyond 64 bits read as 0", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": -123456789012345678901, "id": "a"}`,
			func(t *Task) bool { return t.NumRetries == 0 }},
		{"retries beyond 32 bits kept", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 3000000000, "id": "a"}`,
			func(t *Task) bool { return t.NumRetries > maxNumRetries }},
		{"retries beyond 64 bits read as the largest int", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 123456789012345678901, "id": "a"}`,
			func(t *Task) bool { return t.NumRetries == math.MaxInt }},
		{"no id, retries beyond 32 bits: ID as Python computes it", `{"kwargs": "{\"cmd\": \"x\"}", "num_retries": 3000000000}`,
			func(t *Task) bool { return t.ID == "6f438c668baac758849f3bc404b0878b" }},
		{"no id, NaN in payload: ID as Python computes it", `{"kwargs": "{\"a\": NaN}"}`,
			func(t *Task) bool { return t.ID == "7a91831c5263277a56bf71982866e905" }},
		{"no id, NUL in command: ID as Python computes it", `{"kwargs": "{\"cmd\": \"a\\u0000b\"}"}`,
			func(t *Task) bool { return t.ID == "6ae512df09f5459fe4f3d26fb2fa9f0f" && t.Command == "a\x00b" }},
		{"env values converted like Python str()", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\", \"env\": {\"N\": 1.50, \"T\": true, \"Z\": null}}", "num_retries": 0, "id": "a"}`,
			func(t *Task) bool {
				return slices.Equal(t.Env, []EnvVar{{"N", "1.5"}, {"T", "True"}, {"Z", "None"}})
			}},
		{"null env and cwd", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\", \"env\": null, \"cwd\": null}", "num_retries": 0, "id": "a"}`,
			func(t *Task) bool { return t.Env == nil && t.Cwd == "" }},
		{"null id computed", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 0, "id": null}`,
			func(t *Task) bool { id, _ := taskID(t); return t.ID == id && len(id) == 32 }},
		{"v0 reply_requested ignored", `{"version": 0, "reply_requested": true, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 0, "id": "a"}`,
			func(t *Task) bool { return !t.ReplyRequested && t.Version == 0 }},
		{"v2 optional members null read as unset", `{"version": 2, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 0, "kind": null, "priority": null, "not_before": null, "gate_cmd": null, "concurrency_key": null, "rate_limit_key": null, "retry_backoff": null, "time_limit": null, "metadata": null, "stash": null, "attempts": null, "id": "a"}`,
			func(t *Task) bool {
				return t.Kind == "" && t.Priority == 0 && t.NotBefore.IsZero() && t.GateCmd == "" && t.ConcurrencyKey == "" && t.RateLimitKey == "" &&
					t.RetryBackoff.IsZero() && t.TimeLimit == 0 && t.Metadata == nil && t.Stash == nil && t.Attempts == nil
			}},
		{"v1 member names are not v2 fields", `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"x\"}", "num_retries": 0, "priority": 9, "id": "a"}`,
			func(t *Task) bool { return t.Priority == 0 }},
		{"NaN payload kept as Python wrote it", `{"version": 1, "reply_requested": false, "kwargs": "{\"a\": NaN, \"b\": -Infinity}", "num_retries": 0, "id": "a"}`,
			func(t *Task) bool { return string(t.Payload) == `{"a": NaN, "b": -Infinity}` }},
		{"utf-8 bom", "\ufeff" + `{"kwargs": "{\"cmd\": \"x\"}"}`,
			func(t *Task) bool { return t.Command == "x" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task, err := unmarshalTask([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(task) {
				t.Errorf("unexpected task %+v", task)
			}
		})
	}
}

func TestMarshalTaskRejectsInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		task *Task
		msg  string
	}{
		{"nil", nil, "nil"},
		{"empty", &Task{}, "neither a command nor a payload"},
		{"command not utf-8", &Task{Command: "echo \xff"}, "command is not valid UTF-8"},
		{"env not utf-8", &Task{Command: "x", Env: []EnvVar{{"A", "\xc3"}}}, `"A"'s value is not valid UTF-8`},
		{"metadata not utf-8", &Task{Command: "x", Metadata: map[string]string{"k": "\xff"}}, "metadata"},
		// Each half of a two-byte character is invalid on its own, though
		// name+value would be valid joined.
		{"env name and value halves of one character", &Task{Command: "x", Env: []EnvVar{{"A\xc3", "\xa9"}}}, `name "A\xc3" is not valid UTF-8`},
		{"metadata name and value halves of one character", &Task{Command: "x", Metadata: map[string]string{"k\xc3": "\xa9"}}, `metadata name "k\xc3" is not valid UTF-8`},
		{"retries over 32 bits", &Task{Command: "x", NumRetries: 3000000000}, "num_retries is 3000000000; it must be 0..2147483647"},
		{"negative retries", &Task{Command: "x", NumRetries: -1}, "num_retries is -1"},
		{"payload with DirSyncTo", &Task{Payload: json.RawMessage(`{}`), DirSyncTo: "/x"}, "bg_dirsync_to"},
		// Found by FuzzMarshalTask: Cwd and Env were dropped from a payload
		// task without a word.
		{"payload with Cwd", &Task{Payload: json.RawMessage(`{}`), Cwd: "/x"}, "Cwd or Env"},
		{"payload with Env", &Task{Payload: json.RawMessage(`{}`), Env: []EnvVar{{"A", "1"}}}, "Cwd or Env"},
		{"id not utf-8", &Task{Command: "x", ID: "\xff"}, "task ID"},
		{"payload list", &Task{Payload: json.RawMessage(`[1]`)}, "JSON object"},
		// Found by FuzzTaskLine: workers read a payload with "cmd" as a
		// shell task, and could not read these.
		{"payload cmd with numeric dirsync", &Task{Payload: json.RawMessage(`{"cmd": "", "bg_dirsync_to": 0}`)},
			`workers read it as a shell task, but kwargs "bg_dirsync_to" is a JSON number`},
		{"payload cmd not a string", &Task{Payload: json.RawMessage(`{"cmd": 3}`)}, `kwargs "cmd" must be a string`},
		{"payload cmd with env list", &Task{Payload: json.RawMessage(`{"cmd": "x", "env": [1]}`)}, `"env" is a JSON array`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := encodeTask(tc.task)
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("MarshalTask error = %v, want InvalidArgument saying %q", err, tc.msg)
			}
		})
	}
}

func TestMarshalTaskKeepsGivenID(t *testing.T) {
	t.Parallel()
	task := &Task{ID: "my-id \"é\"", Command: "x"}
	body, err := encodeTask(task)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"id": "my-id \"\u00e9\""}`; !strings.HasSuffix(string(body), want) {
		t.Errorf("body %s does not end with %s", body, want)
	}
	if task.ID != "my-id \"é\"" {
		t.Errorf("ID changed to %q", task.ID)
	}
}

func TestPythonNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range loadWireVectors(t).Numbers {
		if got := string(pyjson.AppendNumber(nil, tc[0])); got != tc[1] {
			t.Errorf("AppendNumber(%s) = %s, want %s (Python)", tc[0], got, tc[1])
		}
	}
}

func BenchmarkMarshalTask(b *testing.B) {
	for b.Loop() {
		task := &Task{Command: "python train.py --epochs 10", Env: []EnvVar{{"CUDA_VISIBLE_DEVICES", "0"}, {"SEED", "1"}}}
		if _, err := encodeTask(task); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalTask(b *testing.B) {
	body, err := encodeTask(&Task{Command: "python train.py --epochs 10", Env: []EnvVar{{"CUDA_VISIBLE_DEVICES", "0"}, {"SEED", "1"}}})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := unmarshalTask(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalPayloadTask(b *testing.B) {
	body, err := encodeTask(&Task{Payload: json.RawMessage(`{"n": 1}`)})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := unmarshalTask(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUnmarshalV2Task decodes a task of schema v2, whose members
// decodeV2 reads.
func BenchmarkUnmarshalV2Task(b *testing.B) {
	body, err := encodeTask(&Task{Command: "python train.py", Kind: "train", Priority: 3, NotBefore: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		ConcurrencyKey: "gpu", Metadata: map[string]string{"owner": "ml", "run": "42"}, TimeLimit: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := unmarshalTask(body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestMarshalOmitsWhatTheBackendMakesRedundant(t *testing.T) {
	t.Parallel()
	caps := func(prio, delay driver.Level) driver.Capabilities {
		return driver.Capabilities{Features: map[driver.Feature]driver.Support{
			driver.Priority: {Level: prio}, driver.DelayedPush: {Level: delay}}}
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	v1 := &Task{Command: "x"}
	v1ID, _ := taskID(v1)
	tests := []struct {
		name     string
		caps     driver.Capabilities
		task     Task
		wantV2   bool
		wantV1ID bool
	}{
		{"priority ignored, delay native (Storage Queue, Service Bus)", caps(driver.Unsupported, driver.Native), Task{Command: "x", Priority: 5, NotBefore: at}, false, true},
		{"priority native is kept", caps(driver.Native, driver.Native), Task{Command: "x", Priority: 5, NotBefore: at}, true, false},
		{"emulated delay is kept", caps(driver.Unsupported, driver.Emulated), Task{Command: "x", NotBefore: at}, true, false},
		{"other v2 fields are kept", caps(driver.Unsupported, driver.Native), Task{Command: "x", GateCmd: "g"}, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := tc.task
			body, err := marshalTask(&task, omitFor(tc.caps))
			if err != nil {
				t.Fatal(err)
			}
			if v2 := strings.HasPrefix(string(body), `{"version": 2`); v2 != tc.wantV2 {
				t.Errorf("body %s: v2 %v, want %v", body, v2, tc.wantV2)
			}
			if (task.ID == v1ID) != tc.wantV1ID {
				t.Errorf("ID %s; v1 ID is %s; want equal: %v", task.ID, v1ID, tc.wantV1ID)
			}
			if task.Priority != tc.task.Priority || !task.NotBefore.Equal(tc.task.NotBefore) {
				t.Errorf("the task itself was changed: %+v", task)
			}
		})
	}
}

func TestEmptyCommandRoundTrips(t *testing.T) {
	t.Parallel()
	// ai4s-jobq push -c '' (json.dumps of {"cmd": "", "bg_dirsync_to": None, "env": {}}).
	body := `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"\", \"bg_dirsync_to\": null, \"env\": {}}", "num_retries": 2, "id": "e"}`
	task, err := unmarshalTask([]byte(body))
	if err != nil {
		t.Fatalf("an ai4s-jobq task with an empty command is not poison: %v", err)
	}
	if !task.IsShell() || task.Command != "" {
		t.Fatalf("IsShell %v, Command %q; want a shell task with an empty command", task.IsShell(), task.Command)
	}
	task.NumRetries--
	out, err := encodeTask(task)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(body, `"num_retries": 2`, `"num_retries": 1`, 1); string(out) != want {
		t.Errorf("re-encoded\n got %s\nwant %s", out, want)
	}
}
