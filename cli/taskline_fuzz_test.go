package cli

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/internal/pyjson"
	"github.com/jobq/jobq/wire"
)

// FuzzTaskLine: any line of push's input either is refused with an error
// or makes a task that encodes, decodes as a shell task with the line
// as its command (a line that is not JSON) and without a NUL anywhere a
// worker passes to the shell, keeps the -e variable, and re-encodes to the
// same bytes.
func FuzzTaskLine(f *testing.F) {
	for _, s := range []string{"echo hi\n", "\n", "  \t\n", "echo a\r\n", "", " {\"cmd\": 1}\n",
		`{"cmd": "echo $X", "env": {"X": "1"}}` + "\n", `{"env": {"A": 1}, "cmd": "x", "bg_dirsync_to": "/d"}`,
		`{"fn": "train", "lr": 1e16, "b": 1, "b": 2}`, `{"cmd": "x", "env": null}`, "echo \xff\n", `{"cmd": "\ud800"}`,
		`{"cmd": "echo a\u0000b"}`, `{"cmd": "x", "env": {"A": "\u0000"}}`, `{"cmd": "x", "cwd": "\u0000"}`, "echo \x00\n"} {
		f.Add(s, "K", "v", "")
		f.Add(s, "", "", "/out")
	}
	f.Fuzz(func(t *testing.T, line, envName, envValue, dirsync string) {
		var o lineOpts
		if envName != "" {
			if !utf8.ValidString(envName) || !utf8.ValidString(envValue) || strings.ContainsAny(envName, "=\x00") {
				return // push refuses such -e flags before reading input
			}
			o.env = []jobq.EnvVar{{Name: envName, Value: envValue}}
		}
		if !utf8.ValidString(dirsync) {
			return
		}
		o.dirsync = dirsync
		task, err := parseTaskLine(line, o)
		if err != nil {
			if utf8.ValidString(line) && !strings.HasPrefix(line, "{") {
				t.Fatalf("a command line was refused: %q: %v", line, err)
			}
			return
		}
		if task.Validate() != nil {
			return // push reports it by its line before sending anything
		}
		body, err := wire.Marshal(task)
		if err != nil {
			t.Fatalf("a valid task from %q does not encode: %v", line, err)
		}
		got, err := wire.Unmarshal(body)
		if err != nil {
			t.Fatalf("decoding %s: %v", body, err)
		}
		if !strings.HasPrefix(line, "{") {
			if !got.IsShell() || got.Command != line || got.DirSyncTo != dirsync {
				t.Fatalf("line %q came back as command %q (shell %v), bg_dirsync_to %q", line, got.Command, got.IsShell(), got.DirSyncTo)
			}
		} else if v, _ := pyjson.ParseString(line); true {
			if cmd, ok := v.Get("cmd"); ok && (!got.IsShell() || got.Command != cmd.Str) {
				t.Fatalf("JSON line %q came back as command %q (shell %v)", line, got.Command, got.IsShell())
			}
		}
		if got.IsShell() && strings.ContainsRune(got.Command+got.Cwd+got.DirSyncTo+fmt.Sprint(got.Env), 0) {
			t.Fatalf("line %q passed validation with a NUL a worker cannot run: %s", line, body)
		}
		if envName != "" && got.IsShell() {
			if m := got.EnvMap(); m[envName] != envValue {
				t.Fatalf("-e %s=%s came back as %q in %s", envName, envValue, m[envName], body)
			}
		}
		if again, err := wire.Marshal(got); err != nil || string(again) != string(body) {
			t.Fatalf("re-encoding is not stable: %v\n%s\n%s", err, body, again)
		}
	})
}
