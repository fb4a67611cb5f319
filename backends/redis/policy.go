package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

// Queue policies (docs/policies.md). They live beside the queue's keys, in
// its hash slot:
//
//	prefix.."pols"        hash "schedule|SPEC" -> SINCE_MS, "schedule-fired|NAME" -> "LIMIT|CLAIMED_MS" (schedule.go)
//	prefix.."polk"        hash "concurrency|KEY" -> LIMIT, "rate|KEY" -> "COUNT|PERIOD_MS", "pause|SCOPE" -> SINCE_MS
//	prefix.."polm"        string: max-depth (before packed bodies "pold", now the layout mark: see layoutScript)
//	prefix.."polq"        hash "retention", "retry-backoff" and "results" -> "LIMIT|PERIOD_MS" (read by the portable layer only)
//	prefix.."cin:"..KEY   set of "mid:token" of leases taken under KEY's cap
//	prefix.."radm:"..KEY  sorted set of claims of KEY in its window (score: ms)
//	prefix.."ccur"        hash "m" -> a ready member, "c|KEY"/"r|KEY" -> "1": where claims that find
//	                      the head's keys full go on from, and the full keys before it
//
// The claim script checks them in the same atomic call that leases: when
// the queue has a keyed policy it walks the ready set in claim order (at
// most maxPolicyScan messages per call) and leases only messages whose keys
// have room. A lease stops counting against its key's cap once it is no
// longer held: settling it (complete, requeue, dead-letter) removes its cin
// entry, and the entries of leases that expired are dropped when the set is
// counted. The push script refuses a whole call when its new messages would
// take the queue past max-depth.

var _ driver.PolicyStore = (*Driver)(nil)

