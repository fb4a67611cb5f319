package redis

import (
	"context"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// A task's group (driver.Message.Group) is field g of its message hash.
// The group's counters are the hash P..'g:'..name, changed by the script
// of the push or settlement that counts (the contract of
// driver/groups.go):
//
//	p   pushed         s   succeeded      f   failed (retried attempts)
//	dl  dead-lettered  c   cancelled
//	ca  created (ms)   u   last change (ms)
//
// and the sorted set P..'groups' lists the groups by last change. A push
// with a group flags its call "g" (pushScript); a settlement batch with
// tallies runs the grouped variant of its script, which takes them as its
// last 2n arguments (groupTallyLua). Batches without a group run the
// scripts as before.

// groupTallyLua counts a settlement script's tallies: its last 2n
// arguments are n times (group or "", counter field), and out[i] is 1
// where settlement i took effect.
const groupTallyLua = `
local GT = #ARGV - 2 * n
local gsum, gn, gnames = {}, 0, {}
for i = 1, n do
  local g = ARGV[GT + 2 * i - 1]
  if out[i] == 1 and g ~= '' then
    -- Summed per group and counter first: a batch of one group's
    -- settlements costs one HINCRBY per counter, not one per message.
    local c = gsum[g]
    if not c then
      c = {}
      gsum[g] = c
      gn = gn + 1
      gnames[gn] = g
    end
    local f = ARGV[GT + 2 * i]
    c[f] = (c[f] or 0) + 1
  end
end
if gn > 0 then
  local gnow = now_ms()
  for j = 1, gn do
    local g = gnames[j]
    local gk = P .. 'g:' .. g
    for f, k in pairs(gsum[g]) do redis.call('HINCRBY', gk, f, k) end
    redis.call('HSET', gk, 'u', gnow)
    redis.call('ZADD', P .. 'groups', gnow, g)
  end
end
`

// withTallies returns a settlement script's source that also counts its
// tallies, before its final return.
func withTallies(src string) string {
	i := strings.LastIndex(src, "\nreturn out\n")
	if i < 0 {
		panic("redis: settlement script without a final return out")
	}
	return src[:i+1] + groupTallyLua + src[i+1:]
}

// groupedScripts maps each settlement script to its grouped variant.
var groupedScripts = map[*goredis.Script]*goredis.Script{
	completeScript:          goredis.NewScript(withTallies(completeLua(false))),
	completeResultsScript:   goredis.NewScript(withTallies(completeLua(true))),
	requeueScript:           goredis.NewScript(withTallies(requeueLua)),
	deadLetterScript:        goredis.NewScript(withTallies(deadLetterLua(false))),
	deadLetterResultsScript: goredis.NewScript(withTallies(deadLetterLua(true))),
}

// tallyField is the counter field of a tally's state.
func tallyField(st driver.GroupState) string {
	switch st {
	case driver.GroupSucceeded:
		return "s"
	case driver.GroupFailed:
		return "f"
	case driver.GroupDeadLettered:
		return "dl"
	case driver.GroupCancelled:
		return "c"
	}
	return ""
}

// tallyArgs returns the grouped script's tail for settlements lo..hi, or
// nil when none of them has a tally.
func tallyArgs(lo, hi int, tally func(i int) driver.GroupTally) []any {
	var out []any
	for i := lo; i < hi; i++ {
		if t := tally(i); t.Group != "" {
			if out == nil {
				out = make([]any, 0, 2*(hi-lo))
				for range i - lo {
					out = append(out, "", "")
				}
			}
			out = append(out, t.Group, tallyField(t.State))
		} else if out != nil {
			out = append(out, "", "")
		}
	}
	return out
}

// anyGrouped reports whether a message of msgs has a group: the push
// script's call then takes an eighth field per message.
func anyGrouped(msgs []*driver.Message) bool {
	for _, m := range msgs {
		if m.Group != "" {
			return true
		}
	}
	return false
}

// splitTrace splits the claim script's trace field into the trace
// context and the group behind it.
func splitTrace(s string) (trace, group string) {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

var _ driver.GroupStore = (*Driver)(nil)

// GroupCounts implements driver.GroupStore. The open tasks are not split
// (Split false): Redis keeps no index of a group's live messages.
func (d *Driver) GroupCounts(ctx context.Context, name string) (*driver.GroupCounters, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	vals, err := d.client.HMGet(ctx, d.prefix+"g:"+name, "p", "s", "f", "dl", "c", "ca", "u").Result()
	if err != nil {
		return nil, d.fail(ctx, "group", err)
	}
	if vals[0] == nil && vals[6] == nil {
		return nil, nil
	}
	return groupOf(name, vals)
}

// groupOf reads the HMGET of a group's hash.
func groupOf(name string, vals []any) (*driver.GroupCounters, error) {
	c := &driver.GroupCounters{Name: name}
	n := make([]int64, len(vals))
	for i, v := range vals {
		s, _ := v.(string)
		if s == "" {
			continue
		}
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, driver.Errorf(errcode.Internal, "redis: group %q has a counter %q that is not a number", name, s)
		}
		n[i] = x
	}
	c.Pushed, c.Succeeded, c.Failed, c.DeadLettered, c.Cancelled = n[0], n[1], n[2], n[3], n[4]
	c.Created, c.Updated = fromMs(n[5]), fromMs(n[6])
	return c, nil
}

// ListGroups implements driver.GroupStore.
func (d *Driver) ListGroups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	names, err := d.client.ZRevRange(ctx, d.prefix+"groups", 0, int64(limit)-1).Result()
	if err != nil {
		return nil, d.fail(ctx, "groups", err)
	}
	cmds, err := d.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, n := range names {
			p.HMGet(ctx, d.prefix+"g:"+n, "p", "s", "f", "dl", "c", "ca", "u")
		}
		return nil
	})
	if err != nil {
		return nil, d.fail(ctx, "groups", err)
	}
	out := make([]*driver.GroupCounters, 0, len(names))
	for i, cmd := range cmds {
		c, err := groupOf(names[i], cmd.(*goredis.SliceCmd).Val())
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
