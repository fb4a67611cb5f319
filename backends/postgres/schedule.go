package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
)

var _ driver.PolicySwapper = (*Driver)(nil)

const (
	// swapPolicySQL replaces a policy whose limit is the expected one.
	swapPolicySQL = `UPDATE {{s}}.policies SET limit_n = $4, period_us = $5 WHERE queue = $1 AND kind = $2 AND key = $3 AND limit_n = $6`
	// insertNewPolicySQL stores a policy that must not exist yet.
	insertNewPolicySQL = `INSERT INTO {{s}}.policies (queue, kind, key, limit_n, period_us) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (queue, kind, key) DO NOTHING`
)

// SwapPolicy implements driver.PolicySwapper with one conditional
// statement: the row lock makes two swaps from the same value exclusive.
func (d *Driver) SwapPolicy(ctx context.Context, p driver.Policy, old int64) (bool, error) {
	if err := d.closing.Err(); err != nil {
		return false, err
	}
	if err := p.Validate(); err != nil {
		return false, err
	}
	schema := pgx.Identifier{d.cfg.schema}.Sanitize()
	args := []any{d.cfg.queue, string(p.Kind), p.Key, p.Limit, p.Period.Microseconds()}
	q := insertNewPolicySQL
	if old != 0 {
		q, args = swapPolicySQL, append(args, old)
	}
	tag, err := d.pool.Exec(ctx, strings.ReplaceAll(q, "{{s}}", schema), args...)
	d.invalidatePolicies()
	if err != nil {
		return false, wrap(ctx, "policy swap", err)
	}
	return tag.RowsAffected() == 1, nil
}