// policyLua is prepended (after common) to the scripts that enforce or
// report policies.
const policyLua = `
-- policies builds the policy functions and returns them in a table; a
-- script calls it only for a queue that has policies (see claimScript).
local function policies()
  local function pol_get(kind, key) return redis.call('HGET', P .. 'polk', kind .. '|' .. key) end
  -- rate_of reads a rate policy's "count|period"; nil for a value it
  -- cannot read (another tool wrote it), which then limits nothing.
  local function rate_of(v)
    local sep = string.find(v, '|', 1, true)
    if not sep then return nil, nil end
    return tonumber(string.sub(v, 1, sep - 1)), tonumber(string.sub(v, sep + 1))
  end
  -- inflight counts the held leases of a capped key. The set may also hold
  -- leases that expired (settlements remove theirs), which only count too
  -- many: while its size is below limit that size is answer enough. At the
  -- limit, or past 1024 entries (so that no sweep blocks Redis for long,
  -- whatever the cap), the entries are checked one by one and the stale ones
  -- dropped. (limit 0 always checks.)
  local function inflight(key, now, limit)
    local set = P .. 'cin:' .. key
    local n = redis.call('SCARD', set)
    if n < limit and n < 1024 then return n end
    n = 0
    for _, m in ipairs(redis.call('SMEMBERS', set)) do
      local sep = string.find(m, ':', 1, true)
      local f = redis.pcall('HMGET', mkey(string.sub(m, 1, sep - 1)), 't', 'l')
      if f[1] == string.sub(m, sep + 1) and (tonumber(f[2]) or 0) > now then n = n + 1
      else redis.call('SREM', set, m) end
    end
    return n
  end
  -- admitted counts a rate key's claims in the window ending now.
  local function admitted(key, now, period)
    local z = P .. 'radm:' .. key
    redis.call('ZREMRANGEBYSCORE', z, '-inf', now - period)
    return redis.call('ZCARD', z)
  end
  -- rate_frees is when a rate key at its limit admits again (ms): when the
  -- oldest claim in its window leaves it, or a period from now when the
  -- window's claims are all this call's (not recorded yet).
  local function rate_frees(key, now, period)
    local oldest = redis.call('ZRANGE', P .. 'radm:' .. key, 0, 0, 'WITHSCORES')
    if oldest[2] then return tonumber(oldest[2]) + period end
    return now + period
  end
  -- claim_with_policies removes from the ready set up to max messages whose
  -- keys have room, in claim order, looking at most at the first 1024 and
  -- at 1024 more from the cursor (below). It returns them as
  -- ZPOPMIN would, and false when no message was passed over, else when
  -- to look again (ms): in 100 ms for a key at its cap (a settlement frees
  -- it), or when the first full rate window frees if that is sooner;
  -- within a second at most, so that a policy changed meanwhile takes
  -- effect.
  -- held[mid] = {concurrency key or false, rate key or false, rate period}
  -- for what hold_keys records.
  local held = {}
  local function claim_with_policies(now, max)
    local ready = P .. 'ready'
    local usedc, usedr, limc, limr, per, frees = {}, {}, {}, {}, {}, {}
    local chosen, skipped, full = {}, false, {}
    local function skip(at)
      if not skipped or at < skipped then skipped = at end
    end
    -- full_c and full_r report whether a key is at its limit, reading its
    -- policy and count once per call.
    local function full_c(ck)
      if limc[ck] == nil then
        local l = pol_get('concurrency', ck)
        limc[ck] = l and tonumber(l) or false
        if limc[ck] then usedc[ck] = inflight(ck, now, limc[ck]) end
      end
      return limc[ck] and usedc[ck] >= limc[ck]
    end
    local function full_r(rk)
      if limr[rk] == nil then
        local l = pol_get('rate', rk)
        local count, period
        if l then count, period = rate_of(l) end
        if count and period then
          limr[rk] = count
          per[rk] = period
          usedr[rk] = admitted(rk, now, period)
        else
          limr[rk] = false
        end
      end
      return limr[rk] and usedr[rk] >= limr[rk]
    end
    -- consider takes a ready entry if its keys have room, and reports
    -- whether it did; an entry it passes over puts its full key in full.
    local function consider(member, score)
      -- pcall: a damaged message (its key not a hash) is passed to the
      -- claim, which quarantines it.
      local f = redis.pcall('HMGET', mkey(mid_of(member)), 'c', 'k')
      if f.err then f = {} end
      local ck, rk = f[1], f[2]
      if ck and full_c(ck) then
        full['c|' .. ck] = true
        skip(now + 100)
        return false
      end
      if rk and full_r(rk) then
        full['r|' .. rk] = true
        if frees[rk] == nil then frees[rk] = rate_frees(rk, now, per[rk]) end
        skip(math.min(frees[rk], now + 1000))
        return false
      end
      if ck and limc[ck] then usedc[ck] = usedc[ck] + 1 end
      if rk and limr[rk] then usedr[rk] = usedr[rk] + 1 end
      chosen[#chosen + 1] = member
      chosen[#chosen + 1] = score
      held[mid_of(member)] = {ck and limc[ck] and ck, rk and limr[rk] and rk, rk and per[rk]}
      return true
    end
    -- walk considers the entries of ranks from on, below limit, in windows
    -- growing from size (so a crowded head costs a few calls, not one per
    -- message), until the batch is full. It returns the rank after the last
    -- entry it looked at, the last entry it passed over before the first
    -- it took (or the last it looked at, having taken none), whether it
    -- reached the end of the set, and the score of the first entry it
    -- passed over.
    local function walk(from, limit, size)
      local at, passed, took, first = from, false, false, false
      while #chosen < max * 2 and at < limit do
        local batch = redis.call('ZRANGE', ready, at, math.min(at + size, limit) - 1, 'WITHSCORES')
        if #batch == 0 then return at, passed, true, first, took end
        for j = 1, #batch, 2 do
          if #chosen >= max * 2 then break end
          if batch[j] == mark then return at, passed, true, first, took end
          at = at + 1
          if consider(batch[j], batch[j + 1]) then took = true
          else
            if not took then passed = batch[j] end
            if not first then first = batch[j + 1] end
          end
        end
        size = math.min(size * 4, 256)
      end
      return at, passed, false, first, took
    end
    -- The cursor (hash ccur) is the last entry a claim passed over before
    -- it found work (or before its look ended), with the keys it passed
    -- over entries for: every entry before it is of one of those keys. It
    -- holds while it is still in the set past what this claim looked at,
    -- of the priority of the first entry this claim passed over, and all
    -- of those keys are still at their limit. Nothing can come between
    -- that entry and it meanwhile: an entry made ready goes after every
    -- entry of its priority, and one of a higher priority comes before
    -- that entry (this claim took it or passed it over). cursor_from
    -- returns the rank after the cursor and its entry when it holds, and
    -- otherwise deletes it.
    local C = P .. 'ccur'
    local function cursor_from(at, head_score)
      local cur = redis.call('HGETALL', C)
      if #cur == 0 then return false end
      local m, keys = nil, {}
      for j = 1, #cur, 2 do
        if cur[j] == 'm' then m = cur[j + 1] else keys[#keys + 1] = cur[j] end
      end
      local rank = m and redis.call('ZRANK', ready, m)
      local holds = rank and rank >= at and head_score == redis.call('ZSCORE', ready, m)
      for _, k in ipairs(keys) do
        if not holds then break end
        local kind, key = string.sub(k, 1, 1), string.sub(k, 3)
        if kind == 'c' then holds = full_c(key) else holds = full_r(key) end
        if holds then full[k] = true end
      end
      if holds then return rank + 1, m end
      redis.call('DEL', C)
      return false
    end
    -- A claim looks at the first 64 entries (more for a batch of more).
    -- When its batch is still short behind full keys, it goes on from the
    -- cursor if one holds, for 1024 entries; otherwise it looks on to the
    -- 1024th entry and then at 1024 more. Either way it leaves a cursor
    -- where it found work.
    local probe = math.max(64, max + 1)
    local at, head_passed, ended, head_score, took = walk(0, probe, max * 2 + 2)
    local from, was = false, false
    if #chosen < max * 2 and not ended and at >= probe then
      from, was = cursor_from(at, head_score)
      if not from then
        local passed, first
        at, passed, ended, first = walk(at, 1024, 256)
        if not took then head_passed = passed or head_passed end
        head_score = head_score or first
        if #chosen < max * 2 and not ended and at >= 1024 then from = at end
      end
    end
    if from then
      local _, passed = walk(from, from + 1024, 256)
      local keep = passed or was or head_passed
      if keep then
        redis.call('DEL', C)
        local f = {'m', keep}
        for k in pairs(full) do
          f[#f + 1] = k
          f[#f + 1] = '1'
        end
        redis.call('HSET', C, unpack(f))
      end
    end
    if #chosen > 0 then
      local members = {}
      for j = 1, #chosen, 2 do members[#members + 1] = chosen[j] end
      redis.call('ZREM', ready, unpack(members))
    end
    return chosen, skipped
  end
  -- hold_keys records a lease taken while the queue has keyed policies.
  local function hold_keys(mid, tok, now)
    local h = held[mid]
    if not h then return end
    if h[1] then redis.call('SADD', P .. 'cin:' .. h[1], mid .. ':' .. tok) end
    if h[2] then
      local z = P .. 'radm:' .. h[2]
      redis.call('ZADD', z, now, tok)
      redis.call('PEXPIRE', z, h[3] + 1000)
    end
  end
  return {claim = claim_with_policies, hold = hold_keys, inflight = inflight,
    admitted = admitted, rate_of = rate_of}
end
`

