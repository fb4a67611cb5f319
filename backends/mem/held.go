package mem

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

var (
	_ driver.HeldStore  = (*Driver)(nil)
	_ driver.TaskFinder = (*Driver)(nil)
)

// copyHeld returns a deep copy of h, so that callers never share the
// store's slices.
func copyHeld(h *driver.HeldMessage) *driver.HeldMessage {
	c := *h
	c.Message.Body = slices.Clone(h.Message.Body)
	c.After = slices.Clone(h.After)
	c.AfterGroups = slices.Clone(h.AfterGroups)
	return &c
}

func (d *Driver) checkHeld(ctx context.Context) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if d.level(driver.Dependencies) == driver.Unsupported {
		return unimplemented(driver.Dependencies)
	}
	return nil
}

// Hold implements driver.HeldStore: a message whose task ID is held or
// live already is a duplicate.
func (d *Driver) Hold(ctx context.Context, msgs []*driver.HeldMessage) ([]driver.PushResult, error) {
	if err := d.checkHeld(ctx); err != nil {
		return nil, err
	}
	for _, h := range msgs {
		if h == nil || h.Message.ID == "" {
			return nil, driver.Errorf(errcode.InvalidArgument, "mem: hold: a held message needs a task ID")
		}
		if d.caps.MaxMessageBytes > 0 && len(h.Message.Body) > d.caps.MaxMessageBytes {
			return nil, driver.Errorf(errcode.TooLarge, "mem: message of %d bytes exceeds the limit of %d bytes", len(h.Message.Body), d.caps.MaxMessageBytes)
		}
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]driver.PushResult, len(msgs))
	for i, h := range msgs {
		id := h.Message.ID
		if s.heldMsgs[id] != nil || s.byTask[id] != nil {
			out[i] = driver.PushResult{MessageID: id, Duplicate: true}
			continue
		}
		c := copyHeld(h)
		if c.Created.IsZero() {
			c.Created = now
		}
		s.heldMsgs[id] = c
		s.countPush(c.Message.Group, now)
		out[i] = driver.PushResult{MessageID: id}
	}
	return out, nil
}

// ListHeld implements driver.HeldStore, in ascending task ID order.
func (d *Driver) ListHeld(ctx context.Context, cursor string, limit int) ([]*driver.HeldMessage, string, error) {
	if err := d.checkHeld(ctx); err != nil {
		return nil, "", err
	}
	if limit < 1 {
		return nil, "", driver.Errorf(errcode.InvalidArgument, "mem: list held: limit %d is below 1", limit)
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.heldMsgs) == 0 {
		return nil, "", nil
	}
	ids := make([]string, 0, len(s.heldMsgs))
	for id := range s.heldMsgs {
		if id > cursor {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	out := make([]*driver.HeldMessage, len(ids))
	for i, id := range ids {
		out[i] = copyHeld(s.heldMsgs[id])
	}
	return out, next, nil
}

// Release implements driver.HeldStore: each held message is queued as
// Push would store it, its group counted already (at Hold).
func (d *Driver) Release(ctx context.Context, ids []string) ([]string, error) {
	if err := d.checkHeld(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range ids {
		h := s.heldMsgs[id]
		if h == nil {
			continue
		}
		delete(s.heldMsgs, id)
		if s.byTask[id] != nil && d.level(driver.Dedup) != driver.Unsupported {
			// Queued meanwhile (a dead letter requeued): dedup keeps that
			// one, and the held copy's group, which counted it at Hold,
			// counts it cancelled.
			s.tally(driver.GroupTally{Group: h.Message.Group, State: driver.GroupCancelled}, now)
		} else {
			d.store(&h.Message, now) // its group was counted at Hold
		}
		out = append(out, id)
	}
	return out, nil
}

// Drop implements driver.HeldStore: a dropped message of a group counts
// as cancelled in it.
func (d *Driver) Drop(ctx context.Context, ids []string) ([]string, error) {
	if err := d.checkHeld(ctx); err != nil {
		return nil, err
	}
	now := time.Now()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, id := range ids {
		h := s.heldMsgs[id]
		if h == nil {
			continue
		}
		delete(s.heldMsgs, id)
		s.tally(driver.GroupTally{Group: h.Message.Group, State: driver.GroupCancelled}, now)
		out = append(out, id)
	}
	return out, nil
}

// HeldOf implements driver.HeldStore.
func (d *Driver) HeldOf(ctx context.Context, ids []string) ([]*driver.HeldMessage, error) {
	if err := d.checkHeld(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*driver.HeldMessage
	seen := map[string]bool{}
	for _, id := range ids {
		if h := s.heldMsgs[id]; h != nil && !seen[id] {
			seen[id] = true
			out = append(out, copyHeld(h))
		}
	}
	return out, nil
}

// FindTasks implements driver.TaskFinder from the task ID index that
// dedup keeps.
func (d *Driver) FindTasks(ctx context.Context, ids []string) ([]string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if s.byTask[id] != nil && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out, nil
}

// FindTaskGroups implements driver.TaskGroupFinder.
func (d *Driver) FindTaskGroups(ctx context.Context, ids []string) (map[string]string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, id := range ids {
		if m := s.byTask[id]; m != nil && m.group != "" {
			out[id] = m.group
		}
	}
	return out, nil
}
