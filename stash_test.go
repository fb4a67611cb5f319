package jobq_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
	azb "github.com/jobq/jobq/stash/azblob"
	_ "github.com/jobq/jobq/stash/gcs"
	"github.com/jobq/jobq/wire"
)

// stashBundle is an SQLite queue limited to 64 KiB messages with a stash.
type stashBundle struct {
	q        *jobq.Queue
	url      string // the queue URL, without the stash
	stashLoc string
	files    string // the file stash's directory ("" for gcs, azblob)
	gcs      *fakestorage.Server
	blobs    *container.Client // the azblob stash's container
}

const limit64k = 64 << 10

func sqliteURL(t *testing.T) string {
	return "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=big&max_message_bytes=65536"
}

// setupFileStash opens a queue whose stash is a directory, given by the
// portable stash= parameter.
func setupFileStash(t *testing.T) *stashBundle {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "stash")
	u := sqliteURL(t)
	q, err := jobq.Open(t.Context(), u+"&stash=file://"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return &stashBundle{q: q, url: u, stashLoc: "file://" + filepath.ToSlash(dir), files: dir}
}

// setupGCSStash opens a queue whose stash is a bucket on an in-process
// fake-gcs-server, given by Options.StashURL and reached through
// STORAGE_EMULATOR_HOST (so tests using it cannot be parallel).
func setupGCSStash(t *testing.T) *stashBundle {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Writer: discard{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "tasks"})
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL(), "http://"))
	u := sqliteURL(t)
	q, err := jobq.OpenWithOptions(t.Context(), u, jobq.Options{StashURL: "gs://tasks/jobq"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return &stashBundle{q: q, url: u, stashLoc: "gs://tasks/jobq", gcs: srv}
}

// setupBlobStash opens a queue whose stash is a container on Azurite's
// blob service (started by .ci/start-azurite.sh when nothing listens on
// 127.0.0.1:10000), reached through $AZURE_STORAGE_CONNECTION_STRING (so
// tests using it cannot be parallel).
func setupBlobStash(t *testing.T) *stashBundle {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10000", time.Second); err == nil {
		_ = c.Close()
	} else if out, err := exec.Command("./.ci/start-azurite.sh").CombinedOutput(); err != nil {
		t.Fatalf("the azblob stash tests need Azurite's blob service: %v\n%s", err, out)
	}
	t.Setenv(azb.EnvAzureConnectionString, azb.DevelopmentConnectionString)
	name := "jq-" + strings.ToLower(rand.Text()[:12])
	c, err := container.NewClientFromConnectionString(azb.DevelopmentConnectionString, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), nil) })
	u := sqliteURL(t)
	loc := "azblob://devstoreaccount1/" + name + "/jobq"
	q, err := jobq.OpenWithOptions(t.Context(), u, jobq.Options{StashURL: loc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return &stashBundle{q: q, url: u, stashLoc: loc, blobs: c}
}

// stashSetups are the stores the queue-level stash tests run on.
var stashSetups = []struct {
	name  string
	setup func(*testing.T) *stashBundle
}{{"file", setupFileStash}, {"gcs", setupGCSStash}, {"azblob", setupBlobStash}}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// bigTask is a shell task of about n bytes.
func bigTask(n int) *jobq.Task {
	return &jobq.Task{Command: "echo é" + strings.Repeat("0123456789abcdef", n/16), Env: []jobq.EnvVar{{Name: "K", Value: "v"}}, NumRetries: 2,
		RetryBackoff: jobq.Backoff{Base: time.Millisecond, Cap: time.Millisecond}} // retried almost at once
}

// objects lists the stash's objects.
func (b *stashBundle) objects(t *testing.T) []string {
	t.Helper()
	if b.blobs != nil {
		var names []string
		pager := b.blobs.NewListBlobsFlatPager(nil)
		for pager.More() {
			page, err := pager.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Segment.BlobItems {
				names = append(names, *it.Name)
			}
		}
		return names
	}
	if b.gcs != nil {
		list, err := b.gcs.ListObjectsWithOptionsPaginated("tasks", fakestorage.ListOptions{Prefix: "jobq/"})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range list.Objects {
			names = append(names, a.Name)
		}
		return names
	}
	ents, err := os.ReadDir(b.files)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// overwrite replaces an object's bytes behind the queue's back.
func (b *stashBundle) overwrite(t *testing.T, ref *jobq.StashRef, data []byte) {
	t.Helper()
	_, name, err := stash.Split(ref.URL)
	if err != nil {
		t.Fatal(err)
	}
	if b.blobs != nil {
		if _, err := b.blobs.NewBlockBlobClient("jobq/"+name).Upload(t.Context(), streaming.NopCloser(bytes.NewReader(data)), nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	if b.gcs != nil {
		b.gcs.CreateObject(fakestorage.Object{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "tasks", Name: "jobq/" + name}, Content: data})
		return
	}
	if data == nil {
		if err := os.Remove(filepath.Join(b.files, name)); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(filepath.Join(b.files, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (b *stashBundle) remove(t *testing.T, ref *jobq.StashRef) {
	t.Helper()
	if b.blobs != nil {
		_, name, _ := stash.Split(ref.URL)
		if _, err := b.blobs.NewBlobClient("jobq/"+name).Delete(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	if b.gcs != nil {
		_, name, _ := stash.Split(ref.URL)
		if err := b.gcs.Backend().DeleteObject("tasks", "jobq/"+name); err != nil {
			t.Fatal(err)
		}
		return
	}
	b.overwrite(t, ref, nil)
}

// peekRef returns the stash reference of the only queued message.
func (b *stashBundle) peekRef(t *testing.T) *jobq.StashRef {
	t.Helper()
	ps, err := b.q.Admin().Peek(t.Context(), 10)
	if err != nil || len(ps) != 1 || ps[0].Task == nil || ps[0].Task.Stash == nil {
		t.Fatalf("peek: %v, %d messages, want one stash reference", err, len(ps))
	}
	if n := len(ps[0].Body); n > limit64k {
		t.Fatalf("queued reference message is %d bytes, over the 64 KiB limit", n)
	}
	return ps[0].Task.Stash
}

func receive(t *testing.T, q *jobq.Queue) (*jobq.Envelope, error) {
	t.Helper()
	return q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute, Wait: 2 * time.Second})
}

func TestStashRoundTrip(t *testing.T) {
	for _, st := range stashSetups {
		t.Run(st.name, func(t *testing.T) {
			b := st.setup(t)
			task := bigTask(5 << 20)
			want := *task
			res, err := b.q.Push(t.Context(), task)
			if err != nil {
				t.Fatalf("push of a %d-byte task: %v", len(task.Command), err)
			}
			ref := b.peekRef(t)
			if !strings.HasPrefix(ref.URL, b.stashLoc+"/") || ref.Size < 5<<20 || len(b.objects(t)) != 1 {
				t.Fatalf("reference %+v, objects %v; want one object of 5 MiB+ under %s", ref, b.objects(t), b.stashLoc)
			}
			// Pushing the same task again stores no second object.
			if _, err := b.q.Push(t.Context(), bigTask(5<<20)); err != nil {
				t.Fatal(err)
			}
			if n := len(b.objects(t)); n != 1 {
				t.Fatalf("%d objects after pushing the same task twice, want 1", n)
			}

			e, err := receive(t, b.q)
			if err != nil {
				t.Fatal(err)
			}
			got := e.Task
			if got.ID != res.ID || got.Command != want.Command || got.Stash != nil || got.NumRetries != 2 || len(got.Env) != 1 {
				t.Fatalf("received task %.80s (id %s, stash %v, retries %d), want the full task %s", got.Command, got.ID, got.Stash, got.NumRetries, res.ID)
			}
			// A failure retries with one retry fewer; the object stays.
			if r, err := e.Fail(t.Context(), errors.New("boom"), ""); err != nil || !r.Retried {
				t.Fatalf("Fail = %+v, %v", r, err)
			}
			if len(b.objects(t)) != 1 {
				t.Fatal("the stash object was deleted on a retry")
			}
			e, err = receive(t, b.q)
			if err != nil {
				t.Fatal(err)
			}
			if e.Task.NumRetries != 1 || e.Task.Command != want.Command {
				t.Fatalf("after a retry: %d retries, want 1", e.Task.NumRetries)
			}
			if err := e.Complete(t.Context()); err != nil {
				t.Fatal(err)
			}
			if objs := b.objects(t); len(objs) != 0 {
				t.Fatalf("objects %v remain after Complete, want none", objs)
			}
		})
	}
}

func TestStashPoison(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, b *stashBundle, ref *jobq.StashRef)
		reason string
	}{
		{"checksum mismatch", func(t *testing.T, b *stashBundle, ref *jobq.StashRef) {
			data := bytes.Repeat([]byte("x"), int(ref.Size))
			b.overwrite(t, ref, data)
		}, "SHA-256"},
		{"missing object", func(t *testing.T, b *stashBundle, ref *jobq.StashRef) { b.remove(t, ref) }, "does not exist"},
		{"truncated object", func(t *testing.T, b *stashBundle, ref *jobq.StashRef) { b.overwrite(t, ref, []byte("{}")) }, "is 2 bytes"},
	}
	for _, st := range stashSetups {
		for _, tc := range tests {
			t.Run(st.name+"/"+tc.name, func(t *testing.T) {
				b := st.setup(t)
				if _, err := b.q.Push(t.Context(), bigTask(200_000)); err != nil {
					t.Fatal(err)
				}
				ref := b.peekRef(t)
				tc.damage(t, b, ref)
				if e, err := b.q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute}); !errors.Is(err, jobq.ErrEmpty) {
					t.Fatalf("Receive = %v, %v; want nothing (the message is poison)", e, err)
				}
				dls, err := b.q.Admin().DeadLetters(t.Context(), 10)
				if err != nil || len(dls) != 1 {
					t.Fatalf("dead letters: %d, %v; want the poison message", len(dls), err)
				}
				if !strings.Contains(dls[0].Reason, "poison") || !strings.Contains(dls[0].Reason, tc.reason) {
					t.Errorf("dead-letter reason %q, want poison saying %q", dls[0].Reason, tc.reason)
				}
				// Purging the dead letter deletes its object.
				if _, err := b.q.Admin().PurgeDeadLetters(t.Context()); err != nil {
					t.Fatal(err)
				}
				for _, o := range b.objects(t) {
					if strings.HasSuffix(o, ref.SHA256) {
						t.Errorf("object %s remains after purge", o)
					}
				}
			})
		}
	}
}

// A reference whose object holds a different task is poison too.
func TestStashObjectForAnotherTask(t *testing.T) {
	t.Parallel()
	b := setupFileStash(t)
	body, err := wire.Marshal(bigTask(100_000))
	if err != nil {
		t.Fatal(err)
	}
	sum := stash.Sum(body)
	ref := &jobq.StashRef{URL: b.stashLoc + "/" + sum, SHA256: sum, Size: int64(len(body))}
	b.overwrite(t, ref, body)
	if _, err := b.q.Push(t.Context(), &jobq.Task{ID: "someone-else", Payload: json.RawMessage(`{}`), Stash: ref}); err != nil {
		t.Fatal(err)
	}
	if e, err := b.q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("Receive = %v, %v; want nothing (the message is poison)", e, err)
	}
	dls, err := b.q.Admin().DeadLetters(t.Context(), 10)
	if err != nil || len(dls) != 1 || !strings.Contains(dls[0].Reason, "not the task itself") {
		t.Fatalf("dead letters %v, %v; want one saying the object holds another task", dls, err)
	}
}

// A reference to a store whose scheme this program did not register is
// left for a receiver that has it: not dead-lettered, and not lost.
func TestStashUnregisteredScheme(t *testing.T) {
	t.Parallel()
	b := setupFileStash(t)
	sum := stash.Sum([]byte("elsewhere"))
	ref := &jobq.StashRef{URL: "s3://bucket/jobq/" + sum, SHA256: sum, Size: 9}
	if _, err := b.q.Push(t.Context(), &jobq.Task{ID: "in-s3", Payload: json.RawMessage(`{}`), Stash: ref}); err != nil {
		t.Fatal(err)
	}
	if e, err := b.q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Second}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("Receive = %v, %v; want nothing (the store is not registered here)", e, err)
	}
	if dls, err := b.q.Admin().DeadLetters(t.Context(), 10); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters %v, %v; want none: the message is not poison", dls, err)
	}
	if n, err := b.q.Admin().Size(t.Context()); err != nil || n != 1 {
		t.Errorf("queue size %d, %v; want the message still queued", n, err)
	}
}

