package dashboard

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// The Groups section: the queue's most recent groups (Admin.Groups) with
// their counts, a rate and an ETA, and what their tasks cost in worker
// time (Admin.GroupWork, from the result records, kept as the history
// is: reportCache).

// maxGroupsShown is how many groups /api/groups lists.
const maxGroupsShown = 20

// groupRateWindow is how far back the rate of a group looks among the
// dashboard's readings.
const groupRateWindow = time.Minute

// groupJSON is one group of /api/groups.
type groupJSON struct {
	Name         string `json:"name"`
	Pushed       int64  `json:"pushed"`
	Succeeded    int64  `json:"succeeded"`
	Failed       int64  `json:"failed"`
	DeadLettered int64  `json:"dead_lettered"`
	Cancelled    int64  `json:"cancelled"`
	Open         int64  `json:"open"`
	// Queued, Delayed and Running split the open tasks; nil where the
	// backend does not.
	Queued  *int64    `json:"queued"`
	Delayed *int64    `json:"delayed"`
	Running *int64    `json:"running"`
	Done    bool      `json:"done"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// RatePerS is how many of its tasks ended per second: over the last
	// minute of the dashboard's readings, or on the first reading the
	// average since its first push; nil before any ended.
	RatePerS *float64 `json:"rate_per_s"`
	// ETAS is the time left at that rate; nil when unknown or done.
	ETAS *float64 `json:"eta_s"`
	// Work is what its ended tasks cost in worker time; nil where the
	// result records cannot be listed.
	Work *workJSON `json:"work"`
}

// workJSON is a group's work totals (jobq.GroupWork), in seconds.
type workJSON struct {
	Records     int64   `json:"records"`
	DoneS       float64 `json:"done_s"`
	LostS       float64 `json:"lost_s"`
	SavedS      float64 `json:"saved_s"`
	Preemptions int64   `json:"preemptions"`
}

// groupsReport is what /api/groups serves.
type groupsReport struct {
	Available bool        `json:"available"`
	Message   string      `json:"message,omitempty"`
	Groups    []groupJSON `json:"groups"`
	// WorkNote says why the work totals are missing, when they are.
	WorkNote string `json:"work_note,omitempty"`
}

// workReport is the kept work totals of the listed groups.
type workReport struct {
	by   map[string]*jobq.GroupWork
	note string
}

// groupReading is one reading of a group's ended tasks.
type groupReading struct {
	ended int64
	at    time.Time
}

// groupRates keeps each listed group's readings of the last
// groupRateWindow, for the rates.
type groupRates struct {
	mu       sync.Mutex
	readings map[string][]groupReading
}

// rate adds a reading of c at now and returns its rate, in tasks per
// second; ok is false when none can be told yet. Groups no longer listed
// are forgotten by keep.
func (r *groupRates) rate(c *driver.GroupCounters, now time.Time) (rate float64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.readings == nil {
		r.readings = map[string][]groupReading{}
	}
	rs := append(r.readings[c.Name], groupReading{ended: c.Ended(), at: now})
	for len(rs) > 2 && now.Sub(rs[1].at) >= groupRateWindow {
		rs = rs[1:]
	}
	r.readings[c.Name] = rs
	if first := rs[0]; len(rs) > 1 && now.Sub(first.at) >= time.Second && c.Ended() > first.ended {
		return float64(c.Ended()-first.ended) / now.Sub(first.at).Seconds(), true
	}
	if len(rs) == 1 && c.Ended() > 0 && c.Updated.After(c.Created) {
		return float64(c.Ended()) / c.Updated.Sub(c.Created).Seconds(), true
	}
	return 0, false
}

// keep forgets the readings of groups not in names.
func (r *groupRates) keep(names map[string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for n := range r.readings {
		if !names[n] {
			delete(r.readings, n)
		}
	}
}

// serveGroups serves /api/groups.
func (s *Server) serveGroups(w http.ResponseWriter, r *http.Request) {
	gs, err := s.q.Admin().Groups(r.Context(), maxGroupsShown)
	if errcode.Of(err) == errcode.Unimplemented {
		writeJSON(w, http.StatusOK, groupsReport{Message: "this backend keeps no groups", Groups: []groupJSON{}})
		return
	}
	if err != nil {
		apiError(w, err)
		return
	}
	now := time.Now()
	rep := groupsReport{Available: true, Groups: make([]groupJSON, 0, len(gs))}
	names := map[string]bool{}
	for _, c := range gs {
		names[c.Name] = true
		rep.Groups = append(rep.Groups, s.groupRow(c, now))
	}
	s.rates.keep(names)
	work, err := s.work.get(r.Context(), "work", s.computeWork)
	if err != nil {
		apiError(w, err)
		return
	}
	rep.WorkNote = work.note
	for i := range rep.Groups {
		if gw := work.by[rep.Groups[i].Name]; gw != nil {
			rep.Groups[i].Work = &workJSON{Records: gw.Records, DoneS: gw.Done.Seconds(), LostS: gw.Lost.Seconds(),
				SavedS: gw.Saved.Seconds(), Preemptions: gw.Preemptions}
		}
	}
	writeJSON(w, http.StatusOK, rep)
}

// groupRow is c as a row of /api/groups, with its rate and ETA.
func (s *Server) groupRow(c *driver.GroupCounters, now time.Time) groupJSON {
	g := groupJSON{Name: c.Name, Pushed: c.Pushed, Succeeded: c.Succeeded, Failed: c.Failed, DeadLettered: c.DeadLettered,
		Cancelled: c.Cancelled, Open: c.Open(), Done: c.Done(), Created: c.Created.UTC(), Updated: c.Updated.UTC()}
	if c.Split {
		g.Queued, g.Delayed, g.Running = &c.Queued, &c.Delayed, &c.Running
	}
	if rate, ok := s.rates.rate(c, now); ok && rate > 0 {
		g.RatePerS = &rate
		if open := c.Open(); open > 0 {
			eta := float64(open) / rate
			g.ETAS = &eta
		}
	}
	return g
}

// computeWork adds up the work of the listed groups from the records.
func (s *Server) computeWork(ctx context.Context) (*workReport, error) {
	gs, err := s.q.Admin().Groups(ctx, maxGroupsShown)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(gs))
	for i, c := range gs {
		names[i] = c.Name
	}
	ws, err := s.q.Admin().GroupWork(ctx, names...)
	switch code := errcode.Of(err); {
	case code == errcode.Unimplemented || code == errcode.FailedPrecondition:
		return &workReport{note: "work totals come from the result records, which this queue cannot list"}, nil
	case code == errcode.NotFound:
		// A group forgotten since it was listed: the next computation
		// lists the groups again.
		return &workReport{note: "work totals are being recomputed"}, nil
	case err != nil:
		return nil, err
	}
	rep := &workReport{by: map[string]*jobq.GroupWork{}}
	for _, w := range ws {
		rep.by[w.Group] = w
	}
	return rep, nil
}
