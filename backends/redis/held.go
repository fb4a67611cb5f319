package redis

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/bodypack"
)

// Held tasks (driver.HeldStore, driver/held.go) live in two kinds of key
// under the queue's hash tag, so on Redis Cluster they share the slot of
// every other key of the queue:
//
//	P..'held'        sorted set of the held task IDs, every score 0, so
//	                 that ZRANGEBYLEX pages through them in byte order
//	P..'hm:'..id     the held message: the fields of a message hash that a
//	                 push writes (b or z, p, c, k, h, g; see scripts.go), its
//	                 not-before nb (ms), and a (after, JSON), ag (after
//	                 groups, JSON), rq (require), ca (held at, ms)
//
// Each operation is one script: Hold adds the entries and counts the
// groups' pushed; Release removes an entry and stores its message as the
// push script does, in the same script, so a second Release finds no
// entry; Drop removes entries and counts the groups' cancelled. Claims and
// settlements never read these keys; the push script looks its IDs up in
// P..'held' only while that key exists: a held ID is a duplicate.

// holdFields is how many arguments Hold passes per message.
const holdFields = 13

// holdScript holds messages. ARGV: prefix, now (ms), then per message
// (task id, body field "b" or "z", body, priority, not-before ms or 0,
// concurrency key, rate-limit key, trace context, group, after, after
// groups, require, held-at ms). An ID held or queued (the ids hash, the
// push's dedup) is a duplicate. Returns per message 1 if duplicate else 0.
var holdScript = goredis.NewScript(common + `
local HELD, IDS, now = P .. 'held', P .. 'ids', ARGV[2]
local out, gpushed, gnames = {}, {}, {}
local W = ` + strconv.Itoa(holdFields) + `
for i = 0, (#ARGV - 2) / W - 1 do
  local a = 2 + i * W
  local id = ARGV[a + 1]
  if redis.call('ZSCORE', HELD, id) or redis.call('HEXISTS', IDS, id) == 1 then
    out[i + 1] = 1
  else
    redis.call('ZADD', HELD, 0, id)
    local f = {ARGV[a + 2], ARGV[a + 3], 'ca', ARGV[a + 13], 'a', ARGV[a + 10], 'ag', ARGV[a + 11]}
    -- Only what is not a default, as a push stores it: priority 0,
    -- not-before 0 and empty strings are left out.
    local opt = {'p', ARGV[a + 4], 'nb', ARGV[a + 5], 'c', ARGV[a + 6], 'k', ARGV[a + 7], 'h', ARGV[a + 8], 'g', ARGV[a + 9], 'rq', ARGV[a + 12]}
    for j = 1, #opt, 2 do
      local v = opt[j + 1]
      if v ~= '' and not (j <= 3 and v == '0') then f[#f + 1] = opt[j]; f[#f + 1] = v end
    end
    redis.call('HSET', P .. 'hm:' .. id, unpack(f))
    local g = ARGV[a + 9]
    if g ~= '' then
      if not gpushed[g] then gpushed[g] = 0; gnames[#gnames + 1] = g end
      gpushed[g] = gpushed[g] + 1
    end
    out[i + 1] = 0
  end
end
for _, g in ipairs(gnames) do
  local gk = P .. 'g:' .. g
  redis.call('HINCRBY', gk, 'p', gpushed[g])
  redis.call('HSETNX', gk, 'ca', now)
  redis.call('HSET', gk, 'u', now)
  redis.call('ZADD', P .. 'groups', now, g)
end
return out
`)

