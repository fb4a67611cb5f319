package redis

import (
	"context"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// pageQueuedScript scans the ready set, then the delayed set, with ZSCAN:
// one ZSCAN step per call, so no call holds Redis for long, and a member
// present for the whole scan is returned (Redis may return one twice while
// a set is rehashed; the bulk actions tolerate that). ARGV: prefix, phase
// ("r" ready, "d" delayed), ZSCAN cursor, count. Returns the next phase
// and cursor ("" when done), then eight fields per message: message id,
// task id, body (field b), delivery count, enqueued ms, visible ms,
// priority, packed body (field z, only when there is no b).
var pageQueuedScript = goredis.NewScript(common + setsLua + `
local phase, cursor, count = ARGV[2], ARGV[3], ARGV[4]
local set = phase == 'r' and READY or DELAYED
local r = redis.call('ZSCAN', set, cursor, 'COUNT', count)
local nextPhase, nextCursor = phase, r[1]
if r[1] == '0' then
  if phase == 'r' then nextPhase, nextCursor = 'd', '0' else nextPhase, nextCursor = '', '' end
end
local out = {nextPhase, nextCursor}
local z = r[2]
for j = 1, #z, 2 do
  if z[j + 1] ~= 'inf' then
    local mid = phase == 'r' and mid_of(z[j]) or z[j]
    local f = redis.pcall('HMGET', mkey(mid), 'i', 'b', 'd', 'e', 'v', 'p', 'z')
    if not f.err and (f[2] or f[7]) then
      local visible = phase == 'r' and (f[5] or f[4]) or z[j + 1]
      out[#out + 1] = mid
      out[#out + 1] = f[1] or ''
      out[#out + 1] = f[2] or ''
      out[#out + 1] = f[3] or ''
      out[#out + 1] = f[4] or ''
      out[#out + 1] = visible or ''
      out[#out + 1] = f[6] or ''
      out[#out + 1] = not f[2] and f[7] or ''
    end
  end
end
return out
`)

// pageDeadScript is pageQueuedScript over the dead letters. ARGV: prefix,
// ZSCAN cursor, count. Returns the next cursor ("" when done), then the
// fields listDeadScript returns per letter.
var pageDeadScript = goredis.NewScript(common + `
local r = redis.call('ZSCAN', P .. 'dead', ARGV[2], 'COUNT', ARGV[3])
local out = {r[1] == '0' and '' or r[1]}
local z = r[2]
for j = 1, #z, 2 do
  local mid = z[j]
  local f = redis.pcall('HMGET', mkey(mid), 'i', 'b', 'r', 'x', 'd', 'a', 'z')
  if f.err then f = {'', '', 'its key is not a hash: ' .. f.err} end
  if f[2] then f[7] = nil end
  out[#out + 1] = mid
  for k = 1, 7 do out[#out + 1] = f[k] or '' end
end
return out
`)

// PageQueued implements driver.Pager with ZSCAN over the ready and the
// delayed sets (leased messages are left out). Redis takes max as a hint:
// a page may hold somewhat more or fewer.
func (d *Driver) PageQueued(ctx context.Context, after string, max int) ([]*driver.PeekedMessage, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	phase, cursor := "r", "0"
	if after != "" {
		var ok bool
		phase, cursor, ok = strings.Cut(after, ":")
		if !ok || (phase != "r" && phase != "d") {
			return nil, "", driver.Errorf(errcode.InvalidArgument, "redis: page cursor %q is not one this driver returned", after)
		}
	}
	if max < 1 {
		return nil, "", nil
	}
	res, err := d.run(ctx, pageQueuedScript, phase, cursor, max).Slice()
	if err != nil {
		return nil, "", d.fail(ctx, "page queued messages", err)
	}
	if len(res) < 2 {
		return nil, "", driver.Errorf(errcode.Internal, "redis page on queue %s: script returned %d fields", d.queue, len(res))
	}
	next := ""
	if p := asStr(res[0]); p != "" {
		next = p + ":" + asStr(res[1])
	}
	return peekedRows(res[2:], false), next, nil
}

// PageDead implements driver.Pager with ZSCAN over the dead letters.
func (d *Driver) PageDead(ctx context.Context, after string, max int) ([]*driver.DeadMessage, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	cursor := "0"
	if after != "" {
		cursor = after
	}
	if max < 1 {
		return nil, "", nil
	}
	res, err := d.run(ctx, pageDeadScript, cursor, max).Slice()
	if err != nil {
		return nil, "", d.fail(ctx, "page dead letters", err)
	}
	if len(res) < 1 {
		return nil, "", driver.Errorf(errcode.Internal, "redis page of dead letters on queue %s: script returned no cursor", d.queue)
	}
	return deadRows(res[1:]), asStr(res[0]), nil
}
