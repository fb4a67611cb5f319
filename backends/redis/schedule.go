package redis

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Schedules live in their own hash (prefix.."pols"), apart from the
// policies claims read (polk), so that a queue with schedules claims as
// fast as one without.

var _ driver.PolicySwapper = (*Driver)(nil)

// swapScript replaces the field KEYS[1]/ARGV[1] with ARGV[3] when its
// stored limit (the value up to '|') is ARGV[2], or when it is absent and
// ARGV[2] is 0.
var swapScript = redis.NewScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
local cur = 0
if v then cur = tonumber(string.match(v, '^(-?%d+)')) or -1 end
if cur ~= tonumber(ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1`)

// SwapPolicy implements driver.PolicySwapper with a script, which Redis
// runs atomically.
func (d *Driver) SwapPolicy(ctx context.Context, p driver.Policy, old int64) (bool, error) {
	if err := d.closing.Check(ctx); err != nil {
		return false, err
	}
	if err := p.Validate(); err != nil {
		return false, err
	}
	if !isScheduleKind(p.Kind) {
		return false, driver.Errorf(errcode.Unimplemented, "redis: SwapPolicy keeps only schedule policies, not %s", p.Kind)
	}
	n, err := swapScript.Run(ctx, d.client, []string{d.prefix + "pols"}, policyField(p.Kind, p.Key), old, scheduleValue(p)).Int()
	if err != nil {
		return false, d.fail(ctx, "policy swap", err)
	}
	return n == 1, nil
}

// isScheduleKind reports whether k is kept in the schedules hash.
func isScheduleKind(k driver.PolicyKind) bool {
	return driver.IsScheduleKind(k)
}

// scheduleValue is a schedule policy's stored value: "LIMIT|PERIOD_MS".
func scheduleValue(p driver.Policy) string {
	return fmt.Sprintf("%d|%d", p.Limit, p.Period.Milliseconds())
}