// keyStatsScript reports, for every keyed policy, its key's held leases or
// claims in the window. ARGV: prefix. Returns triples (kind, key, count).
var keyStatsScript = goredis.NewScript(common + policyLua + `
local now = now_ms()
local out = {}
local pol = policies()
local all = redis.call('HGETALL', P .. 'polk')
for j = 1, #all, 2 do
  local sep = string.find(all[j], '|', 1, true)
  local kind = sep and string.sub(all[j], 1, sep - 1)
  if kind == 'concurrency' or kind == 'rate' then
    local key = string.sub(all[j], sep + 1)
    local n = 0
    if kind == 'concurrency' then n = pol.inflight(key, now, 0)
    else
      local _, period = pol.rate_of(all[j + 1])
      if period then n = pol.admitted(key, now, period) end
    end
    out[#out + 1] = kind
    out[#out + 1] = key
    out[#out + 1] = n
  end
end
return out
`)

// queueFull turns the push script's QUEUEFULL error into the driver's.
func queueFull(err error) error {
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	msg, ok := strings.CutPrefix(rerr.Error(), "QUEUEFULL ")
	if !ok {
		return nil
	}
	var depth, maxDepth int64
	var adding int
	if _, err := fmt.Sscan(msg, &depth, &maxDepth, &adding); err != nil {
		return nil
	}
	return driver.QueueFull(depth, maxDepth, adding)
}

func policyField(kind driver.PolicyKind, key string) string { return string(kind) + "|" + key }