// releaseScript moves held messages into the queue as the push script
// stores them (a new message id from the counter, the ids hash, the ready
// or due set) and wakes waiting handles as a push does; their groups
// counted them at Hold and are not counted again. A message whose task id
// was queued meanwhile (pushed without the hold) is not queued twice: its
// entry goes and its group counts it cancelled. ARGV: prefix, then the
// task ids. Returns the ids whose entries it removed.
var releaseScript = goredis.NewScript(common + setsLua + announceLua + `
local HELD, IDS = P .. 'held', P .. 'ids'
local now = now_ms()
local nowStr = str(now)
local out, ready, nr, woken, due = {}, {}, 0, 0, nil
for i = 2, #ARGV do
  local id = ARGV[i]
  local hk = P .. 'hm:' .. id
  if redis.call('ZREM', HELD, id) == 1 then
    local f = redis.call('HMGET', hk, 'b', 'z', 'p', 'nb', 'c', 'k', 'h', 'g')
    redis.call('DEL', hk)
    out[#out + 1] = id
    local g = f[8]
    if redis.call('HEXISTS', IDS, id) == 1 then
      if g then
        redis.call('HINCRBY', P .. 'g:' .. g, 'c', 1)
        redis.call('HSET', P .. 'g:' .. g, 'u', nowStr)
        redis.call('ZADD', P .. 'groups', nowStr, g)
      end
    else
      local mid = str(redis.call('INCR', KEYS[1]))
      if mid == '1' then
        -- The queue's first message: the marks go in first (pushScript).
        redis.call('HSETNX', IDS, ids_mark, '')
        redis.call('ZADD', READY, 'inf', mark)
        redis.call('ZADD', INFLIGHT, 'inf', mark)
      end
      redis.call('HSET', IDS, id, mid)
      local m = {'e', nowStr, 'i', id}
      if f[1] then m[#m + 1] = 'b'; m[#m + 1] = f[1] else m[#m + 1] = 'z'; m[#m + 1] = f[2] or '' end
      local names = {[3] = 'p', [5] = 'c', [6] = 'k', [7] = 'h', [8] = 'g'}
      for j, name in pairs(names) do
        if f[j] then m[#m + 1] = name; m[#m + 1] = f[j] end
      end
      redis.call('HSET', mkey(mid), unpack(m))
      local nb = tonumber(f[4] or '0')
      if nb > now then
        redis.call('ZADD', DELAYED, f[4], mid)
        due = due and math.min(due, nb) or nb
      else
        ready[nr + 1] = f[3] and str(-tonumber(f[3])) or '0'
        ready[nr + 2] = ready_member(mid, mid)
        nr = nr + 2
        if nr == 2000 then
          -- unpack's limit (Lua's C stack) bounds one ZADD's arguments.
          redis.call('ZADD', READY, unpack(ready, 1, nr))
          woken, nr = woken + nr / 2, 0
        end
      end
    end
  end
end
if nr > 0 then redis.call('ZADD', READY, unpack(ready, 1, nr)) end
woken = woken + nr / 2
if woken > 0 or due then announce(woken > 0 and woken or nil, due and due - now or nil) end
return out
`)

// dropScript removes held messages and counts the grouped ones cancelled.
// ARGV: prefix, then the task ids. Returns the ids it removed.
var dropScript = goredis.NewScript(common + `
local HELD = P .. 'held'
local nowStr = str(now_ms())
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local hk = P .. 'hm:' .. id
  if redis.call('ZREM', HELD, id) == 1 then
    local g = redis.call('HGET', hk, 'g')
    redis.call('DEL', hk)
    out[#out + 1] = id
    if g then
      redis.call('HINCRBY', P .. 'g:' .. g, 'c', 1)
      redis.call('HSET', P .. 'g:' .. g, 'u', nowStr)
      redis.call('ZADD', P .. 'groups', nowStr, g)
    end
  end
end
return out
`)

// listHeldScript reads a page of held messages: up to ARGV[3] ids after
// ARGV[2] ("" for the first page) in byte order, each followed by its
// hash's fields. An empty queue's page is one ZRANGEBYLEX.
var listHeldScript = goredis.NewScript(common + `
local from = ARGV[2] == '' and '-' or '(' .. ARGV[2]
local ids = redis.call('ZRANGEBYLEX', P .. 'held', from, '+', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGETALL', P .. 'hm:' .. id)
end
return out
`)

// heldOfScript reads the named held messages, as listHeldScript does.
// ARGV: prefix, then the task ids.
var heldOfScript = goredis.NewScript(common + `
local out = {}
for i = 2, #ARGV do
  local f = redis.call('HGETALL', P .. 'hm:' .. ARGV[i])
  if #f > 0 then
    out[#out + 1] = ARGV[i]
    out[#out + 1] = f
  end
end
return out
`)

var _ driver.HeldStore = (*Driver)(nil)

// Hold implements driver.HeldStore: one script for the batch.
func (d *Driver) Hold(ctx context.Context, msgs []*driver.HeldMessage) ([]driver.PushResult, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	args := d.scriptArgs(1 + holdFields*len(msgs))
	args = append(args, time.Now().UnixMilli())
	for _, h := range msgs {
		fields, err := holdArgs(h)
		if err != nil {
			return nil, err
		}
		args = append(args, fields...)
	}
	res, err := d.runArgs(ctx, holdScript, args).Int64Slice()
	if err != nil {
		return nil, d.fail(ctx, "hold", err)
	}
	if len(res) != len(msgs) {
		return nil, driver.Errorf(errcode.Internal, "redis hold: the script returned %d values for %d messages", len(res), len(msgs))
	}
	out := make([]driver.PushResult, len(msgs))
	for i, r := range res {
		out[i].Duplicate = r == 1
	}
	return out, nil
}

