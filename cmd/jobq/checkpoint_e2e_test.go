package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/stash/azblob"
)

// countTo100 counts from its checkpoint (0 without one) to 100, saving a
// checkpoint at every step and waiting for the save; at step 60 it waits
// for its worker to be preempted.
const countTo100 = `d=$JOBQ_CHECKPOINT_DIR
i=$(cat "$d/count" 2>/dev/null || echo 0)
echo "start at $i"
while [ "$i" -lt 100 ]; do
  i=$((i+1))
  echo "$i" > "$d/count.tmp" && mv "$d/count.tmp" "$d/count"
  touch "$d/.jobq-save"
  while [ -e "$d/.jobq-save" ] || [ -e "$d/.jobq-saving" ]; do sleep 0.01; done
  echo "saved $i"
  if [ "$i" -eq 60 ] && [ ! -e "$d/resumed" ]; then touch "$d/resumed"; sleep 120; fi
done
echo "done $i"`

// fakeAzureMetadata is an Azure instance metadata service for VM spot-1
// (a Standard_D2s_v5 in westeurope) that announces its eviction once
// preempt is set.
func fakeAzureMetadata(t *testing.T, preempt *atomic.Bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metadata/instance/compute/name":
			io.WriteString(w, "spot-1")
		case "/metadata/instance/compute":
			io.WriteString(w, `{"vmSize": "Standard_D2s_v5", "location": "westeurope", "name": "spot-1"}`)
		case "/metadata/scheduledevents":
			if r.Method != http.MethodGet {
				return // the acknowledgement
			}
			if !preempt.Load() {
				io.WriteString(w, `{"DocumentIncarnation": 1, "Events": []}`)
				return
			}
			io.WriteString(w, `{"DocumentIncarnation": 2, "Events": [{"EventId": "E1", "EventType": "Preempt", "EventStatus": "Scheduled",
				"Resources": ["spot-1"], "NotBefore": "`+time.Now().Add(30*time.Second).UTC().Format(http.TimeFormat)+`"}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// checkpointSetup makes a bench's queue and stash for one backend and
// returns the stash URL, the environment the processes need and a
// function that counts the objects left in the stash.
type checkpointSetup func(t *testing.T, b *bench) (stashURL string, env []string, objects func() int)

func fileStash(t *testing.T, b *bench) (string, []string, func() int) {
	dir := filepath.Join(b.dir, "stash")
	return "file://" + dir, nil, func() int {
		es, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
}

// requireAzurite starts Azurite unless its blob and queue services answer.
func requireAzurite(t *testing.T) {
	t.Helper()
	up := func() bool {
		for _, port := range []string{"10000", "10001"} {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
			if err != nil {
				return false
			}
			_ = c.Close()
		}
		return true
	}
	if !up() {
		if out, err := exec.Command("../../.ci/start-azurite.sh").CombinedOutput(); err != nil || !up() {
			t.Fatalf("this test needs Azurite's blob and queue services: %v\n%s", err, out)
		}
	}
}

var checkpointBackends = map[string]checkpointSetup{
	"sqlite+file": fileStash,
	"postgres+file": func(t *testing.T, b *bench) (string, []string, func() int) {
		var id [4]byte
		_, _ = rand.Read(id[:])
		b.queue = "postgres://postgres@127.0.0.1:5432/test?queue=e2e-ckpt-" + hex.EncodeToString(id[:])
		b.t.Cleanup(func() { b.run("clear", "--yes") })
		return fileStash(t, b)
	},
	"azqueue+azblob": func(t *testing.T, b *bench) (string, []string, func() int) {
		requireAzurite(t)
		name := "jq-ckpt-" + strings.ToLower(rand.Text()[:12])
		b.queue = "azqueue://devstoreaccount1/" + name
		t.Cleanup(func() {
			svc, err := azqueue.NewServiceClientFromConnectionString(azq.DevelopmentConnectionString, nil)
			if err == nil {
				_, _ = svc.DeleteQueue(context.Background(), name, nil)
				_, _ = svc.DeleteQueue(context.Background(), name+azq.FailedSuffix, nil)
			}
		})
		cont, err := container.NewClientFromConnectionString(azblob.DevelopmentConnectionString, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cont.Create(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = cont.Delete(context.Background(), nil) })
		b.env = append(b.env, "JOBQ_CONNECTION_STRING=UseDevelopmentStorage=true")
		return "azblob://devstoreaccount1/" + name + "/ckpt", nil, func() int {
			n := 0
			for pager := cont.NewListBlobsFlatPager(nil); pager.More(); {
				page, err := pager.NextPage(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				n += len(page.Segment.BlobItems)
			}
			return n
		}
	},
}

// TestCheckpointSurvivesPreemption: a task that counts to 100 with a
// checkpoint per step is preempted at step 60 (a fake Azure metadata
// service announces the eviction); a second worker finishes it from 60,
// not from 0, without spending a retry (the task has none), and the
// checkpoint is deleted when the task ends. The result record names the
// preempted attempt, its environment and the work its checkpoint saved.
func TestCheckpointSurvivesPreemption(t *testing.T) {
	t.Parallel()
	for name, setup := range checkpointBackends {
		t.Run(name, func(t *testing.T) {
			b := newBench(t)
			stashURL, env, objects := setup(t, b)
			b.must("clear", "--yes")
			r := b.runWith("", env, "push", "--print-ids", "--num-retries", "0", "-c", countTo100)
			if r.code != 0 {
				t.Fatalf("push: exit %d: %s", r.code, r.stderr)
			}
			id := strings.Fields(r.stdout)[0]

			var preempt atomic.Bool
			md := fakeAzureMetadata(t, &preempt)
			w1 := b.start(env, "worker", "--checkpoints", "--stash", stashURL, "--preemption", "azure", "--metadata-endpoint", md.URL)
			// A hundred saves take a while on a busy machine (three
			// requests each on Azurite).
			waitLong(w1, "] saved 60", 3*time.Minute)
			preempt.Store(true)
			if code := w1.wait(); code != 3 {
				t.Fatalf("preempted worker exited %d, want 3:\n%s", code, tail(w1.output(), 4000))
			}
			out1 := w1.output()
			if strings.Contains(out1, "] saved 61") || !strings.Contains(out1, "preempted") {
				t.Fatalf("the first worker went past step 60 or was not preempted:\n%s", tail(out1, 4000))
			}

			p2 := b.start(env, "worker", "--checkpoints", "--stash", stashURL, "--preemption", "off", "--env-label", "second")
			waitLong(p2, "worker finished", 3*time.Minute)
			w2 := result{code: p2.wait(), stderr: p2.output()}
			if w2.code != 0 {
				t.Fatalf("second worker exited %d:\n%s", w2.code, tail(w2.stderr, 4000))
			}
			for _, want := range []string{"] start at 60", "] saved 61", "] done 100", "checkpoint restored"} {
				if !strings.Contains(w2.stderr, want) {
					t.Errorf("second worker's log lacks %q", want)
				}
			}
			if strings.Contains(w2.stderr, "] saved 1\"") || strings.Contains(w2.stderr, "] start at 0") || t.Failed() {
				t.Fatalf("the second worker did not resume from step 60:\n%s", tail(w2.stderr, 6000))
			}
			if n := objects(); n != 0 {
				t.Errorf("%d objects left in the stash after the task ended; want its checkpoint deleted", n)
			}
			if st := b.stats(); st["ready"]+st["in_flight"]+st["delayed"]+st["dead_lettered"] != 0 {
				t.Errorf("queue after the task: %v; want it empty (done, not dead-lettered)", st)
			}
			checkPreemptedRecord(t, b, env, id)
			checkWorkTotals(t, b, env)
		})
	}
}

// checkWorkTotals checks the preempted worker's totals in the worker
// registry, where the backend keeps one.
func checkWorkTotals(t *testing.T, b *bench, env []string) {
	t.Helper()
	r := b.runWith("", env, "workers", "--all", "--json")
	if r.code != 0 {
		t.Logf("no worker registry here: %s", r.stderr)
		return
	}
	var ws []struct {
		Env         string  `json:"env"`
		Preemptions int64   `json:"preemptions"`
		WorkS       float64 `json:"work_s"`
		SavedS      float64 `json:"saved_s"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil {
		t.Fatalf("workers --json: %v: %s", err, r.stdout)
	}
	found := false
	for _, w := range ws {
		if w.Env == "Standard_D2s_v5/westeurope" {
			found = true
			if w.Preemptions != 1 || w.SavedS <= 0 || w.WorkS < w.SavedS {
				t.Errorf("preempted worker's totals: %+v; want 1 preemption and saved work", w)
			}
		}
	}
	if !found {
		t.Errorf("no worker with the metadata service's environment label in %s", r.stdout)
	}
	text := b.runWith("", env, "workers", "--all").stdout
	t.Logf("workers --all:\n%s", text)
	if !strings.Contains(text, "SAVED BY CHECKPOINTS") || !strings.Contains(text, "Standard_D2s_v5/westeurope") {
		t.Errorf("workers lacks the per-environment totals:\n%s", text)
	}
}

// checkPreemptedRecord checks the result record of the task, where the
// backend keeps records.
func checkPreemptedRecord(t *testing.T, b *bench, env []string, id string) {
	t.Helper()
	r := b.runWith("", env, "result", id, "--json")
	if r.code != 0 {
		if strings.HasPrefix(b.queue, "azqueue:") {
			t.Logf("no result record on this backend here: %s", r.stderr)
			return
		}
		t.Fatalf("result: exit %d: %s", r.code, r.stderr)
	}
	var rec struct {
		State    string `json:"state"`
		Env      string `json:"env"`
		Attempts []struct {
			Outcome string   `json:"outcome"`
			Env     string   `json:"env"`
			SavedS  *float64 `json:"saved_s"`
			LostS   *float64 `json:"lost_s"`
		} `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rec); err != nil {
		t.Fatalf("result --json: %v: %s", err, r.stdout)
	}
	if strings.HasPrefix(b.queue, "azqueue:") && rec.State == "succeeded" && rec.Env == "second" {
		// Storage Queue messages of ai4s-jobq's v1 format carry no
		// attempt history (docs/capabilities.md); the worker registry
		// counts the preemption instead.
		return
	}
	if rec.State != "succeeded" || rec.Env != "second" || len(rec.Attempts) != 2 {
		t.Fatalf("record: %s; want succeeded on env second after 2 attempts", r.stdout)
	}
	a := rec.Attempts[0]
	if a.Outcome != "preempted" || a.Env != "Standard_D2s_v5/westeurope" || a.SavedS == nil || *a.SavedS <= 0 || a.LostS == nil {
		t.Errorf("first attempt: %+v; want preempted on Standard_D2s_v5/westeurope with saved work", a)
	}
}

// TestCheckpointIntactAfterKillMidUpload: a worker killed (SIGKILL) while
// it writes a new checkpoint leaves the previous checkpoint whole; the
// next attempt resumes from it.
func TestCheckpointIntactAfterKillMidUpload(t *testing.T) {
	t.Parallel()
	b := newBench(t)
	stashURL, _, _ := fileStash(t, b)
	stashDir := strings.TrimPrefix(stashURL, "file://")
	task := `d=$JOBQ_CHECKPOINT_DIR
if [ -e "$d/state" ]; then echo "resumed from $(cat "$d/state")"; [ -e "$d/big" ] && echo "has big"; exit 0; fi
echo v1 > "$d/state"
touch "$d/.jobq-save"
while [ -e "$d/.jobq-save" ] || [ -e "$d/.jobq-saving" ]; do sleep 0.01; done
echo "saved v1"
head -c 150000000 /dev/zero > "$d/big"
echo v2 > "$d/state"
touch "$d/.jobq-save"
sleep 300`
	b.must("push", "-c", task)
	w1 := b.start(nil, "worker", "--checkpoints", "--stash", stashURL, "--visibility-timeout", "2s")
	w1.waitFor("] saved v1")
	// The save of v2 writes its object to a temporary file, then links
	// it in place and switches the pointer: kill the worker while the
	// temporary file is being written.
	deadline := time.Now().Add(30 * time.Second)
	var partial string
	for partial == "" {
		if time.Now().After(deadline) {
			t.Fatalf("the second checkpoint's upload never started:\n%s", w1.output())
		}
		es, _ := os.ReadDir(stashDir)
		for _, e := range es {
			if strings.HasPrefix(e.Name(), ".tmp-") {
				partial = e.Name()
			}
		}
		time.Sleep(time.Millisecond)
	}
	w1.signal(syscall.SIGKILL)
	w1.wait()
	if _, err := os.Stat(filepath.Join(stashDir, partial)); err != nil {
		t.Fatalf("the upload was not cut short (its temporary object is gone: %v); the kill came too late:\n%s", err, w1.output())
	}
	if strings.Count(w1.output(), "checkpoint saved") != 1 {
		t.Fatalf("want exactly one save before the kill:\n%s", w1.output())
	}

	// The lease expires within 2s; the task is delivered again.
	w2 := b.start(nil, "worker", "--checkpoints", "--stash", stashURL, "--wait")
	w2.waitFor("] resumed from")
	w2.waitFor("task done")
	w2.signal(syscall.SIGTERM)
	w2.wait()
	out := w2.output()
	if !strings.Contains(out, "] resumed from v1") || strings.Contains(out, "] has big") {
		t.Fatalf("the next attempt did not resume from the intact first checkpoint:\n%s", tail(out, 4000))
	}
}

// waitLong waits up to d for s in p's log.
func waitLong(p *proc, s string, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.output(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %q in the log:\n%s", s, tail(p.output(), 4000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
