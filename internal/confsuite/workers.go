package confsuite

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

// workerChecks are the checks of the worker registry (the worker-registry
// feature). Keep docs/conformance.md in step.
func workerChecks() []check {
	return []check{
		{"WorkerAnnounce", checkWorkerAnnounce},
		{"WorkerHeartbeat", checkWorkerHeartbeat},
		{"WorkerWithdraw", checkWorkerWithdraw},
		{"WorkerVanished", checkWorkerVanished},
	}
}

// needRegistry returns when the backend keeps a worker registry; on one
// that declares none, it checks that announcing and listing fail with
// Unimplemented naming the feature, and skips the check.
func (c *C) needRegistry(q *handle) {
	c.Helper()
	if level(q, driver.WorkerRegistry) != driver.Unsupported {
		return
	}
	err := hooks.AnnounceWorker(c.ctx(), q, &jobq.WorkerInfo{ID: "conformance-unsupported"})
	c.expectCode(err, errcode.Unimplemented, "AnnounceWorker on a backend without worker-registry")
	if err != nil && !errors.Is(err, errcode.Unimplemented) {
		c.Errorf("errors.Is(err, errcode.Unimplemented) is false for %v", err)
	}
	_, err = q.Admin().Workers(c.ctx(), jobq.WorkersOptions{})
	c.expectCode(err, errcode.Unimplemented, "Workers on a backend without worker-registry")
	c.skipNeeds("driver.WorkerStore (feature worker-registry)", "worker-registry is unsupported: "+q.Capabilities().Features[driver.WorkerRegistry].Fallback)
}

// sampleWorker is a worker record with every field set; n makes it
// distinct.
func sampleWorker(n int) *jobq.WorkerInfo {
	now := time.Now().UTC().Truncate(time.Millisecond)
	return &jobq.WorkerInfo{
		ID:         fmt.Sprintf("conformance-%d-%d", n, now.UnixNano()),
		Host:       "host-ü",
		PID:        4000 + n,
		Started:    now.Add(-time.Minute),
		Version:    "v0.0.0-conformance",
		Tasks:      []string{"task-a", "task-b"},
		Done:       12,
		Failed:     3,
		CPUSeconds: 1.5,
		CPUPercent: 42.5,
		RSSBytes:   64 << 20,
		Interval:   time.Second,
		Heartbeat:  now,
	}
}

// listWorkers lists q's workers, withdrawn ones included, by ID.
func (c *C) listWorkers(q *handle, ttl time.Duration) map[string]*jobq.WorkerInfo {
	c.Helper()
	ws, err := q.Admin().Workers(c.ctx(), jobq.WorkersOptions{TTL: ttl, Withdrawn: true})
	if err != nil {
		c.Fatalf("Workers: %v", err)
	}
	m := map[string]*jobq.WorkerInfo{}
	for _, w := range ws {
		if m[w.ID] != nil {
			c.Errorf("Workers listed worker %s twice", w.ID)
		}
		m[w.ID] = w
	}
	return m
}

// heartbeatSlack is how far a listed heartbeat may be from the announced
// one: a driver may keep heartbeats on its engine's clock and list them
// as long ago as they were, on the lister's clock, which is exact only to
// a request's round trip.
const heartbeatSlack = time.Second

// sameWorker compares what was announced with what was listed.
func (c *C) sameWorker(got, want *jobq.WorkerInfo, when string) {
	c.Helper()
	switch {
	case got == nil:
		c.Errorf("%s: worker %s is not listed", when, want.ID)
	case got.Host != want.Host || got.PID != want.PID || !got.Started.Equal(want.Started) ||
		got.Version != want.Version || !slices.Equal(got.Tasks, want.Tasks) ||
		got.Done != want.Done || got.Failed != want.Failed || got.CPUSeconds != want.CPUSeconds ||
		got.CPUPercent != want.CPUPercent || got.RSSBytes != want.RSSBytes || got.Interval != want.Interval:
		c.Errorf("%s: worker %s listed as %+v, announced as %+v", when, want.ID, got, want)
	case got.Heartbeat.Sub(want.Heartbeat).Abs() > heartbeatSlack:
		c.Errorf("%s: worker %s heartbeat listed as %v, announced %v", when, want.ID, got.Heartbeat, want.Heartbeat)
	}
}

// checkWorkerAnnounce: an announced worker is listed live with everything
// it announced, only on its own queue. Unsupported: Unimplemented.
func checkWorkerAnnounce(c *C) {
	q := c.open()
	c.needRegistry(q)
	other := c.open()
	a, b := sampleWorker(1), sampleWorker(2)
	b.Tasks = nil
	for _, w := range []*jobq.WorkerInfo{a, b} {
		if err := hooks.AnnounceWorker(c.ctx(), q, w); err != nil {
			c.Fatalf("AnnounceWorker: %v", err)
		}
	}
	got := c.listWorkers(q, time.Hour)
	c.sameWorker(got[a.ID], a, "after announce")
	c.sameWorker(got[b.ID], b, "after announce")
	for _, w := range got {
		if w.State != jobq.WorkerLive {
			c.Errorf("worker %s that just announced itself is %s, want live", w.ID, w.State)
		}
	}
	if len(got) != 2 {
		c.Errorf("Workers listed %d workers on a fresh queue after 2 announcements", len(got))
	}
	if n := len(c.listWorkers(other, time.Hour)); n != 0 {
		c.Errorf("another queue of the same backend lists %d workers; registries must be per queue", n)
	}
	err := hooks.AnnounceWorker(c.ctx(), q, &jobq.WorkerInfo{})
	c.expectCode(err, errcode.InvalidArgument, "AnnounceWorker without an ID")
}