// holdArgs are holdScript's arguments for one message.
func holdArgs(h *driver.HeldMessage) ([]any, error) {
	m := &h.Message
	if m.ID == "" {
		return nil, driver.Errorf(errcode.InvalidArgument, "redis hold: a held message needs a task ID")
	}
	after, err := json.Marshal(nonNilStrings(h.After))
	if err != nil {
		return nil, err
	}
	groups, err := json.Marshal(nonNilStrings(h.AfterGroups))
	if err != nil {
		return nil, err
	}
	field, body := "b", m.Body
	if p, ok := bodypack.Pack(m.Body, m.ID); ok {
		field, body = "z", p
	}
	var nb, created int64
	if !m.NotBefore.IsZero() {
		nb = m.NotBefore.UnixMilli()
	}
	if !h.Created.IsZero() {
		created = h.Created.UnixMilli()
	} else {
		created = time.Now().UnixMilli()
	}
	return []any{m.ID, field, body, m.Priority, nb, m.ConcurrencyKey, m.RateLimitKey, m.TraceParent, m.Group,
		after, groups, string(h.Require), created}, nil
}

// nonNilStrings makes nil an empty list, which JSON writes as [].
func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Release implements driver.HeldStore: one script (see releaseScript).
func (d *Driver) Release(ctx context.Context, ids []string) ([]string, error) {
	return d.heldIDs(ctx, "release held", releaseScript, ids)
}

// Drop implements driver.HeldStore: one script.
func (d *Driver) Drop(ctx context.Context, ids []string) ([]string, error) {
	return d.heldIDs(ctx, "drop held", dropScript, ids)
}

// heldIDs runs a script over ids that returns task ids.
func (d *Driver) heldIDs(ctx context.Context, op string, s *goredis.Script, ids []string) ([]string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	args := d.scriptArgs(len(ids))
	for _, id := range ids {
		args = append(args, id)
	}
	out, err := d.runArgs(ctx, s, args).StringSlice()
	if err != nil {
		return nil, d.fail(ctx, op, err)
	}
	return out, nil
}

// ListHeld implements driver.HeldStore: one script call.
func (d *Driver) ListHeld(ctx context.Context, cursor string, limit int) ([]*driver.HeldMessage, string, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, "", err
	}
	if limit < 1 {
		return nil, "", driver.Errorf(errcode.InvalidArgument, "redis list held: limit %d; want at least 1", limit)
	}
	res, err := d.run(ctx, listHeldScript, cursor, limit+1).Slice()
	if err != nil {
		return nil, "", d.fail(ctx, "list held", err)
	}
	out, err := heldMessages(res)
	if err != nil || len(out) <= limit {
		return out, "", err
	}
	out = out[:limit]
	return out, out[limit-1].Message.ID, nil
}

// HeldOf implements driver.HeldStore: one script call.
func (d *Driver) HeldOf(ctx context.Context, ids []string) ([]*driver.HeldMessage, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	args := d.scriptArgs(len(ids))
	for _, id := range ids {
		args = append(args, id)
	}
	res, err := d.runArgs(ctx, heldOfScript, args).Slice()
	if err != nil {
		return nil, d.fail(ctx, "held of", err)
	}
	return heldMessages(res)
}

// heldMessages reads listHeldScript's and heldOfScript's reply: pairs of
// a task id and its hash's fields.
func heldMessages(res []any) ([]*driver.HeldMessage, error) {
	out := make([]*driver.HeldMessage, 0, len(res)/2)
	for i := 0; i+1 < len(res); i += 2 {
		id := asStr(res[i])
		kv, _ := res[i+1].([]any)
		f := make(map[string]string, len(kv)/2)
		for j := 0; j+1 < len(kv); j += 2 {
			f[asStr(kv[j])] = asStr(kv[j+1])
		}
		h, err := heldOf(id, f)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// heldOf is the held message id whose hash holds f.
func heldOf(id string, f map[string]string) (*driver.HeldMessage, error) {
	num := func(k string) (int64, error) {
		if f[k] == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, driver.Errorf(errcode.Internal, "redis: held task %q has a field %s that is not a number: %q", id, k, f[k])
		}
		return n, nil
	}
	prio, err := num("p")
	if err != nil {
		return nil, err
	}
	nb, err := num("nb")
	if err != nil {
		return nil, err
	}
	ca, err := num("ca")
	if err != nil {
		return nil, err
	}
	h := &driver.HeldMessage{
		Message: driver.Message{ID: id, Priority: int(prio), NotBefore: fromMs(nb), ConcurrencyKey: f["c"],
			RateLimitKey: f["k"], TraceParent: f["h"], Group: f["g"]},
		Require: driver.HeldRequire(f["rq"]), Created: fromMs(ca),
	}
	var b, z any
	if v, ok := f["b"]; ok {
		b = v
	}
	if v, ok := f["z"]; ok {
		z = v
	}
	h.Message.Body = storedBody(b, z, id)
	for k, dst := range map[string]*[]string{"a": &h.After, "ag": &h.AfterGroups} {
		if f[k] == "" {
			continue
		}
		if err := json.Unmarshal([]byte(f[k]), dst); err != nil {
			return nil, driver.Errorf(errcode.Internal, "redis: held task %q has a field %s that is not a JSON list: %v", id, k, err)
		}
		if len(*dst) == 0 {
			*dst = nil
		}
	}
	return h, nil
}
