package sqlite

import (
	"context"
	"database/sql"

	"github.com/jobq/jobq/driver"
)

var _ driver.PolicySwapper = (*Driver)(nil)

const (
	// swapPolicy replaces a policy whose limit is the expected one.
	swapPolicy = `UPDATE jobq_policies SET limit_n = ?, period_us = ? WHERE queue = ? AND kind = ? AND key = ? AND limit_n = ?`
	// insertNewPolicy stores a policy that must not exist yet.
	insertNewPolicy = `INSERT INTO jobq_policies (queue, kind, key, limit_n, period_us) VALUES (?, ?, ?, ?, ?) ON CONFLICT (queue, kind, key) DO NOTHING`
)

// SwapPolicy implements driver.PolicySwapper: one conditional statement in
// an immediate transaction, so two processes on the file never both swap.
func (d *Driver) SwapPolicy(ctx context.Context, p driver.Policy, old int64) (bool, error) {
	if err := p.Validate(); err != nil {
		return false, err
	}
	var swapped bool
	err := d.writeTx(ctx, "policy swap", func(tx wtx) error {
		var err error
		var n int64
		if old == 0 {
			n, err = affected(tx.Exec(insertNewPolicy, d.cfg.queue, string(p.Kind), p.Key, p.Limit, p.Period.Microseconds()))
		} else {
			n, err = affected(tx.Exec(swapPolicy, p.Limit, p.Period.Microseconds(), d.cfg.queue, string(p.Kind), p.Key, old))
		}
		swapped = n == 1
		return err
	})
	return swapped, err
}

// affected returns the rows a statement changed.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
