package mem

import (
	"context"
	"sort"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

var _ driver.GroupStore = (*Driver)(nil)

// group returns the counters of name, created at now if new. Callers
// hold mu.
func (s *store) group(name string, now time.Time) *driver.GroupCounters {
	c := s.groups[name]
	if c == nil {
		c = &driver.GroupCounters{Name: name, Created: now}
		s.groups[name] = c
	}
	c.Updated = now
	return c
}

// countPush counts a stored message of group (none when empty). Callers
// hold mu.
func (s *store) countPush(group string, now time.Time) {
	if group != "" {
		s.group(group, now).Pushed++
	}
}

// reopen takes a requeued dead letter of group out of its dead-lettered
// count. Callers hold mu.
func (s *store) reopen(group string, now time.Time) {
	if group == "" {
		return
	}
	if c := s.group(group, now); c.DeadLettered > 0 {
		c.DeadLettered--
	}
}

// tally adds t to its group. Callers hold mu.
func (s *store) tally(t driver.GroupTally, now time.Time) {
	if t.Group == "" {
		return
	}
	c := s.group(t.Group, now)
	switch t.State {
	case driver.GroupSucceeded:
		c.Succeeded++
	case driver.GroupFailed:
		c.Failed++
	case driver.GroupDeadLettered:
		c.DeadLettered++
	case driver.GroupCancelled:
		c.Cancelled++
	}
}

func (d *Driver) checkGroups(ctx context.Context) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if d.level(driver.Groups) == driver.Unsupported {
		return unimplemented(driver.Groups)
	}
	return nil
}

// GroupCounts implements driver.GroupStore; the open tasks are split by
// a walk of the live messages.
func (d *Driver) GroupCounts(ctx context.Context, name string) (*driver.GroupCounters, error) {
	if err := d.checkGroups(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.groups[name]
	if c == nil {
		return nil, nil
	}
	out := *c
	now := time.Now()
	s.promote(now)
	for _, m := range s.msgs {
		if m.group != name {
			continue
		}
		switch m.state {
		case ready:
			out.Queued++
		case waiting:
			out.Delayed++
		case leased:
			out.Running++
		}
	}
	out.Split = true
	return &out, nil
}

// ListGroups implements driver.GroupStore.
func (d *Driver) ListGroups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	if err := d.checkGroups(ctx); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, driver.Errorf(errcode.InvalidArgument, "mem: list groups: limit %d is below 1", limit)
	}
	s := d.s
	s.mu.Lock()
	out := make([]*driver.GroupCounters, 0, len(s.groups))
	for _, c := range s.groups {
		cc := *c
		out = append(out, &cc)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Updated.Equal(out[j].Updated) {
			return out[i].Updated.After(out[j].Updated)
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
