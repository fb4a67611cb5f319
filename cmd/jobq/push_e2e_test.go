package main_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
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

	cmd := exec.Command(jobqBin, b.queue, "push")
	cmd.Env = b.env
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Three full batches and half of a fourth; the input stays open.
	var lines strings.Builder
	for i := 1; i <= 3500; i++ {
		fmt.Fprintf(&lines, "echo %d\n", i)
	}
	if _, err := in.Write([]byte(lines.String())); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for b.size() != "3000" {
		if time.Now().After(deadline) {
			t.Fatalf("the first batches were not stored; size %s; stderr:\n%s", b.size(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	in.Close()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("push ended with %v; want exit 1; stderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"interrupted", "stored 3500 tasks: lines 1–3500", "tail -n +3501"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
		}
	}
	if got := b.size(); got != "3500" {
		t.Errorf("queue size %s; want the 3500 lines read before the interrupt", got)
	}
}
