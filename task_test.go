package jobq

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jobq/jobq/errcode"
)

// TestValidatePayload: a payload must be one JSON object; anything else is
// InvalidArgument with a message that says what it is instead.
func TestValidatePayload(t *testing.T) {
	t.Parallel()
	tests := []struct {
		payload string
		want    string // in the error; "" when valid
	}{
		{`{"n": 1}`, ""},
		{" \n\t{}", ""},
		{`{"a": [1, {"b": null}]}`, ""},
		{`[1, 2]`, "it is an array"},
		{`null`, "it is null"},
		{`"x"`, "it is a string"},
		{`3.5`, "it is a number"},
		{`true`, "it is a boolean"},
		{`{"n": 1`, "unexpected end of JSON input"},
		{`{"n": 1} {}`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.payload, func(t *testing.T) {
			t.Parallel()
			err := (&Task{Payload: json.RawMessage(tt.payload)}).Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v; want InvalidArgument naming %q", err, tt.want)
			}
		})
	}
}

// TestValidateRefusesNUL: a NUL character in any text a worker runs or a
// backend stores is refused before the push, naming the field; a Go
// handler's payload may carry one (its JSON is the handler's business).
func TestValidateRefusesNUL(t *testing.T) {
	t.Parallel()
	shell := func(kwargs string) *Task { return &Task{Payload: json.RawMessage(kwargs)} }
	tests := []struct {
		name string
		task *Task
		want string // in the error; "" when valid
	}{
		{"command", &Task{Command: "echo a\x00b"}, "task command contains a NUL"},
		{"env value", &Task{Command: "x", Env: []EnvVar{{"A", "1\x00"}}}, `environment variable "A"'s value contains a NUL`},
		{"env name", &Task{Command: "x", Env: []EnvVar{{"A\x00", "1"}}}, `name "A\x00" is invalid`},
		{"cwd", &Task{Command: "x", Cwd: "/tmp\x00"}, "task cwd contains a NUL"},
		{"bg_dirsync_to", &Task{Command: "x", DirSyncTo: "/d\x00"}, "task bg_dirsync_to contains a NUL"},
		{"gate command", &Task{Command: "x", GateCmd: "nvidia-smi\x00"}, "task gate command contains a NUL"},
		{"kind", &Task{Payload: json.RawMessage(`{}`), Kind: "k\x00"}, "task kind contains a NUL"},
		{"id", &Task{Command: "x", ID: "id\x00"}, "task ID contains a NUL"},
		{"concurrency key", &Task{Command: "x", ConcurrencyKey: "g\x00"}, "task concurrency key contains a NUL"},
		{"rate-limit key", &Task{Command: "x", RateLimitKey: "g\x00"}, "task rate-limit key contains a NUL"},
		{"metadata value", &Task{Command: "x", Metadata: map[string]string{"k": "\x00"}}, `metadata "k"'s value contains a NUL`},
		{"shell payload cmd", shell(`{"cmd": "echo a\u0000b"}`), `task payload's "cmd" contains a NUL`},
		{"shell payload env value", shell(`{"cmd": "x", "env": {"A": "\u0000"}}`), `payload's "env" variable "A"'s value contains a NUL`},
		{"shell payload env name", shell(`{"cmd": "x", "env": {"\u0000": "1"}}`), `payload's "env" variable name "\x00" contains a NUL`},
		{"shell payload cwd", shell(`{"cmd": "x", "cwd": "/\u0000"}`), `payload's "cwd" contains a NUL`},
		{"shell payload bg_dirsync_to", shell(`{"cmd": "x", "bg_dirsync_to": "\u0000"}`), `payload's "bg_dirsync_to" contains a NUL`},
		{"shell payload escaped backslash", shell(`{"cmd": "printf '\\u0000'"}`), ""},
		{"handler payload", shell(`{"blob": "a\u0000b"}`), ""},
		{"clean shell task", &Task{Command: "echo hi", Env: []EnvVar{{"A", "1"}}, Cwd: "/tmp", GateCmd: "true"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.task.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v; want InvalidArgument saying %q", err, tt.want)
			}
			if _, err := encodeTask(tt.task); errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("MarshalTask accepted what Validate refuses: %v", err)
			}
		})
	}
}