func TestStashTooLargeWithoutStash(t *testing.T) {
	t.Parallel()
	q, err := jobq.Open(t.Context(), sqliteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = q.Push(t.Context(), bigTask(100_000))
	if errcode.Of(err) != errcode.TooLarge || !errors.Is(err, errcode.TooLarge) {
		t.Fatalf("push = %v, want TooLarge", err)
	}
	for _, s := range []string{"bytes encoded", "limit of 65536 bytes", "--stash", "$JOBQ_STASH", "stash="} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

// TestStashRefusedPushLeavesNoObject: a push that is refused after its
// large task was written to the stash (a later task of the batch is
// invalid, the reference itself is over the limit, the queue is full)
// deletes the object it wrote; an object that a queued message already
// refers to is kept, whatever becomes of the push.
func TestStashRefusedPushLeavesNoObject(t *testing.T) {
	t.Parallel()
	// maxDepth1 bounds the queue at one message and fills it with task.
	maxDepth1 := func(t *testing.T, b *stashBundle, task *jobq.Task) {
		t.Helper()
		if err := b.q.Admin().SetPolicy(t.Context(), driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.q.Push(t.Context(), task); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		query    string // added to the queue URL
		setup    func(t *testing.T, b *stashBundle)
		push     []*jobq.Task
		code     errcode.Code
		want     string // in the error
		objects  int    // left in the stash
		messages int    // left in the queue
	}{
		{name: "a later task is invalid", push: []*jobq.Task{bigTask(100_000), {Command: "echo \x00"}},
			code: errcode.InvalidArgument, want: "task 2 of 2"},
		{name: "the reference is over the limit", query: "&max_message_bytes=200", push: []*jobq.Task{bigTask(100_000)},
			code: errcode.TooLarge, want: "even its reference message"},
		{name: "the queue is full", setup: func(t *testing.T, b *stashBundle) { maxDepth1(t, b, &jobq.Task{Command: "true"}) },
			push: []*jobq.Task{bigTask(100_000)}, code: errcode.ResourceExhausted, want: "queue is full", messages: 1},
		{name: "the queue is full of the same task", setup: func(t *testing.T, b *stashBundle) { maxDepth1(t, b, bigTask(100_000)) },
			push: []*jobq.Task{bigTask(100_000), {Command: "true"}}, code: errcode.ResourceExhausted, want: "queue is full", objects: 1, messages: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "stash")
			u := sqliteURL(t) + tt.query
			q, err := jobq.Open(t.Context(), u+"&stash=file://"+filepath.ToSlash(dir))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = q.Close() })
			b := &stashBundle{q: q, url: u, stashLoc: "file://" + filepath.ToSlash(dir), files: dir}
			if tt.setup != nil {
				tt.setup(t, b)
			}
			_, err = q.PushBatch(t.Context(), tt.push, jobq.PushOptions{})
			if errcode.Of(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("push = %v, want %v saying %q", err, tt.code, tt.want)
			}
			if objs := b.objects(t); len(objs) != tt.objects {
				t.Errorf("stash objects after the refused push: %v, want %d", objs, tt.objects)
			}
			for range tt.messages {
				e, err := receive(t, q)
				if err != nil {
					t.Fatalf("receiving what was queued before the refused push: %v", err)
				}
				if err := e.Complete(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if st, err := q.Admin().Stats(t.Context()); err != nil || st.Ready+st.InFlight+st.Delayed != 0 {
				t.Errorf("stats after the queued messages were received: %+v, %v; want an empty queue", st, err)
			}
		})
	}
}

// Small tasks never touch the stash.
func TestStashSmallTaskInline(t *testing.T) {
	t.Parallel()
	b := setupFileStash(t)
	if _, err := b.q.Push(t.Context(), &jobq.Task{Command: "echo small"}); err != nil {
		t.Fatal(err)
	}
	e, err := receive(t, b.q)
	if err != nil || e.Task.Command != "echo small" {
		t.Fatalf("receive = %v, %v", e, err)
	}
	if objs := b.objects(t); len(objs) != 0 {
		t.Errorf("a small task created stash objects %v", objs)
	}
}

// A receiver without a stash configured still reads references (it opens
// the store they name), and a stash it cannot reach leaves the message for
// later instead of dead-lettering it.
func TestStashReceiverWithoutConfig(t *testing.T) {
	t.Parallel()
	b := setupFileStash(t)
	if _, err := b.q.Push(t.Context(), bigTask(300_000)); err != nil {
		t.Fatal(err)
	}
	plain, err := jobq.Open(t.Context(), b.url)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	// Unreachable: the stash directory is replaced by a file.
	moved := b.files + ".moved"
	if err := os.Rename(b.files, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.files, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	short := context.Background()
	e, err := plain.Receive(short, jobq.ReceiveOptions{Visibility: time.Second})
	if !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("receive with the stash unreachable = %v, %v; want nothing", e, err)
	}
	if dls, _ := plain.Admin().DeadLetters(t.Context(), 10); len(dls) != 0 {
		t.Fatalf("message dead-lettered although the stash was only unreachable: %s", dls[0].Reason)
	}
	if err := os.Remove(b.files); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(moved, b.files); err != nil {
		t.Fatal(err)
	}
	// Reachable again: the message comes back after its lease and resolves.
	e, err = plain.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute, Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Task.Command) < 300_000 || e.Task.Stash != nil {
		t.Fatalf("received %d-byte command, stash %v", len(e.Task.Command), e.Task.Stash)
	}
	if err := e.Complete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if objs := b.objects(t); len(objs) != 0 {
		t.Errorf("objects %v remain after Complete by a receiver without a configured stash", objs)
	}
}

