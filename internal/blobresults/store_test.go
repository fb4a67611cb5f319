package blobresults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash/azblob"
)

// The tests run against Azurite's blob service on 127.0.0.1:10000
// (started by .ci/start-azurite.sh when nothing listens there).

func TestMain(m *testing.M) {
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10000", time.Second); err == nil {
		c.Close()
	} else {
		script, _ := filepath.Abs("../../.ci/start-azurite.sh")
		if out, err := exec.Command(script).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "blobresults tests need Azurite: %v\n%s", err, out)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newStore returns a store on a fresh container name (not created yet),
// deleted when the test ends.
func newStore(t *testing.T) *Store {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "jqr-" + hex.EncodeToString(b[:])
	c, err := container.NewClientFromConnectionString(azblob.DevelopmentConnectionString, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Delete(context.Background(), nil) })
	return New(c, "azblob://devstoreaccount1/"+name)
}

func rec(id string, state driver.ResultState, keep time.Duration, data string) *driver.ResultRecord {
	now := time.Now()
	return &driver.ResultRecord{ID: id, State: state, UpdatedAt: now, ExpiresAt: now.Add(keep), Data: []byte(data)}
}

func get(t *testing.T, s *Store, ids ...string) []*driver.ResultRecord {
	t.Helper()
	got, err := s.GetResults(ctxOf(t), ids)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	return got
}

func TestPutGetCreatesTheContainer(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	if got := get(t, s, "a"); got[0] != nil {
		t.Fatalf("record before any write: %+v", got[0])
	}
	weird := strings.Repeat("ID with spaces/and/slashes ", 20)
	in := []*driver.ResultRecord{
		rec("a", driver.ResultSucceeded, time.Hour, `{"exit":0}`),
		rec(weird, driver.ResultDeadLettered, time.Hour, "not json \x00"),
	}
	if err := s.PutResults(ctxOf(t), in); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, "a", weird, "none")
	for i, want := range in {
		g := got[i]
		if g == nil || g.ID != want.ID || g.State != want.State || string(g.Data) != string(want.Data) ||
			!g.ExpiresAt.Equal(want.ExpiresAt.UTC()) || !g.UpdatedAt.Equal(want.UpdatedAt.UTC()) {
			t.Fatalf("record %d: got %+v, want %+v", i, g, want)
		}
	}
	if got[2] != nil {
		t.Fatalf("unknown id: %+v", got[2])
	}
}

