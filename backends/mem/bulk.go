package mem

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// PageQueued implements driver.Pager: queued (ready or delayed) messages in
// push order; the cursor is the last one's push sequence number.
func (d *Driver) PageQueued(ctx context.Context, after string, max int) ([]*driver.PeekedMessage, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	from, err := memCursor(after)
	if err != nil || max < 1 {
		return nil, "", err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.promote(time.Now())
	var page []*message
	for _, m := range s.msgs {
		if m.state != leased && m.seq > from {
			page = append(page, m)
		}
	}
	slices.SortFunc(page, func(a, b *message) int { return cmpSeq(a.seq, b.seq) })
	next := ""
	if len(page) > max {
		page = page[:max]
		next = strconv.FormatUint(page[max-1].seq, 10)
	}
	out := make([]*driver.PeekedMessage, len(page))
	for i, m := range page {
		out[i] = &driver.PeekedMessage{MessageID: m.id, ID: m.taskID, Body: slices.Clone(m.body), DeliveryCount: m.deliveries,
			EnqueuedAt: m.enqueuedAt, VisibleAt: m.due, Priority: m.priority}
	}
	return out, next, nil
}

// PageDead implements driver.Pager: dead letters by their push sequence
// number.
func (d *Driver) PageDead(ctx context.Context, after string, max int) ([]*driver.DeadMessage, string, error) {
	if err := d.checkDead(ctx); err != nil {
		return nil, "", err
	}
	from, err := memCursor(after)
	if err != nil || max < 1 {
		return nil, "", err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var page []*deadMessage
	for _, dm := range s.dead {
		if dm.m.seq > from {
			page = append(page, dm)
		}
	}
	slices.SortFunc(page, func(a, b *deadMessage) int { return cmpSeq(a.m.seq, b.m.seq) })
	next := ""
	if len(page) > max {
		page = page[:max]
		next = strconv.FormatUint(page[max-1].m.seq, 10)
	}
	out := make([]*driver.DeadMessage, len(page))
	for i, dm := range page {
		out[i] = &driver.DeadMessage{MessageID: dm.m.id, ID: dm.m.taskID, Body: slices.Clone(dm.m.body), Reason: dm.reason,
			Detail: dm.detail, DeliveryCount: dm.m.deliveries, DeadAt: dm.deadAt}
	}
	return out, next, nil
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// memCursor parses a page cursor: "" or a push sequence number.
func memCursor(after string) (uint64, error) {
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(after, 10, 64)
	if err != nil {
		return 0, driver.Errorf(errcode.InvalidArgument, "mem: page cursor %q is not one this driver returned", after)
	}
	return n, nil
}
