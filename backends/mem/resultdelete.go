package mem

import (
	"context"

	"github.com/jobq/jobq/driver"
)

var _ driver.ResultDeleter = (*Driver)(nil)

// DeleteResults implements driver.ResultDeleter.
func (d *Driver) DeleteResults(ctx context.Context, ids []string) (int64, error) {
	if err := d.checkResults(ctx); err != nil {
		return 0, err
	}
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, id := range ids {
		if _, ok := s.res.recs[id]; ok {
			delete(s.res.recs, id)
			n++
		}
	}
	return n, nil
}
