package mem

import (
	"context"

	"github.com/jobq/jobq/driver"
)

var _ driver.PolicySwapper = (*Driver)(nil)

// SwapPolicy implements driver.PolicySwapper under the store's lock.
func (d *Driver) SwapPolicy(ctx context.Context, p driver.Policy, old int64) (bool, error) {
	if err := d.closing.Check(ctx); err != nil {
		return false, err
	}
	if err := p.Validate(); err != nil {
		return false, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{string(p.Kind), p.Key}
	cur, ok := s.pol.queue[k]
	if (ok && cur.Limit != old) || (!ok && old != 0) {
		return false, nil
	}
	s.pol.queue[k] = p
	return true, nil
}