// SetPolicy implements driver.PolicyStore.
func (d *Driver) SetPolicy(ctx context.Context, p driver.Policy) error {
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return err
	}
	var err error
	switch {
	case isScheduleKind(p.Kind):
		err = d.client.HSet(ctx, d.prefix+"pols", policyField(p.Kind, p.Key), scheduleValue(p)).Err()
	case p.Kind == driver.MaxDepthPolicy:
		err = d.client.Set(ctx, d.prefix+"polm", p.Limit, 0).Err()
	case p.Kind == driver.PausePolicy: // per scope; read by workers only
		err = d.client.HSet(ctx, d.prefix+"polk", policyField(p.Kind, p.Key), p.Limit).Err()
	case !p.Kind.Keyed(): // retention, retry-backoff, results: read by the portable layer only
		err = d.client.HSet(ctx, d.prefix+"polq", string(p.Kind), fmt.Sprintf("%d|%d", p.Limit, p.Period.Milliseconds())).Err()
	case p.Kind == driver.RatePolicy:
		err = d.client.HSet(ctx, d.prefix+"polk", policyField(p.Kind, p.Key), fmt.Sprintf("%d|%d", p.Limit, p.Period.Milliseconds())).Err()
	default:
		err = d.client.HSet(ctx, d.prefix+"polk", policyField(p.Kind, p.Key), p.Limit).Err()
	}
	return d.fail(ctx, "policy set", err)
}

// UnsetPolicy implements driver.PolicyStore.
func (d *Driver) UnsetPolicy(ctx context.Context, kind driver.PolicyKind, key string) (bool, error) {
	if err := d.closing.Check(ctx); err != nil {
		return false, err
	}
	var n int64
	var err error
	switch {
	case isScheduleKind(kind):
		n, err = d.client.HDel(ctx, d.prefix+"pols", policyField(kind, key)).Result()
	case kind == driver.MaxDepthPolicy:
		n, err = d.client.Del(ctx, d.prefix+"polm").Result()
	case kind == driver.PausePolicy:
		n, err = d.client.HDel(ctx, d.prefix+"polk", policyField(kind, key)).Result()
	case !kind.Keyed():
		n, err = d.client.HDel(ctx, d.prefix+"polq", string(kind)).Result()
	default:
		n, err = d.client.HDel(ctx, d.prefix+"polk", policyField(kind, key)).Result()
	}
	if err != nil {
		return false, d.fail(ctx, "policy unset", err)
	}
	// A removed limit may unblock messages: receivers poll again within
	// 100 ms, as the claim script told them.
	return n > 0, nil
}

// ListPolicies implements driver.PolicyStore.
func (d *Driver) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	all, err := d.client.HGetAll(ctx, d.prefix+"polk").Result()
	if err != nil {
		return nil, d.fail(ctx, "policy list", err)
	}
	queue, err := d.client.HGetAll(ctx, d.prefix+"polq").Result()
	if err != nil {
		return nil, d.fail(ctx, "policy list", err)
	}
	for kind, v := range queue {
		all[kind+"|"] = v
	}
	scheds, err := d.client.HGetAll(ctx, d.prefix+"pols").Result()
	if err != nil {
		return nil, d.fail(ctx, "policy list", err)
	}
	for field, v := range scheds {
		all[field] = v
	}
	var out []driver.Policy
	for field, v := range all {
		kind, key, _ := strings.Cut(field, "|")
		p := driver.Policy{Kind: driver.PolicyKind(kind), Key: key}
		limit, period, _ := strings.Cut(v, "|")
		p.Limit, _ = strconv.ParseInt(limit, 10, 64)
		if period != "" {
			msec, _ := strconv.ParseInt(period, 10, 64)
			p.Period = time.Duration(msec) * time.Millisecond
		}
		out = append(out, p)
	}
	md, err := d.client.Get(ctx, d.prefix+"polm").Int64()
	switch {
	case err == nil:
		out = append(out, driver.Policy{Kind: driver.MaxDepthPolicy, Limit: md})
	case !errors.Is(err, goredis.Nil):
		return nil, d.fail(ctx, "policy list", err)
	}
	driver.SortPolicies(out)
	return out, nil
}

// KeyStats implements driver.PolicyStore. Waiting counts are not kept per
// key on Redis (they would need a scan of the ready set), so they are -1.
func (d *Driver) KeyStats(ctx context.Context) ([]driver.KeyStat, error) {
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	res, err := d.run(ctx, keyStatsScript).Slice()
	if err != nil {
		return nil, d.fail(ctx, "stats", err)
	}
	var out []driver.KeyStat
	for i := 0; i+2 < len(res); i += 3 {
		ks := driver.KeyStat{Kind: driver.PolicyKind(asStr(res[i])), Key: asStr(res[i+1]), Waiting: -1}
		if ks.Kind == driver.ConcurrencyPolicy {
			ks.InFlight = asInt(res[i+2])
		} else {
			ks.Admitted = asInt(res[i+2])
		}
		out = append(out, ks)
	}
	driver.SortKeyStats(out)
	return out, nil
}
