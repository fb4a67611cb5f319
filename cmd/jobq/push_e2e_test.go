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