func TestStashOpenErrors(t *testing.T) {
	t.Parallel()
	_, err := jobq.Open(t.Context(), sqliteURL(t)+"&stash=s3://bucket/x")
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "unknown scheme") {
		t.Errorf("open with an s3 stash = %v, want InvalidArgument naming the scheme", err)
	}
	// The error names the stash once: the store's own message names it.
	for _, loc := range []string{"s3://bucket/x", "file:///proc/no/such/dir"} {
		_, err := jobq.Open(t.Context(), sqliteURL(t)+"&stash="+loc)
		if err == nil {
			t.Errorf("open with stash %s succeeded, want an error", loc)
			continue
		}
		var jerr *jobq.Error
		if !errors.As(err, &jerr) {
			t.Fatalf("open with stash %s = %v, want a *jobq.Error", loc, err)
		}
		msg := strings.Replace(err.Error(), jerr.Queue, "QUEUE", 1)
		if n := strings.Count(msg, strings.TrimPrefix(loc, "file://")); n != 1 {
			t.Errorf("open with stash %s = %q: names the stash %d times, want once", loc, err, n)
		}
	}
	// The explicit option wins over the URL parameter.
	dir := t.TempDir()
	q, err := jobq.OpenWithOptions(t.Context(), sqliteURL(t)+"&stash=s3://ignored", jobq.Options{StashURL: "file://" + dir})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Push(t.Context(), bigTask(100_000)); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d objects in the Options stash, want 1", len(ents))
	}
}

// BenchmarkStashRoundTrip pushes, receives and completes a 1 MiB task on
// SQLite: through a file stash (64 KiB limit) and inline (default limit).
func BenchmarkStashRoundTrip(b *testing.B) {
	for _, mode := range []string{"stashed", "inline"} {
		b.Run(mode+"-1MiB", func(b *testing.B) {
			u := "sqlite://" + filepath.Join(b.TempDir(), "q.db") + "?queue=bench"
			if mode == "stashed" {
				u += "&max_message_bytes=65536&stash=file://" + filepath.ToSlash(b.TempDir())
			}
			q, err := jobq.Open(b.Context(), u)
			if err != nil {
				b.Fatal(err)
			}
			defer q.Close()
			b.SetBytes(1 << 20)
			for i := 0; b.Loop(); i++ {
				task := bigTask(1 << 20)
				task.Command += strconv.Itoa(i)
				if _, err := q.Push(b.Context(), task); err != nil {
					b.Fatal(err)
				}
				e, err := q.Receive(b.Context(), jobq.ReceiveOptions{Wait: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				if err := e.Complete(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
