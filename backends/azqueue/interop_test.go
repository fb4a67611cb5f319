package azqueue_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/cli"
	"github.com/jobq/jobq/worker"
)

// Interoperability with ai4s-jobq on a shared Storage queue. ai4s-jobq
// (ai4s/jobq/backend/storage_queue.py) sends Task.serialize() — Python's
// json.dumps of the task — as plain message text with time_to_live=-1,
// through azure-storage-queue v12 without an encode policy.

// ai4sMessage writes a v1 task exactly as ai4s-jobq's `push -c CMD -e K=V`
// serialises it. The values used here are plain ASCII without quotes or
// backslashes, for which Python's json.dumps and %q agree.
func ai4sMessage(t *testing.T, id, cmd string, env [][2]string, numRetries int) string {
	t.Helper()
	var kv []string
	values := []string{cmd, id}
	for _, e := range env {
		kv = append(kv, fmt.Sprintf(`\"%s\": \"%s\"`, e[0], e[1]))
		values = append(values, e[0], e[1])
	}
	for _, s := range values {
		if strings.ContainsAny(s, "\"\\") || strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) >= 0 {
			t.Fatalf("ai4sMessage only builds plain ASCII values; got %q", s)
		}
	}
	kwargs := fmt.Sprintf(`{\"cmd\": \"%s\", \"bg_dirsync_to\": null, \"env\": {%s}}`, cmd, strings.Join(kv, ", "))
	return fmt.Sprintf(`{"version": 1, "reply_requested": false, "kwargs": "%s", "num_retries": %d, "id": "%s"}`, kwargs, numRetries, id)
}

func TestInteropWorkerRunsAi4sJobqMessages(t *testing.T) {
	t.Parallel()
	q, _ := openQueue(t)
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.txt")
	b64 := filepath.Join(dir, "b64.txt")
	client := mainClient(t, q)
	never := &azqueue.EnqueueMessageOptions{TimeToLive: to.Ptr(int32(-1))}

	// A task as ai4s-jobq pushes it (uuid4 hex id, its default).
	plain := ai4sMessage(t, "5f1c0e6a9b2d4c7e8f0a1b2c3d4e5f60", "echo $GREETING > "+ok, [][2]string{{"GREETING", "hello-from-ai4s"}}, 0)
	// A failing one with one retry: retried once, then dead-lettered.
	failing := ai4sMessage(t, "0123456789abcdef0123456789abcdef", "exit 7", nil, 1)
	// The same format base64-encoded, as other Storage Queue clients write.
	encoded := base64.StdEncoding.EncodeToString([]byte(ai4sMessage(t, "ffeeddccbbaa99887766554433221100", "echo b64 > "+b64, nil, 0)))
	for _, text := range []string{plain, failing, encoded} {
		if _, err := client.EnqueueMessage(t.Context(), text, never); err != nil {
			t.Fatal(err)
		}
	}

	w := worker.New(q, worker.NewShell(), worker.Options{
		Visibility:             30 * time.Second,
		MaxConsecutiveFailures: -1,
		StatusInterval:         -1,
		Logger:                 slog.New(slog.DiscardHandler),
	})
	if err := w.Run(t.Context()); err != nil {
		t.Fatalf("worker: %v", err)
	}
	for file, want := range map[string]string{ok: "hello-from-ai4s\n", b64: "b64\n"} {
		got, err := os.ReadFile(file)
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q (the task did not run)", filepath.Base(file), got, err, want)
		}
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 0 {
		t.Errorf("queue size after the worker = %d, %v; want 0", n, err)
	}
	dead, err := q.Admin().DeadLetters(t.Context(), 10)
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters = %d, %v; want the failing task", len(dead), err)
	}
	if dead[0].Task == nil || dead[0].Task.ID != "0123456789abcdef0123456789abcdef" || dead[0].DeliveryCount != 2 {
		t.Errorf("dead letter = %+v; want task 0123… after 2 deliveries", dead[0])
	}
	// In place, only num_retries changed: the dead task is ai4s-jobq's
	// message with its budget spent.
	if want := ai4sMessage(t, "0123456789abcdef0123456789abcdef", "exit 7", nil, 0); string(dead[0].Body) != want {
		t.Errorf("dead task body = %s\nwant %s", dead[0].Body, want)
	}
}

func TestInteropPushBytesMatchAi4sJobq(t *testing.T) {
	t.Parallel()
	// Vectors from ai4s-jobq's Task.serialize with JOBQ_DETERMINISTIC_IDS=1,
	// computed with python3 (json.dumps, hashlib.md5) for
	//   ai4s-jobq Q push -c "echo hello world" -e FOO=bar -e "BAZ=qux é"
	//   ai4s-jobq Q push -c 'python train.py --lr 0.1 "$CFG"' --num-retries 3
	cases := []struct {
		name string
		args []string // jobq's push arguments, the same as ai4s-jobq's
		task *jobq.Task
		want string
	}{
		{
			name: "env in command-line order, non-ASCII escaped",
			args: []string{"push", "-c", "echo hello world", "-e", "FOO=bar", "-e", "BAZ=qux é"},
			task: &jobq.Task{Command: "echo hello world", Env: []jobq.EnvVar{{Name: "FOO", Value: "bar"}, {Name: "BAZ", Value: "qux é"}}},
			want: `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"echo hello world\", \"bg_dirsync_to\": null, \"env\": {\"FOO\": \"bar\", \"BAZ\": \"qux \\u00e9\"}}", "num_retries": 0, "id": "7dfdb6e414556bab0aa0e4e4c582ba4c"}`,
		},
		{
			name: "quotes and retries",
			args: []string{"push", "-c", `python train.py --lr 0.1 "$CFG"`, "--num-retries", "3"},
			task: &jobq.Task{Command: `python train.py --lr 0.1 "$CFG"`, NumRetries: 3},
			want: `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"python train.py --lr 0.1 \\\"$CFG\\\"\", \"bg_dirsync_to\": null, \"env\": {}}", "num_retries": 3, "id": "02e313f204eee0df65275ff6b17b4140"}`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Through the library, as a Go producer pushes.
			q, u := openQueue(t)
			if _, err := q.Push(t.Context(), c.task); err != nil {
				t.Fatal(err)
			}
			// Through the CLI, in ai4s-jobq's argument order: jobq QUEUE push ...
			var stderr bytes.Buffer
			if code := cli.Run(t.Context(), append([]string{u}, c.args...), strings.NewReader(""), io.Discard, &stderr); code != 0 {
				t.Fatalf("jobq %s %s: exit %d: %s", u, strings.Join(c.args, " "), code, stderr.String())
			}
			resp, err := mainClient(t, q).PeekMessages(t.Context(), &azqueue.PeekMessagesOptions{NumberOfMessages: to.Ptr(int32(32))})
			if err != nil || len(resp.Messages) != 2 {
				t.Fatalf("peek: %v, %d messages, want 2", err, len(resp.Messages))
			}
			for i, m := range resp.Messages {
				if got := *m.MessageText; got != c.want {
					t.Errorf("stored message text (%s):\n got %s\nwant %s", []string{"library", "CLI"}[i], got, c.want)
				}
			}
		})
	}
}