func TestCancelRequestIsInsertIfAbsent(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := ctxOf(t)
	if err := s.PutResults(ctx, []*driver.ResultRecord{
		rec("ended", driver.ResultSucceeded, time.Hour, `1`),
		rec("stale", driver.ResultSucceeded, 200*time.Millisecond, `2`),
		rec("asked", driver.ResultCancelRequested, time.Hour, `3`),
	}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // stale expires (a real expiry, not a timed assertion)
	if err := s.PutResults(ctx, []*driver.ResultRecord{
		rec("ended", driver.ResultCancelRequested, time.Hour, `10`),
		rec("stale", driver.ResultCancelRequested, time.Hour, `20`),
		rec("asked", driver.ResultCancelRequested, time.Hour, `30`),
		rec("new", driver.ResultCancelRequested, time.Hour, `40`),
	}); err != nil {
		t.Fatal(err)
	}
	got := get(t, s, "ended", "stale", "asked", "new")
	want := []struct {
		state driver.ResultState
		data  string
	}{
		{driver.ResultSucceeded, `1`},        // an end is never hidden
		{driver.ResultCancelRequested, `20`}, // an expired record is replaced
		{driver.ResultCancelRequested, `3`},  // the first request stays
		{driver.ResultCancelRequested, `40`},
	}
	for i, w := range want {
		if got[i] == nil || got[i].State != w.state || string(got[i].Data) != w.data {
			t.Fatalf("record %d: got %+v, want %s %s", i, got[i], w.state, w.data)
		}
	}
	// An end replaces a request.
	if err := s.PutResults(ctx, []*driver.ResultRecord{rec("asked", driver.ResultCancelled, time.Hour, `5`)}); err != nil {
		t.Fatal(err)
	}
	if g := get(t, s, "asked")[0]; g == nil || g.State != driver.ResultCancelled {
		t.Fatalf("after the end: %+v", g)
	}
}

func TestPurgeDeletesOnlyExpired(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := ctxOf(t)
	if n, err := s.PurgeResults(ctx, time.Now()); n != 0 || err != nil {
		t.Fatalf("purge of a missing container: %d, %v", n, err)
	}
	var recs []*driver.ResultRecord
	for i := range 5 {
		recs = append(recs, rec(fmt.Sprintf("old-%d", i), driver.ResultSucceeded, 100*time.Millisecond, `0`))
	}
	recs = append(recs, rec("young", driver.ResultSucceeded, time.Hour, `0`))
	if err := s.PutResults(ctx, recs); err != nil {
		t.Fatal(err)
	}
	n, err := s.PurgeResults(ctx, time.Now().Add(time.Minute))
	if err != nil || n != 5 {
		t.Fatalf("purge: %d, %v; want 5 expired records deleted", n, err)
	}
	if g := get(t, s, "young")[0]; g == nil {
		t.Fatal("purge deleted an unexpired record")
	}
	pager := s.client.NewListBlobsFlatPager(nil)
	left := 0
	for pager.More() {
		p, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		left += len(p.Segment.BlobItems)
	}
	if left != 1 {
		t.Fatalf("%d blobs left, want 1", left)
	}
}

func TestExpiredRecordIsNotReturned(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	r := rec("soon", driver.ResultSucceeded, 100*time.Millisecond, `0`)
	if err := s.PutResults(ctxOf(t), []*driver.ResultRecord{r}); err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(r.ExpiresAt) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := get(t, s, "soon")[0]; g != nil {
		t.Fatalf("expired record returned: %+v", g)
	}
}

func TestBlobName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id     string
		plain  bool
		prefix string
	}{
		{"task-1", true, ""},
		{"a.b_c-D9", true, ""},
		{"has space", false, "~"},
		{"-leading", false, "~"},
		{"~abc", false, "~"},
		{strings.Repeat("x", 201), false, "~"},
		{strings.Repeat("x", 200), true, ""},
		{"a", true, ""},
		{"step1.", false, "~"},
		{"a.b.", false, "~"},
	}
	for _, tt := range tests {
		got := blobName(tt.id)
		if tt.plain && got != tt.id || !tt.plain && (!strings.HasPrefix(got, tt.prefix) || len(got) != 65) {
			t.Errorf("blobName(%q) = %q", tt.id, got)
		}
	}
	if blobName("has space") == blobName("has  space") {
		t.Error("two IDs share a blob")
	}
}

func TestOpenSpecs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec  string
		where string
		code  errcode.Code // Unknown: no error
	}{
		{"https://acct.blob.core.windows.net/results?sv=2024&sig=SECRET", "https://acct.blob.core.windows.net/results", errcode.Unknown},
		{"http://127.0.0.1:10000/devstoreaccount1/results?sig=SECRET", "http://127.0.0.1:10000/devstoreaccount1/results", errcode.Unknown},
		{"https://acct.blob.core.windows.net/results?foo=bar", "", errcode.InvalidArgument},
		{"https://acct.blob.core.windows.net/Bad_Name?sig=x", "", errcode.InvalidArgument},
		{"azblob://acct/x", "", errcode.InvalidArgument},
		{"ftp://acct/results", "", errcode.InvalidArgument},
		{"results", "", errcode.InvalidArgument},
	}
	for _, tt := range tests {
		s, err := Open(tt.spec, nil, nil)
		if errcode.Of(err) != tt.code || (tt.code == errcode.Unknown) != (err == nil) {
			t.Errorf("Open(%q): %v, want code %v", tt.spec, err, tt.code)
			continue
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("Open(%q): error shows the SAS: %v", tt.spec, err)
		}
		if err == nil && s.Where() != tt.where {
			t.Errorf("Open(%q).Where() = %q, want %q", tt.spec, s.Where(), tt.where)
		}
	}
}
