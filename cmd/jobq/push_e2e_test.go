package main_test

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// Ctrl-C during a stdin push stores what was read, then says how many tasks
// were stored, which lines they were and where to resume.
func TestPushInterruptedSaysWhatWasStored(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	var id [4]byte
	_, _ = rand.Read(id[:])
	b.queue = "redis://127.0.0.1:6379/0?queue=e2e-interrupt-" + hex.EncodeToString(id[:])
	t.Cleanup(func() { b.run("clear", "--yes") })

	// Three full batches and half of a fourth; the input stays open.
	stderr := b.interruptedPush(3500, "3000")
	for _, want := range []string{"interrupted", "stored 3500 tasks: lines 1–3500", "tail -n +3501"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	if got := b.size(); got != "3500" {
		t.Errorf("queue size %s; want the 3500 lines read before the interrupt", got)
	}
}

// A NUL character in a task's command, environment or directory can never
// run (no process argument, variable or path holds one): push refuses the
// line, naming it and the field, exits 2 and stores nothing from it.
func TestPushRefusesNUL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, input string
		want        []string // in stderr
		stored      string   // queue size after the push
	}{
		{"json cmd", `{"cmd": "echo a\u0000b"}` + "\n", []string{"line 1:", `"cmd"`, "NUL", "remove it"}, "0"},
		{"json env value", `{"cmd": "echo $A", "env": {"A": "x\u0000y"}}` + "\n", []string{"line 1:", `"A"`, "NUL", "remove it"}, "0"},
		{"json env name", `{"cmd": "echo", "env": {"A\u0000": "x"}}` + "\n", []string{"line 1:", "NUL"}, "0"},
		{"json cwd", `{"cmd": "pwd", "cwd": "/tmp\u0000x"}` + "\n", []string{"line 1:", `"cwd"`, "NUL", "remove it"}, "0"},
		{"json bg_dirsync_to", `{"cmd": "true", "bg_dirsync_to": "/d\u0000"}` + "\n", []string{"line 1:", `"bg_dirsync_to"`, "NUL", "remove it"}, "0"},
		{"raw command", "echo a\x00b\n", []string{"line 1:", "command", "NUL", "remove it"}, "0"},
		{"after a good line", "echo ok\n" + `{"cmd": "x\u0000"}` + "\n", []string{"line 2:", "NUL", "remove it", "stored 1 task"}, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBench(t)
			r := b.runWith(tc.input, nil, "push")
			if r.code != 2 {
				t.Errorf("push exited %d, want 2 (usage)\nstderr: %s", r.code, r.stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
				}
			}
			if got := b.size(); got != tc.stored {
				t.Errorf("queue size %s after the push, want %s", got, tc.stored)
			}
		})
	}
}