// checkWorkerHeartbeat: announcing again replaces the record: the worker is
// listed once, with the new heartbeat and tasks.
func checkWorkerHeartbeat(c *C) {
	q := c.open()
	c.needRegistry(q)
	w := sampleWorker(1)
	if err := hooks.AnnounceWorker(c.ctx(), q, w); err != nil {
		c.Fatalf("AnnounceWorker: %v", err)
	}
	beat := *w
	beat.Heartbeat = w.Heartbeat.Add(3 * heartbeatSlack)
	beat.Tasks = []string{"task-c"}
	beat.Done, beat.CPUSeconds, beat.RSSBytes = 20, 2.25, 80<<20
	if err := hooks.AnnounceWorker(c.ctx(), q, &beat); err != nil {
		c.Fatalf("heartbeat (AnnounceWorker again): %v", err)
	}
	got := c.listWorkers(q, time.Hour)
	if len(got) != 1 {
		c.Errorf("after a heartbeat Workers lists %d records, want the worker once", len(got))
	}
	c.sameWorker(got[w.ID], &beat, "after a heartbeat")
	if g := got[w.ID]; g != nil && g.State != jobq.WorkerLive {
		c.Errorf("a worker that heartbeated is %s, want live", g.State)
	}
}

// checkWorkerWithdraw: a withdrawn worker is left out of the default
// listing and listed as withdrawn on request, even long after its last
// heartbeat.
func checkWorkerWithdraw(c *C) {
	q := c.open()
	c.needRegistry(q)
	stay, leave := sampleWorker(1), sampleWorker(2)
	for _, w := range []*jobq.WorkerInfo{stay, leave} {
		if err := hooks.AnnounceWorker(c.ctx(), q, w); err != nil {
			c.Fatalf("AnnounceWorker: %v", err)
		}
	}
	leave.Tasks = nil
	if err := hooks.WithdrawWorker(c.ctx(), q, leave); err != nil {
		c.Fatalf("WithdrawWorker: %v", err)
	}
	ws, err := q.Admin().Workers(c.ctx(), jobq.WorkersOptions{TTL: time.Hour})
	if err != nil {
		c.Fatalf("Workers: %v", err)
	}
	if len(ws) != 1 || ws[0].ID != stay.ID {
		ids := make([]string, len(ws))
		for i, w := range ws {
			ids[i] = w.ID
		}
		c.Errorf("Workers lists %v, want only %s (the withdrawn one left out)", ids, stay.ID)
	}
	// A TTL shorter than the time since the heartbeat would make it
	// vanished; withdrawn wins.
	got := c.listWorkers(q, time.Nanosecond)
	c.sameWorker(got[leave.ID], leave, "after withdraw")
	if g := got[leave.ID]; g != nil && g.State != jobq.WorkerWithdrawn {
		c.Errorf("a withdrawn worker is listed %s, want withdrawn", g.State)
	}
}

// checkWorkerVanished: a worker whose last heartbeat is older than the TTL
// (by default three of its heartbeat intervals) and that did not withdraw
// is listed as vanished; one older than the retention is not listed, and
// PurgeWorkers deletes it where the engine does not expire it by itself.
func checkWorkerVanished(c *C) {
	q := c.open()
	c.needRegistry(q)
	live, gone, old := sampleWorker(1), sampleWorker(2), sampleWorker(3)
	gone.Heartbeat = gone.Heartbeat.Add(-10 * time.Second) // ten 1s intervals
	old.Heartbeat = old.Heartbeat.Add(-driver.WorkerRetention - time.Hour)
	old.Started = old.Heartbeat.Add(-time.Hour)
	for _, w := range []*jobq.WorkerInfo{live, gone, old} {
		if err := hooks.AnnounceWorker(c.ctx(), q, w); err != nil {
			c.Fatalf("AnnounceWorker: %v", err)
		}
	}
	got := c.listWorkers(q, 0)
	if g := got[live.ID]; g == nil || g.State != jobq.WorkerLive {
		c.Errorf("a worker that heartbeated just now is %v, want live", g)
	}
	c.sameWorker(got[gone.ID], gone, "vanished")
	if g := got[gone.ID]; g != nil && g.State != jobq.WorkerVanished {
		c.Errorf("a worker silent for ten heartbeat intervals is %s, want vanished", g.State)
	}
	if got[old.ID] != nil {
		c.Errorf("a worker whose last heartbeat is older than the retention (%v) is still listed", driver.WorkerRetention)
	}
	// A longer TTL makes the same worker live.
	if g := c.listWorkers(q, time.Hour)[gone.ID]; g == nil || g.State != jobq.WorkerLive {
		c.Errorf("with a TTL of an hour, a worker silent for 10s is %v, want live", g)
	}
	if _, err := q.Admin().PurgeWorkers(c.ctx(), time.Now().Add(-driver.WorkerRetention)); err != nil {
		c.Fatalf("PurgeWorkers: %v", err)
	}
	got = c.listWorkers(q, 0)
	if got[old.ID] != nil || got[live.ID] == nil || got[gone.ID] == nil {
		c.Errorf("PurgeWorkers must delete only records older than the retention: left %d records", len(got))
	}
	_, err := q.Admin().Workers(c.ctx(), jobq.WorkersOptions{TTL: -time.Second})
	c.expectCode(err, errcode.InvalidArgument, "Workers with a negative TTL")
	// A time in the future empties the registry.
	if _, err := q.Admin().PurgeWorkers(c.ctx(), time.Now().Add(time.Hour)); err != nil {
		c.Fatalf("PurgeWorkers of every record: %v", err)
	}
	if got := c.listWorkers(q, 0); len(got) != 0 {
		c.Errorf("PurgeWorkers with a time in the future left %d records", len(got))
	}
}
