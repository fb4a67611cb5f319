package blobresults

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestWorkersShareTheContainer: worker records round-trip, are replaced
// by a later write, listed from a time on, purged by age, and never read
// as result records (nor purged as expired ones within their retention).
func TestWorkersShareTheContainer(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := ctxOf(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	recs := []*driver.WorkerRecord{
		{ID: "host-1", Heartbeat: now, Data: []byte(`{"a":1}`)},
		{ID: "host ü/2", Heartbeat: now.Add(-time.Hour), Withdrawn: true, Data: []byte(`{"b":2}`)},
		{ID: "old", Heartbeat: now.Add(-48 * time.Hour), Data: []byte(`{}`)},
	}
	for _, r := range recs {
		if err := s.PutWorker(ctx, r); err != nil {
			t.Fatalf("PutWorker %s: %v", r.ID, err)
		}
	}
	again := &driver.WorkerRecord{ID: "host-1", Heartbeat: now.Add(time.Second), Data: []byte(`{"a":2}`)}
	if err := s.PutWorker(ctx, again); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListWorkers(ctx, now.Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]*driver.WorkerRecord{}
	for _, r := range got {
		byID[r.ID] = r
	}
	if len(got) != 2 || byID["old"] != nil {
		t.Fatalf("ListWorkers since 2h ago = %d records %v; want host-1 and host ü/2", len(got), byID)
	}
	if r := byID["host-1"]; r == nil || !r.Heartbeat.Equal(again.Heartbeat) || string(r.Data) != `{"a":2}` || r.Withdrawn {
		t.Errorf("host-1 = %+v; want the second write", r)
	}
	if r := byID["host ü/2"]; r == nil || !r.Withdrawn || string(r.Data) != `{"b":2}` {
		t.Errorf("host ü/2 = %+v; want it withdrawn with its data", r)
	}
	if rs := get(t, s, "host-1", "workers/host-1"); rs[0] != nil || rs[1] != nil {
		t.Errorf("a worker record was read as a result record: %v", rs)
	}
	n, err := s.PurgeWorkers(ctx, now.Add(-24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("PurgeWorkers = %d, %v; want the old record deleted", n, err)
	}
	if n, err := s.PurgeResults(ctx, now); err != nil || n != 0 {
		t.Errorf("PurgeResults deleted %d (%v); worker records within the retention must stay", n, err)
	}
	if got, _ := s.ListWorkers(ctx, time.Time{}); len(got) != 2 {
		t.Errorf("after the purge %d records are listed; want 2", len(got))
	}
}
