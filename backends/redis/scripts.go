package redis

import goredis "github.com/redis/go-redis/v9"

// Every state change of a message is one of the Lua scripts below, so Redis
// runs it atomically: a client that dies between two commands cannot leave a
// message half-moved.
//
// Every script declares one key, the queue's counter (KEYS[1], "seq"), and
// takes the key prefix ("jobq:{name}:") as ARGV[1]; it builds the names of
// the other keys it touches from the prefix:
//
//	P..'seq'       counter for message ids and ready order (which lease tokens reuse)
//	P..'ready'     sorted set of visible messages, in claim order (see ready_member),
//	               and the member mark at +inf
//	P..'due'       sorted set of waiting messages, score = visible-at (ms)
//	P..'delayed'   the layout mark (see layoutScript)
//	P..'rescue'    set while messages an older client stranded may be left to rescue (see layoutScript)
//	P..'inflight'  sorted set of leased messages, score = lease expiry (ms),
//	               and the member mark at +inf
//	P..'ids'       hash task id -> message id, for dedup of queued tasks
//	P..'dead'      sorted set of dead letters, score = dead-at (ms)
//	P..'waiters'   sorted set of the queue handles (Driver.id) whose receivers
//	               wait, score = when the entry lapses (ms): added by a claim
//	               that found nothing for a receiver about to wait
//	               (claimScript); a push or requeue takes out as many as it
//	               has messages for and tells each on its own channel (wakeLua)
//	P..'w:'..id    the pub/sub channel of queue handle id: "n" (n messages are
//	               ready) or "@ms" (a delayed one comes due in ms)
//	P..'notify'    the channel on which earlier releases' pushes announce to
//	               every handle; receivers still listen to it
//	P..'waiting'   set with a TTL by the same claims, for earlier releases'
//	               pushes, which announce on P..'notify' only while it exists
//	P..'rb:'..b    a bucket of result records: hash task id -> record, with a TTL (see recordLua)
//	P..'rbs'       sorted set of the record buckets, score = when the bucket expires (ms)
//	P..'results'   the pub/sub channel announcing stored result records
//	P..'g:'..name  a group's counters (groups.go)
//	P..'groups'    sorted set of the groups, score = last change (ms)
//
// Redis charges a script for each key and argument it is given more than
// building a name in Lua costs, so the scripts declare only the key that
// routes the call: on Redis Cluster every
// key of the queue shares its hash tag, so they all live in the slot of the
// declared one, which is all Redis asks of the keys a script touches. On a
// cluster the settlement and record scripts also declare the keys they
// write, so that a slot moving to another node refuses them whole
// (declare.go).
//
// Each message is the hash P.."m:"..id with fields
//
//	i  task id            b  body              p  priority
//	z  packed body, in place of b (body.go)
//	e  enqueued (ms)      d  delivery count    v  visible-at (ms)
//	c  concurrency key    k  rate-limit key
//	n  "1" when the message does not own its task id in the ids hash (written by releases that requeued a dead letter beside a queued copy)
//	q  arrival number of its ready member, when it is not the message id
//	t  lease token        l  lease expiry (ms)      (only while leased)
//	h  the producer's W3C trace context (driver.Message.TraceParent), only when traced
//	g  the task's group (driver.Message.Group), only when it has one
//	r  reason             x  detail           a  dead-at (ms) (dead letters)
//
// A push writes b or z, e and i (empty when the task has none), and p, c
// and k only when they are set: a missing field reads as its default (p 0,
// d 0, v = e). A message has b or z: replacing the body (requeue,
// dead-letter) writes b and deletes z. Should it have both (a release
// before packing replaced a packed body), b is the newer and is read.
//
// The lease fields live in the message hash as well as in the inflight set,
// so that checking a lease is one HMGET. The scripts gather the sorted-set
// changes of a batch into one variadic ZADD or ZREM: Redis's cost is mostly
// per command.

// marks are the markers' values (see the comments) for pushPrelude and
// common.
const marks = `
-- The ids hash holds a field longer than hash-max-listpack-value (64 bytes
-- by default), ids_mark, which keeps it a hash table: Redis stores a small
-- hash as a listpack, which every lookup, insert and delete scans from the
-- start, and with up to 512 task ids (the default
-- hash-max-listpack-entries) that scan cost more than the rest of a push.
-- A hash table never turns back into a listpack while it has fields.
local ids_mark = '\0jobq keeps this hash a hash table, which is faster than a listpack here'
-- The ready and in-flight sets hold the member mark, longer than
-- zset-max-listpack-value (64 bytes by default), at score +inf: it keeps
-- them skiplists. As a listpack (up to 128 members by default: a queue
-- that keeps up with its producers, a worker's leases with prefetch) every
-- ZADD and ZREM scans the set and parses its scores, which cost a claim
-- more than all the rest of it. A queue's first push puts the marks in
-- before anything else, and everything that reads the sets stops below
-- +inf or drops the mark.
local mark = '\0jobq keeps this sorted set a skiplist, which is faster than a listpack here'
`

// pushPrelude is prepended to the push script, and common to every other
// script. Lua builds each helper function a script defines anew on every
// call of the script, at a cost each (tools/rediscost shows it), so common
// holds only what most scripts use; readyLua and leaseLua are prepended by the
// scripts that need them, and policyLua builds its functions only for a
// queue that has policies. The push, the script most often called for one
// message, defines no function at all: it spells out what str, mkey,
// ready_member and counted do.
const pushPrelude = `
local P = ARGV[1]
` + marks

// common is prepended to every script but the push (see pushPrelude).
const common = pushPrelude + `
-- Lua numbers are doubles. Redis formats a number passed to redis.call,
-- and tostring formats any number, with a floating-point printf, which
-- costs more than a small command's own work; str takes the integer path.
local function str(n) return string.format('%d', n) end
local function mkey(mid) return P .. 'm:' .. mid end
-- Ready order: higher priority first, then arrival. The score is the
-- negated priority; within a priority Redis orders members by their bytes,
-- so a member is the arrival number, zero-padded to 16 digits, followed by
-- the message id. seq is the arrival number as a string (a push has it
-- already, as the message id: padding it costs no printf).
local function ready_member(seq, mid) return string.rep('0', 16 - #seq) .. seq .. mid end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function mid_of(member) return string.sub(member, 17) end
-- counted is how many members a sorted set has besides the mark.
local function counted(set) return redis.call('ZCOUNT', set, '-inf', '(inf') end
-- forget drops the message's claim on its task id: it has one when it has
-- an id and is not marked n (not the owner).
local function forget(id, notOwner)
  if id and id ~= '' and notOwner ~= '1' then redis.call('HDEL', P .. 'ids', id) end
end
`

// setsLua names the ready, delayed and in-flight sets, for the scripts
// that work on all three; readyLua begins with it.
const setsLua = `
local READY, DELAYED, INFLIGHT = P .. 'ready', P .. 'due', P .. 'inflight'
`

// readyLua makes messages ready again; the scripts that do so prepend it
// after common.
const readyLua = setsLua + `
-- p is the message's priority field as stored (or what pcall returned for
-- it); one that is not a plain integer (written by another tool) orders
-- as 0, and the claim quarantines its message.
-- The message's field q keeps its arrival number, so that a cancel can
-- find its ready member (a pushed message's is its id: it has no q).
local function make_ready(mid, p)
  local pri = type(p) == 'string' and string.find(p, '^%-?%d%d?%d?%d?$') and tonumber(p) or 0
  local seq = str(redis.call('INCR', KEYS[1]))
  redis.pcall('HSET', mkey(mid), 'q', seq)
  redis.call('ZADD', READY, str(-pri), ready_member(seq, mid))
end
-- promote makes due delayed messages and expired leases ready, so that no
-- sweeper process is needed. It moves at most limit of each per call.
local function promote(now, limit)
  now = str(now)
  local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, limit)
  if #due > 0 then
    redis.call('ZREM', DELAYED, unpack(due))
    for _, mid in ipairs(due) do
      -- pcall: a key that is not a hash must not abort the script (and
      -- lose the members already removed); the claim quarantines it.
      make_ready(mid, redis.pcall('HGET', mkey(mid), 'p'))
    end
  end
  local expired = redis.call('ZRANGEBYSCORE', INFLIGHT, '-inf', now, 'LIMIT', 0, limit)
  if #expired > 0 then
    redis.call('ZREM', INFLIGHT, unpack(expired))
    for _, mid in ipairs(expired) do
      local k = mkey(mid)
      redis.pcall('HDEL', k, 't', 'l')
      redis.pcall('HSET', k, 'v', now)
      make_ready(mid, redis.pcall('HGET', k, 'p'))
    end
  end
end
`

// leaseLua checks and releases leases; the scripts that settle or renew
// prepend it after common.
const leaseLua = `
-- lease_at reads the lease of the message hash k and the fields settling
-- needs, in one call. It returns the fields when the lease is tok's and has
-- not expired, else nil. lease does the same for message mid.
local function lease_at(k, tok, now, ...)
  local f = redis.pcall('HMGET', k, 't', 'l', ...)
  if f[1] == tok and (tonumber(f[2]) or 0) > now then return f end
  return nil
end
local function lease(mid, tok, now, ...) return lease_at(mkey(mid), tok, now, ...) end
-- unhold gathers the entry a settled lease has in its concurrency key's set
-- of held leases (see policyLua), by key, for drop_held to remove with one
-- SREM per key. A message without a key has none; removing an entry that
-- was never added (no cap at claim time) is harmless. The SREM is a pcall:
-- while the queue's slot moves, the set may be on the other node (or not
-- exist), and the entry left behind is a stale one, which the claim drops
-- (policyLua), not a reason to stop a settlement halfway.
local function unhold(acc, ckey, mid, tok)
  if not ckey or ckey == '' then return end
  local l = acc[ckey]
  if not l then l = {}; acc[ckey] = l end
  l[#l + 1] = mid .. ':' .. tok
end
local function drop_held(acc)
  for ckey, members in pairs(acc) do redis.pcall('SREM', P .. 'cin:' .. ckey, unpack(members)) end
end
`

// wakeLua defines wake, which tells waiting queue handles (P..'waiters')
// what became claimable, each on its own channel P..'w:'..id: n messages
// now, split among up to n handles, each taken out of the set (a receiver
// of it that then finds nothing puts it back); or, with at, that a
// delayed message comes due in at ms, told to one handle, which stays in.
// A handle whose channel has no subscriber (its process is gone) is
// dropped and the next one told. skip, with n, is a handle not to tell and
// to leave in the set (one passing on a wake-up it had no receiver for),
// or nil. The push defines it only when a handle waits: defining a
// function costs every call.
const wakeLua = `
local function wake(n, at, skip)
  local W = P .. 'waiters'
  local left, kept = at and 1 or n, nil
  while left > 0 do
    local p
    if at then
      p = redis.call('ZRANGE', W, -1, -1, 'WITHSCORES')
    else
      p = redis.call('ZPOPMAX', W, left)
    end
    if #p == 0 then break end
    local each = at and '@' .. at or math.ceil(left / (#p / 2))
    for i = 1, #p, 2 do
      if p[i] == skip then
        kept = p[i + 1]
      elseif redis.call('PUBLISH', P .. 'w:' .. p[i], each) > 0 then
        left = left - (at and 1 or each)
      elseif at then
        redis.call('ZREM', W, p[i])
      end
    end
  end
  -- skip is in the set again only if a receiver of it has waited since.
  if kept then redis.call('ZADD', W, kept, skip) end
end
`

// announceLua defines announce, which wakes waiting queue handles for a
// messages made ready now and for a delayed one due in b ms (either may be
// nil), as a push does. The scripts that make messages ready, other than
// the push, prepend it.
const announceLua = wakeLua + `
local function announce(a, b)
  if redis.call('EXISTS', P .. 'waiters') == 0 then return end
  if a then wake(a) end
  if b then wake(nil, b) end
end
`

// wakeScript passes on wake-ups a queue handle had no receiver for.
// ARGV: prefix, n, the handle's id (not told).
var wakeScript = goredis.NewScript(pushPrelude + wakeLua + `
wake(tonumber(ARGV[2]), nil, ARGV[3])
return 0
`)

// pushScript stores messages. ARGV: prefix, the producer's time (ms), then
// per message (task id, body, priority, not-before ms or 0 on the producer's
// clock, concurrency key,
// rate-limit key), and a seventh field, the trace context, when the time
// starts with "t" (a traced push: untraced ones pay no argument for it).
// When the time starts with "z" (before any "t"), every body of the call is
// packed (body.go) and goes to field z rather than b. The last message's fields may stop after its body, or
// after any later field: those left out take their defaults (priority 0,
// not-before 0, no keys), so that a plain one-message push passes four
// arguments rather than eight. A max-depth policy (policy.go) makes it
// refuse the whole call with a QUEUEFULL error when the new messages would
// not fit. Returns per message (message id, 1 if duplicate else 0), except
// that a call of one new message with every field after its body left out
// returns its message id as an integer. It wakes waiting queue handles for
// the messages made visible, and one for when the first delayed one comes
// due (wakeLua).
var pushScript = goredis.NewScript(pushPrelude + `
-- common's helpers, spelled out (see pushPrelude): string.format('%d', x)
-- is str(x), P .. 'm:' .. mid is mkey(mid), and ZCOUNT from '-inf' to
-- '(inf' is counted.
local READY, IDS = P .. 'ready', P .. 'ids'
local W, nowStr, B = 6, ARGV[2], 'b'
if string.byte(nowStr) == 122 then B, nowStr = 'z', string.sub(nowStr, 2) end
-- lone: one message whose fields after its body are all left out (no
-- priority, not-before, keys or trace), the most common call. It is not
-- traced (a traced call passes the trace), so it skips the calls below:
-- each call of a Lua library function costs Redis hundreds of
-- instructions.
local lone = #ARGV == 4
local n = 1
if not lone then
  if string.byte(nowStr) == 116 then W, nowStr = 7, string.sub(nowStr, 2) end
  -- "g" (after "t", which it needs): an eighth field, the task's group.
  if string.byte(nowStr) == 103 then W, nowStr = 8, string.sub(nowStr, 2) end
  n = math.floor((#ARGV - 2 + W - 1) / W)
end
-- The producer's clock, on which NotBefore is too, is parsed only for a
-- message that has a NotBefore; such a message comes due that much after
-- Redis's clock (TIME, read once), so that a producer whose clock is off
-- still delays it by what it asked for.
local now, tnow = nil, nil
-- The max-depth policy, whether any receiver waits, and whether any task
-- is held (held.go). Usually none is there: an EXISTS of the three says so
-- for less than reading them. (MGET reads a policy key that another tool
-- made something other than a string as no policy, where GET would fail
-- the push.)
local maxDepth, heard, held = false, false, false
local there = redis.call('EXISTS', P .. 'polm', P .. 'waiters', P .. 'held')
if there > 0 then
  maxDepth = redis.call('MGET', P .. 'polm')[1]
  held = redis.call('EXISTS', P .. 'held') == 1
  heard = there > (maxDepth and 1 or 0) + (held and 1 or 0)
end
-- A held task's ID is a duplicate, as it is for a Hold: stored, the task
-- would run ahead of the held copy's parents, and again at its release.
local function isHeld(id) return held and id ~= '' and redis.call('ZSCORE', P .. 'held', id) end
if maxDepth then
  maxDepth = tonumber(maxDepth)
  local adding, seen = 0, {}
  for i = 0, n - 1 do
    local id = ARGV[3 + i * W]
    if id == '' or (not seen[id] and not isHeld(id) and redis.call('HEXISTS', IDS, id) == 0) then adding = adding + 1 end
    if id ~= '' then seen[id] = true end
  end
  local depth = redis.call('ZCOUNT', READY, '-inf', '(inf') + redis.call('ZCARD', P .. 'due') +
    redis.call('ZCOUNT', P .. 'inflight', '-inf', '(inf')
  if adding > 0 and depth + adding > maxDepth then
    return redis.error_reply('QUEUEFULL ' .. depth .. ' ' .. maxDepth .. ' ' .. adding)
  end
end
-- One counter block gives each message its id, which is also its arrival.
-- (A string argument spares Redis formatting a Lua number.)
local first = redis.call('INCRBY', KEYS[1], lone and '1' or n) - n
if first == 0 then
  -- The queue's first push (its counter is new) gives its keys their marks
  -- before any entry goes in; no script removes a mark.
  redis.call('HSETNX', IDS, ids_mark, '')
  redis.call('ZADD', READY, 'inf', mark)
  redis.call('ZADD', P .. 'inflight', 'inf', mark)
end
if lone then
  -- The loop below, for this one message, without its tables and with
  -- an integer reply, which costs Redis less.
  local id, mid = ARGV[3], string.format('%d', first + 1)
  if isHeld(id) then return {'', 1} end
  if id ~= '' and redis.call('HSETNX', IDS, id, mid) == 0 then
    return {redis.call('HGET', IDS, id), 1}
  end
  redis.call('HSET', P .. 'm:' .. mid, B, ARGV[4], 'e', nowStr, 'i', id)
  redis.call('ZADD', READY, '0', string.rep('0', 16 - #mid) .. mid .. mid)
  if heard then
    ` + wakeLua + `
    wake(1)
  end
  return first + 1
end
-- The tables start with two slots, which a one-message push fills without
-- Lua growing them; the counters stand in for #, which searches.
local out, ready, delayed = {0, 0}, {0, 0}, {}
local nr, nd = 0, 0
local gpushed, gnames -- made by the first message with a group
for i = 0, n - 1 do
  local id, body = ARGV[3 + i * W], ARGV[4 + i * W]
  local pri, nb = ARGV[5 + i * W] or '0', ARGV[6 + i * W] or '0'
  local ckey, rkey = ARGV[7 + i * W] or '', ARGV[8 + i * W] or ''
  local trace = W >= 7 and ARGV[9 + i * W] or ''
  local grp = W == 8 and ARGV[10 + i * W] or ''
  local mid = string.format('%d', first + i + 1)
  local existing = false
  if isHeld(id) then
    existing = ''
  elseif id ~= '' and redis.call('HSETNX', IDS, id, mid) == 0 then
    existing = redis.call('HGET', IDS, id)
  end
  if existing then
    out[2 * i + 1], out[2 * i + 2] = existing, 1
  else
    -- Only what is not a default: priority 0, no keys, delivery count 0
    -- and visible-at = enqueued are left out. A message without them, the
    -- common one, is stored without building a table.
    if pri == '0' and ckey == '' and rkey == '' and trace == '' and grp == '' then
      redis.call('HSET', P .. 'm:' .. mid, B, body, 'e', nowStr, 'i', id)
    else
      local f = {B, body, 'e', nowStr, 'i', id}
      if pri ~= '0' then f[#f + 1] = 'p'; f[#f + 1] = pri end
      if ckey ~= '' then f[#f + 1] = 'c'; f[#f + 1] = ckey end
      if rkey ~= '' then f[#f + 1] = 'k'; f[#f + 1] = rkey end
      if trace ~= '' then f[#f + 1] = 'h'; f[#f + 1] = trace end
      if grp ~= '' then
        f[#f + 1] = 'g'; f[#f + 1] = grp
        -- Counted per group below (groups.go), once per call.
        if not gpushed then gpushed, gnames = {}, {} end
        if not gpushed[grp] then gpushed[grp] = 0; gnames[#gnames + 1] = grp end
        gpushed[grp] = gpushed[grp] + 1
      end
      redis.call('HSET', P .. 'm:' .. mid, unpack(f))
    end
    local later = false
    if nb ~= '0' then
      now = now or tonumber(nowStr)
      later = tonumber(nb) > now
    end
    if later then
      if not tnow then
        local t = redis.call('TIME')
        tnow = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      delayed[nd + 1], delayed[nd + 2] = string.format('%d', tnow + tonumber(nb) - now), mid
      nd = nd + 2
    else
      ready[nr + 1] = pri == '0' and '0' or string.format('%d', -tonumber(pri))
      -- common's ready_member(mid, mid): the message id is its arrival number.
      ready[nr + 2] = string.rep('0', 16 - #mid) .. mid .. mid
      nr = nr + 2
    end
    out[2 * i + 1], out[2 * i + 2] = mid, 0
  end
end
if nr > 0 then redis.call('ZADD', READY, unpack(ready, 1, nr)) end
if nd > 0 then redis.call('ZADD', P .. 'due', unpack(delayed, 1, nd)) end
if gnames then
  for _, g in ipairs(gnames) do
    local gk = P .. 'g:' .. g
    redis.call('HINCRBY', gk, 'p', gpushed[g])
    redis.call('HSETNX', gk, 'ca', nowStr)
    redis.call('HSET', gk, 'u', nowStr)
    redis.call('ZADD', P .. 'groups', nowStr, g)
  end
end
if heard and nr + nd > 0 then
  ` + wakeLua + `
  if nr > 0 then wake(nr / 2) end
  if nd > 0 then
    -- A waiting receiver hears when the first of them comes due.
    local due = tonumber(delayed[1])
    for j = 3, nd, 2 do due = math.min(due, tonumber(delayed[j])) end
    wake(nil, due - tnow)
  end
end
return out
`)

// claimScript leases up to max ready messages. ARGV: prefix, max,
// visibility ms, and, from a receiver that waits when it finds nothing,
// how long (ms) its handle's entry in P..'waiters' lasts, and the handle's
// id: the entry is added in the same script as the empty claim, so that a
// push either came before the claim, which finds its message, or finds
// the entry and wakes the handle. Returns {now, next} where next is the
// earliest time (ms) a delayed message or lease comes due (-1 when none),
// followed by eight fields per claimed message: message id, token,
// delivery count, task id, body (field b), enqueued ms, trace context,
// packed body (field z, only when there is no b).
var claimScript = goredis.NewScript(common + readyLua + policyLua + damageLua + `
local max, vis = tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
promote(now, 256)
local popped, blocked, hold_keys
if redis.call('EXISTS', P .. 'polk') == 1 then
  local pol = policies()
  hold_keys = pol.hold
  popped, blocked = pol.claim(now, max)
else
  popped = redis.call('ZPOPMIN', READY, max)
  -- Fewer than max ready: the mark came too. It goes back.
  if popped[#popped - 1] == mark then
    popped[#popped], popped[#popped - 1] = nil, nil
    redis.call('ZADD', READY, 'inf', mark)
  end
end
local out = {now, -1}
if #popped == 0 then
  if ARGV[4] then
    if ARGV[5] then
      local W = P .. 'waiters'
      redis.call('ZREMRANGEBYSCORE', W, '-inf', now)
      redis.call('ZADD', W, now + tonumber(ARGV[4]), ARGV[5])
    end
    -- For pushes of earlier releases.
    redis.call('SET', P .. 'waiting', '1', 'PX', ARGV[4])
  end
  local d = redis.call('ZRANGE', DELAYED, 0, 0, 'WITHSCORES')
  local f = redis.call('ZRANGEBYSCORE', INFLIGHT, '-inf', '(inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local nxt = -1
  if d[2] then nxt = tonumber(d[2]) end
  if f[2] and (nxt < 0 or tonumber(f[2]) < nxt) then nxt = tonumber(f[2]) end
  if blocked and (nxt < 0 or blocked < nxt) then
    -- Ready messages wait for a key to free up: look again soon, or when
    -- a full rate window admits again (unless a delayed message or an
    -- expired lease comes sooner).
    nxt = blocked
  end
  out[2] = nxt
  return out
end
local cnt = #popped / 2
local exp = str(now + vis)
-- The loop runs once per message: it keeps the key prefix, and counts its
-- tables' lengths itself (# costs a search in Lua 5.1).
local PM = P .. 'm:'
local leased, nl, no, away = {}, 0, 2, false
for j = 1, cnt do
  local member = popped[2 * j - 1]
  local mid = mid_of(member)
  local k = PM .. mid
  -- pcall and damage: a message that another tool wrote or changed (a key
  -- that is not a hash, a field that is not a number) must not abort the
  -- script, which would lose every message popped above; it is
  -- quarantined instead, and the others are claimed.
  local f = redis.pcall('HMGET', k, 'i', 'b', 'e', 'd', 'p', 'h', 'z', 'g')
  if f.err or not (f[2] or f[7] and string.find(f[7], '` + packedHeaderPattern + `')) or not (not f[3] or string.find(f[3], '^%d+$')) or not (not f[4] or #f[4] < 10 and string.find(f[4], '^%d+$'))
      or f[5] and not (string.find(f[5], '^%-?%d%d?%d?%d?$') and math.abs(tonumber(f[5])) <= 1000) then
    if f.err and not string.find(f.err, 'WRONGTYPE', 1, true) then
      -- Not a damaged message: its hash is on another node, the queue's
      -- slot being migrated there (resharding). It goes back as it was.
      redis.call('ZADD', READY, popped[2 * j], member)
      away = true
    else
      damaged = damaged or damage_lua()
      local bad = damaged.why(k, f)
      if bad then damaged.quarantine(mid, k, bad, now) end
    end
  else
    -- The lease token is the ready member's arrival number: each time a
    -- message is made ready it gets a new one from the counter, so no two
    -- claims share it, and it costs no command and no printf.
    local tok = string.sub(member, 1, 16)
    local dc = f[4] and str(tonumber(f[4]) + 1) or '1'
    redis.call('HSET', k, 'd', dc, 't', tok, 'l', exp)
    if blocked ~= nil then hold_keys(mid, tok, now) end
    leased[nl + 1], leased[nl + 2] = exp, mid
    nl = nl + 2
    -- One string per message (claimreply.go): a header of lengths, the
    -- delivery count, the enqueue time and the body's kind, then the
    -- member (the token, then the message id), task ID, trace context
    -- and body end to end. A group rides behind the trace context, after
    -- a newline (which no traceparent holds).
    local id, tg, kind, body = f[1] or '', f[6] or '', 'b', f[2]
    if f[8] then tg = tg .. '\n' .. f[8] end
    if not body then kind, body = 'z', f[7] or '' end
    out[no + 1] = #member .. ' ' .. dc .. ' ' .. (f[3] or '') .. ' ' .. #id .. ' ' .. #tg .. ' ' .. kind .. ' ' .. member .. id .. tg .. body
    no = no + 1
  end
end
if nl > 0 then redis.call('ZADD', INFLIGHT, unpack(leased)) end
if away and nl == 0 then
  return redis.error_reply('TRYAGAIN the queue\'s hash slot is being migrated to another cluster node; its messages stay ready')
end
return out
`)

// damageLua says what is wrong with damaged messages and quarantines them,
// for the claim script. It builds its functions only when a claim meets
// such a message (see pushPrelude on what defining them costs).
var damageLua = `
local damaged
local function damage_lua()
-- why says what is wrong with message hash k, whose HMGET of i, b, e,
-- d, p, h, z (through pcall) gave f, or nil when nothing is. A ready entry whose
-- hash is gone entirely is not a message, and not damage.
local function shown(v) return '"' .. string.gsub(string.sub(v, 1, 40), '[^%w%p ]', '?') .. '"' end
local function why(k, f)
  if f.err then
    return 'its key ' .. k .. ' is a ' .. redis.call('TYPE', k).ok .. ', not a hash'
  end
  if not f[2] then
    if f[7] then
      if not string.find(f[7], '` + packedHeaderPattern + `') then
        return 'its packed body (field z) starts with ' .. shown(string.sub(f[7], 1, 1)) .. ', not a header jobq writes'
      end
    else
      if redis.call('EXISTS', k) == 0 then return nil end
      return 'it has no body (field b or z)'
    end
  end
  if f[3] and not string.find(f[3], '^%d+$') then
    return 'its enqueue time (field e) is ' .. shown(f[3]) .. ', not a number of milliseconds'
  end
  if f[4] and not (#f[4] < 10 and string.find(f[4], '^%d+$')) then
    return 'its delivery count (field d) is ' .. shown(f[4]) .. ', not a count'
  end
  if f[5] and not (string.find(f[5], '^%-?%d%d?%d?%d?$') and math.abs(tonumber(f[5])) <= 1000) then
    return 'its priority (field p) is ' .. shown(f[5]) .. ', not an integer in -1000..1000'
  end
  return nil
end
-- quarantine moves damaged message mid (hash k), just taken from the
-- ready set, to the dead letters with the reason why. A key that is not a
-- hash is renamed to P..'corrupt:'..mid, kept for inspection (purging the
-- dead letter deletes it), and a hash takes its place.
local function quarantine(mid, k, why, now)
  why = 'corrupt record: ' .. why
  if redis.call('TYPE', k).ok ~= 'hash' then
    local keep = P .. 'corrupt:' .. mid
    redis.call('RENAME', k, keep)
    redis.call('HSET', k, 'b', '', 'e', str(now), 'r', why .. '; it was renamed to ' .. keep, 'x', '', 'a', str(now))
  else
    local g = redis.call('HMGET', k, 'i', 'n')
    forget(g[1], g[2])
    redis.call('HDEL', k, 't', 'l', 'v')
    redis.call('HSET', k, 'r', why, 'x', '', 'a', str(now))
  end
  redis.call('ZADD', P .. 'dead', now, mid)
end
return {why = why, quarantine = quarantine}
end
`

// renewScript extends a held lease. ARGV: prefix, message id, token,
// visibility ms. Returns 1, or 0 when the lease is not held.
var renewScript = goredis.NewScript(common + leaseLua + `
local INFLIGHT = P .. 'inflight'
local now = now_ms()
local mid = ARGV[2]
if not lease(mid, ARGV[3], now) then return 0 end
local exp = str(now + tonumber(ARGV[4]))
-- Redis refuses a script's first write with OOM when it is over maxmemory
-- (noeviction) and the command may grow memory, as ZADD and HSET may. A
-- renewal only rewrites a score and a field, and a refused one makes the
-- task run twice, so it writes first with a command Redis lets through
-- (deleting a field no message has; it changes nothing).
redis.call('HDEL', mkey(mid), '')
redis.call('ZADD', INFLIGHT, exp, mid)
redis.call('HSET', mkey(mid), 'l', exp)
return 1
`)

// completeScript deletes messages whose leases are held. ARGV: prefix, n,
// then n times (message id, token). Returns n results, 1 done or 0 lost.
var completeScript = goredis.NewScript(completeLua(false))

// completeResultsScript is completeScript that also stores a result
// record with each settlement it makes (see recordLua). ARGV: prefix, n,
// then recordLua's four, then n times (message id, token), then n times
// (task id, record); an empty task id stores no record.
var completeResultsScript = goredis.NewScript(completeLua(true))

// completeLua is the source of the complete scripts, with result records
// or without: one source, so that the two cannot drift apart.
func completeLua(records bool) string {
	w, first, rec, publish := "2", "3", "", ""
	if records {
		first, rec = "7", recordLua
		publish = `
store_records(nd == n, n, ` + first + ` + n * W, out)`
	}
	return common + leaseLua + rec + `
local INFLIGHT = P .. 'inflight'
local n, W = tonumber(ARGV[2]), ` + w + `
local now = now_ms()
-- The deletions are gathered into one variadic call each (DEL, HDEL, ZREM):
-- a command issued from Lua costs far more than its own work. The loop
-- runs once per message: it keeps the key prefix, and counts its tables'
-- lengths itself.
local PM = P .. 'm:'
local out, done, keys, ids, seen, held = {}, {}, {}, {}, {}, {}
local nd, ni = 0, 0
for i = 1, n do
  local base = ` + first + ` + (i - 1) * W - 1
  local mid, tok = ARGV[base + 1], ARGV[base + 2]
  local ok = 0
  -- The deletions come after the loop, so a lease listed twice must not
  -- succeed twice.
  if not seen[mid] then
    local k = PM .. mid
    local f = lease_at(k, tok, now, 'i', 'n', 'c')
    if f then
      ok = 1
      seen[mid] = true
      if f[3] and f[3] ~= '' and f[4] ~= '1' then ni = ni + 1; ids[ni] = f[3] end
      unhold(held, f[5], mid, tok)
      nd = nd + 1
      keys[nd], done[nd] = k, mid
    end
  end
  out[i] = ok
end
if nd > 0 then
  redis.call('DEL', unpack(keys))
  redis.call('ZREM', INFLIGHT, unpack(done))
end
if ni > 0 then redis.call('HDEL', P .. 'ids', unpack(ids)) end
drop_held(held)` + publish + `
return out
`
}

// recordLua stores the result records of settlements. Records live in
// buckets, hashes P..'rb:'..b of task id -> record (appendRecord), which
// expire as a whole: Redis deletes them, so nothing purges records.
// ARGV[3] names the bucket of the call's records, ARGV[4] is when it
// expires (ms), no earlier than any of its records (bucketOf), ARGV[5] is
// the announcement of their task ids for waiters (WaitResults), one per
// line, published on P..'results', and ARGV[6] is "1" when every
// settlement has a record. The sorted set P..'rbs' lists the buckets by
// expiry, for the readers.
//
// The (task id, record) pairs come last, in settlement order. When every
// settlement took effect and has a record, the common case, the pairs go
// to HSET as they are: a record then costs the script its two arguments
// and no work in Lua, and the bucket one HSET per call.
const recordLua = `
local function store_records(all, n, R, out)
  local bucket = P .. 'rb:' .. ARGV[3]
  if all and ARGV[6] == '1' then
    redis.call('HSET', bucket, unpack(ARGV, R, R + 2 * n - 1))
  else
    local f, nf = {}, 0
    for i = 1, n do
      local id = ARGV[R + 2 * i - 2]
      if out[i] == 1 and id ~= '' then
        f[nf + 1], f[nf + 2] = id, ARGV[R + 2 * i - 1]
        nf = nf + 2
      end
    end
    if nf == 0 then return end
    redis.call('HSET', bucket, unpack(f, 1, nf))
  end
  redis.call('PEXPIREAT', bucket, ARGV[4])
  redis.call('ZADD', P .. 'rbs', ARGV[4], ARGV[3])
  redis.call('PUBLISH', P .. 'results', ARGV[5])
end
`

// liveLua defines live(id), which reports whether task id has an
// unexpired record in any bucket: a cancel request is stored only where
// it has none, so that it never hides an end.
const liveLua = `
local now = now_ms()
local buckets
local function live(id)
  buckets = buckets or redis.call('ZRANGEBYSCORE', P .. 'rbs', now, '+inf')
  for _, b in ipairs(buckets) do
    local v = redis.call('HGET', P .. 'rb:' .. b, id)
    if v then
      local exp = string.match(v, '^[^\n]*\n[^\n]*\n(%d+)\n')
      if exp and tonumber(exp) > now then return true end
    end
  end
  return false
end
`

// putResultsScript stores result records (PutResults). ARGV: prefix, n,
// then recordLua's bucket, expiry and announcement, then n times ("1" to
// store the record only where no unexpired record of its task id exists,
// or "0"; task id; record). Returns how many it stored.
var putResultsScript = goredis.NewScript(common + liveLua + `
local f, nf = {}, 0
for i = 6, #ARGV, 3 do
  local id = ARGV[i + 1]
  if ARGV[i] ~= '1' or not live(id) then
    f[nf + 1], f[nf + 2] = id, ARGV[i + 2]
    nf = nf + 2
  end
end
if nf == 0 then return 0 end
local bucket = P .. 'rb:' .. ARGV[3]
redis.call('HSET', bucket, unpack(f, 1, nf))
redis.call('PEXPIREAT', bucket, ARGV[4])
redis.call('ZADD', P .. 'rbs', ARGV[4], ARGV[3])
redis.call('PUBLISH', P .. 'results', ARGV[5])
return nf / 2
`)

// getResultsScript reads result records. ARGV: prefix, then task ids.
// Returns, per live bucket (one that has not expired), the bucket's
// records of the ids (HMGET); the caller picks each id's record.
var getResultsScript = goredis.NewScript(common + `
local buckets = redis.call('ZRANGEBYSCORE', P .. 'rbs', now_ms(), '+inf')
local out = {}
for j, b in ipairs(buckets) do
  out[j] = redis.call('HMGET', P .. 'rb:' .. b, unpack(ARGV, 2))
end
return out
`)

// forgetBucketsScript drops the expired buckets from the list of buckets
// (their hashes are gone already). ARGV: prefix.
var forgetBucketsScript = goredis.NewScript(common + `
return redis.call('ZREMRANGEBYSCORE', P .. 'rbs', '-inf', '(' .. now_ms())
`)

// requeueScript releases held messages. ARGV: prefix, n, then n
// times (message id, token, delay ms, "1" to replace the body or "0",
// body). Returns n results, 1 done or 0 lost. Announcements as for push.
var requeueScript = goredis.NewScript(requeueLua)

// requeueLua is requeueScript's source.
const requeueLua = common + readyLua + leaseLua + announceLua + `
local n = tonumber(ARGV[2])
local now = now_ms()
local out, released, held = {}, {}, {}
local visible, firstDelay = 0, -1
for i = 0, n - 1 do
  local b = 3 + i * 5
  local mid, delay = ARGV[b], tonumber(ARGV[b + 2])
  local f = lease(mid, ARGV[b + 1], now, 'p', 'c')
  if f then
    local k = mkey(mid)
    released[#released + 1] = mid
    unhold(held, f[4], mid, ARGV[b + 1])
    redis.call('HDEL', k, 't', 'l')
    -- A new body is stored as it is (see pushScript on z).
    if ARGV[b + 3] == '1' then
      redis.call('HSET', k, 'b', ARGV[b + 4])
      redis.call('HDEL', k, 'z')
    end
    if delay > 0 then
      local at = str(now + delay)
      redis.call('HSET', k, 'v', at)
      redis.call('ZADD', DELAYED, at, mid)
      if firstDelay < 0 or delay < firstDelay then firstDelay = delay end
    else
      redis.call('HSET', k, 'v', now)
      make_ready(mid, f[3])
      visible = visible + 1
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #released > 0 then redis.call('ZREM', INFLIGHT, unpack(released)) end
drop_held(held)
announce(visible > 0 and visible or nil, firstDelay > 0 and firstDelay or nil)
return out
`

// deadLetterScript moves held messages to the dead letters. ARGV: prefix,
// n, then n times (message id, token, reason, detail, body: "=" and a new
// body, such as one carrying the attempt history, or the empty string to
// keep it; see deadLetterArgs). Returns n results, 1 done or 0 lost.
var deadLetterScript = goredis.NewScript(deadLetterLua(false))

// deadLetterResultsScript is deadLetterScript that also stores a result
// record with each settlement it makes (see recordLua). ARGV: prefix, n,
// then recordLua's four, then n times (message id, token, reason, detail,
// body), then n times (task id, record); an empty task id stores no
// record.
var deadLetterResultsScript = goredis.NewScript(deadLetterLua(true))

// deadLetterLua is the source of the dead-letter scripts, with result
// records or without.
func deadLetterLua(records bool) string {
	w, first, rec, publish := "5", "3", "", ""
	if records {
		first, rec = "7", recordLua
		publish = `
store_records(#moved == n, n, ` + first + ` + n * W, out)`
	}
	return common + leaseLua + rec + `
local INFLIGHT, DEAD = P .. 'inflight', P .. 'dead'
local n, W = tonumber(ARGV[2]), ` + w + `
local now = now_ms()
local out, moved, held = {}, {}, {}
for i = 0, n - 1 do
  local b = ` + first + ` + i * W
  local mid = ARGV[b]
  local f = lease(mid, ARGV[b + 1], now, 'i', 'n', 'c')
  if f then
    local k = mkey(mid)
    forget(f[3], f[4])
    unhold(held, f[5], mid, ARGV[b + 1])
    redis.call('HDEL', k, 't', 'l', 'v')
    redis.call('HSET', k, 'r', ARGV[b + 2], 'x', ARGV[b + 3], 'a', now)
    if ARGV[b + 4] ~= '' then
      redis.call('HSET', k, 'b', string.sub(ARGV[b + 4], 2))
      redis.call('HDEL', k, 'z')
    end
    redis.call('ZADD', DEAD, now, mid)
    moved[#moved + 1] = mid
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #moved > 0 then redis.call('ZREM', INFLIGHT, unpack(moved)) end
drop_held(held)` + publish + `
return out
`
}

// peekScript returns up to max messages in claim order: ready ones, then
// delayed ones by due time, then leased ones by expiry. It first promotes
// what is due, so the order is the one a claim would see. ARGV: prefix,
// max. Returns nine fields per message: message id, task id, body (field
// b), delivery count, enqueued ms, visible-at ms (lease expiry when
// leased), priority, 1 if leased, packed body (field z, only when there is
// no b).
var peekScript = goredis.NewScript(common + readyLua + `
local max = tonumber(ARGV[2])
local now = now_ms()
promote(now, 1000)
local out = {}
-- visible: the set's score for delayed and leased messages (due time,
-- lease expiry); for ready ones the hash's v, or the enqueued time.
local function add(mid, visible, leased)
  -- pcall: a key another tool replaced is left out, not a failed peek.
  local f = redis.pcall('HMGET', mkey(mid), 'i', 'b', 'd', 'e', 'v', 'p', 'z')
  if f[2] or f[7] then
    f[5] = visible or f[5] or f[4]
    out[#out + 1] = mid
    for j = 1, 6 do out[#out + 1] = f[j] or '' end
    out[#out + 1] = leased
    out[#out + 1] = not f[2] and f[7] or ''
  end
end
local left = max
for _, set in ipairs({READY, DELAYED, INFLIGHT}) do
  if left > 0 then
    local z = redis.call('ZRANGEBYSCORE', set, '-inf', '(inf', 'WITHSCORES', 'LIMIT', 0, left)
    for j = 1, #z, 2 do
      if set == READY then
        add(mid_of(z[j]), nil, 0)
      else
        add(z[j], z[j + 1], set == INFLIGHT and 1 or 0)
      end
    end
    left = left - #z / 2
  end
end
return out
`)

// statsScript counts exactly, without changing anything: due delayed
// messages and expired leases count as ready, because the next claim will
// promote them. ARGV: prefix. Returns {ready, inflight, delayed, dead}.
var statsScript = goredis.NewScript(common + setsLua + `
local now = now_ms()
local dueDelayed = redis.call('ZCOUNT', DELAYED, '-inf', now)
local expired = redis.call('ZCOUNT', INFLIGHT, '-inf', now)
local ready = counted(READY) + dueDelayed + expired
local inflight = counted(INFLIGHT) - expired
local delayed = redis.call('ZCARD', DELAYED) - dueDelayed
return {ready, inflight, delayed, redis.call('ZCARD', P .. 'dead')}
`)

// clearScript deletes up to limit ready, delayed and leased messages.
// ARGV: prefix, limit. Returns how many it deleted; the caller repeats
// until that is below limit, so a huge queue never blocks Redis for long.
var clearScript = goredis.NewScript(common + setsLua + `
local left = tonumber(ARGV[2])
local n = 0
redis.call('DEL', P .. 'ccur') -- the claim cursor (policy.go) names a message this clears
for _, set in ipairs({READY, DELAYED, INFLIGHT}) do
  if left > 0 then
    local members = redis.call('ZRANGEBYSCORE', set, '-inf', '(inf', 'LIMIT', 0, left)
    if #members > 0 then
      redis.call('ZREM', set, unpack(members))
      for _, m in ipairs(members) do
        if set == READY then m = mid_of(m) end
        local f = redis.pcall('HMGET', mkey(m), 'i', 'n')
        forget(f[1], f[2])
        redis.call('DEL', mkey(m))
      end
    end
    n = n + #members
    left = left - #members
  end
end
return n
`)

// listDeadScript returns up to max dead letters, oldest first. ARGV:
// prefix, max. Returns eight fields per letter: message id, task id, body
// (field b), reason, detail, delivery count, dead-at ms, packed body (field
// z, only when there is no b).
var listDeadScript = goredis.NewScript(common + `
local mids = redis.call('ZRANGE', P .. 'dead', 0, tonumber(ARGV[2]) - 1)
local out = {}
for _, mid in ipairs(mids) do
  local f = redis.pcall('HMGET', mkey(mid), 'i', 'b', 'r', 'x', 'd', 'a', 'z')
  if f.err then f = {'', '', 'its key is not a hash: ' .. f.err} end
  if f[2] then f[7] = nil end
  out[#out + 1] = mid
  for j = 1, 7 do out[#out + 1] = f[j] or '' end
end
return out
`)

// requeueDeadScript moves dead letters back to ready. A requeued message
// keeps its delivery count, so that the next delivery counts on, and the
// result records of its task are deleted from every bucket: it has not
// ended. ARGV: prefix, limit, then the message ids; with no ids it
// takes up to limit of all dead letters. A requeued letter takes its task
// id back; one whose task id another queued or running message holds
// merges into that message (dedup): it is deleted, its group keeps it
// dead-lettered and its records are kept, as on Postgres. Returns how
// many it moved or merged.
var requeueDeadScript = goredis.NewScript(common + readyLua + announceLua + `
local DEAD, IDS = P .. 'dead', P .. 'ids'
local buckets
local function forget_records(id)
  buckets = buckets or redis.call('ZRANGE', P .. 'rbs', 0, -1)
  for _, b in ipairs(buckets) do redis.call('HDEL', P .. 'rb:' .. b, id) end
end
local mids = {}
if #ARGV > 2 then
  for i = 3, #ARGV do mids[#mids + 1] = ARGV[i] end
else
  mids = redis.call('ZRANGE', DEAD, 0, tonumber(ARGV[2]) - 1)
end
local now = now_ms()
local n, merged = 0, 0
for _, mid in ipairs(mids) do
  local k = mkey(mid)
  -- A dead letter whose key another tool replaced stays dead.
  if redis.call('TYPE', k).ok == 'hash' and redis.call('ZREM', DEAD, mid) == 1 then
    local f = redis.call('HMGET', k, 'i', 'p', 'e', 'g')
    if f[1] and f[1] ~= '' and redis.call('HSETNX', IDS, f[1], mid) == 0 then
      -- Another queued or running message holds the task id: a second
      -- copy would run the task twice, so the letter merges into it. (A
      -- held copy is left to its release, which finds the id queued.)
      redis.call('DEL', k, P .. 'corrupt:' .. mid)
      n, merged = n + 1, merged + 1
    else
      redis.call('HDEL', k, 'r', 'x', 'a', 'n')
      if f[4] and f[4] ~= '' then
        -- Open again: no longer dead-lettered in its group.
        redis.call('HINCRBY', P .. 'g:' .. f[4], 'dl', -1)
        redis.call('HSET', P .. 'g:' .. f[4], 'u', now)
        redis.call('ZADD', P .. 'groups', now, f[4])
      end
      -- What made a message corrupt is repaired, so that it can run: a
      -- priority out of range orders as 0, an enqueue time that is not one
      -- becomes now.
      if f[2] and not (string.find(f[2], '^%-?%d%d?%d?%d?$') and math.abs(tonumber(f[2])) <= 1000) then
        redis.call('HDEL', k, 'p')
        f[2] = nil
      end
      if f[3] and not string.find(f[3], '^%d+$') then redis.call('HSET', k, 'e', str(now)) end
      if f[1] and f[1] ~= '' then forget_records(f[1]) end
      local d = redis.call('HGET', k, 'd')
      if not (d and string.find(d, '^%d+$') and tonumber(d) < 2147483647) then d = 0 end
      redis.call('HSET', k, 'd', d, 'v', now)
      make_ready(mid, f[2])
      n = n + 1
    end
  end
end
if n > merged then announce(n - merged) end
return n
`)

// purgeDeadScript deletes dead letters. ARGV: prefix, limit, then the
// message ids; with no ids it takes up to limit of all dead letters.
// Returns how many it deleted.
var purgeDeadScript = goredis.NewScript(common + `
local DEAD = P .. 'dead'
local mids = {}
if #ARGV > 2 then
  for i = 3, #ARGV do mids[#mids + 1] = ARGV[i] end
else
  mids = redis.call('ZRANGE', DEAD, 0, tonumber(ARGV[2]) - 1)
end
local n = 0
for _, mid in ipairs(mids) do
  if redis.call('ZREM', DEAD, mid) == 1 then
    redis.call('DEL', mkey(mid), P .. 'corrupt:' .. mid)
    n = n + 1
  end
end
return n
`)

// removeScript deletes the ready and delayed messages that own the given
// task ids (Admin.Cancel), and stores the record of each task it removed
// (see recordLua) and the cancel request of each task whose message it
// left (leased: in flight), only where that task has no unexpired record
// (liveLua); an id with no message gets nothing. ARGV: prefix, n, then
// recordLua's four, then n times (task id, record), then the cancel
// requests' bucket ("" for none) and its expiry, then n cancel requests.
// Returns the task ids it removed, then "", then the task ids whose
// message it left.
var removeScript = goredis.NewScript(common + setsLua + recordLua + liveLua + `
local IDS = P .. 'ids'
local n = tonumber(ARGV[2])
local RB, RBX = ARGV[7 + 2 * n], ARGV[8 + 2 * n]
-- On a cluster (the call declares the keys it knows of: declare.go) the
-- keys found only here, the message hashes, their groups and the live
-- buckets, are checked before the first write: one that is not on this
-- node (the queue's slot is moving) fails the call with nothing written.
if #KEYS > 1 then
  local function here(k) return type(redis.pcall('EXISTS', k)) ~= 'table' end
  local ok = true
  for i = 1, n do
    local mid = redis.call('HGET', IDS, ARGV[5 + 2 * i])
    if mid then
      local grp = redis.pcall('HGET', mkey(mid), 'g')
      ok = ok and type(grp) ~= 'table' and
        (type(grp) ~= 'string' or grp == '' or (here(P .. 'g:' .. grp) and here(P .. 'groups')))
    end
  end
  for _, b in ipairs(redis.call('ZRANGEBYSCORE', P .. 'rbs', now, '+inf')) do ok = ok and here(P .. 'rb:' .. b) end
  if not ok then
    return redis.error_reply("TRYAGAIN the queue's hash slot is being moved to another cluster node, and some of the keys this call writes are not on this one")
  end
end
local out, gone_ids, ng, kept, asked, na = {}, {}, 0, {}, {}, 0
for i = 1, n do
  local id = ARGV[5 + 2 * i]
  local mid = redis.call('HGET', IDS, id)
  local gone = false
  if mid then
    local k = mkey(mid)
    gone = redis.call('ZREM', DELAYED, mid) == 1
    if not gone then
      local q = redis.pcall('HGET', k, 'q')
      if type(q) ~= 'string' then q = mid end
      gone = redis.call('ZREM', READY, ready_member(q, mid)) == 1
    end
    if gone then
      redis.call('HDEL', IDS, id)
      local grp = redis.pcall('HGET', k, 'g')
      if type(grp) == 'string' and grp ~= '' then
        local gk, t = P .. 'g:' .. grp, now_ms()
        redis.call('HINCRBY', gk, 'c', 1)
        redis.call('HSET', gk, 'u', t)
        redis.call('ZADD', P .. 'groups', t, grp)
      end
      redis.call('DEL', k)
      ng = ng + 1
      gone_ids[ng] = id
    else
      kept[#kept + 1] = id
      if RB ~= '' and not live(id) then
        asked[na + 1], asked[na + 2] = id, ARGV[8 + 2 * n + i]
        na = na + 2
      end
    end
  end
  out[i] = gone and 1 or 0
end
if ng > 0 then store_records(ng == n, n, 7, out) end
if na > 0 then
  redis.call('HSET', P .. 'rb:' .. RB, unpack(asked, 1, na))
  redis.call('PEXPIREAT', P .. 'rb:' .. RB, RBX)
  redis.call('ZADD', P .. 'rbs', RBX, RB)
end
gone_ids[ng + 1] = ''
for _, id in ipairs(kept) do gone_ids[#gone_ids + 1] = id end
return gone_ids
`)

// layoutRelease is the key layout this release reads and writes (see
// layoutScript).
const layoutRelease = 1

// layoutNote is the layout mark's text, for whoever looks at the marked
// keys.
const layoutNote = "jobq: this queue's keys are laid out for a jobq release that packs bodies (field z) and keeps delayed messages in the due set; releases before it cannot use the queue"

// layoutScript marks the queue as laid out for this release; New runs it.
// Releases before packed bodies (body.go) cannot read them, so they must
// not claim: the mark makes them fail before they change anything. Their
// claim, peek, stats and cancel scripts start with the sorted set of
// delayed messages, P..'delayed', and their push with the max-depth
// policy, a string at P..'pold': this release keeps those in P..'due' and
// P..'polm', and puts in the old names keys of other types, on which the
// old scripts' first command fails (WRONGTYPE). The script moves what the
// old keys hold (delayed messages, the max-depth policy) to the new ones.
// ARGV: prefix, the note the marks hold. When it puts the mark in
// P..'pold' back on a queue in use (an older client deleted it: see
// rescueScript) it sets P..'rescue', which New deletes once its rescue has
// run to the end, so that a rescue cut short (a crash, a lost answer) is
// run again by the next open. Returns {1 while P..'rescue' is set, else
// 0; field 'release' of the mark in P..'pold', 0 when absent}: a later
// release that lays the keys out so that this one would misread them sets
// that field to its layoutRelease, and New then refuses the queue.
var layoutScript = goredis.NewScript(common + `
local OLD, DUE, OLDMD, MD = P .. 'delayed', P .. 'due', P .. 'pold', P .. 'polm'
local t = redis.call('TYPE', OLD).ok
if t == 'zset' then
  redis.call('ZUNIONSTORE', DUE, 2, DUE, OLD, 'AGGREGATE', 'MIN')
  redis.call('DEL', OLD)
  t = 'none'
end
if t == 'none' then redis.call('SET', OLD, ARGV[2]) end
t = redis.call('TYPE', OLDMD).ok
if t == 'string' then
  redis.call('SET', MD, redis.call('GET', OLDMD))
  redis.call('DEL', OLDMD)
  t = 'none'
end
if t == 'none' then
  redis.call('HSET', OLDMD, 'jobq', ARGV[2])
  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('SET', P .. 'rescue', '1') end
end
local need = 0
if redis.call('TYPE', OLDMD).ok == 'hash' then need = tonumber(redis.call('HGET', OLDMD, 'release') or '0') or 0 end
return {redis.call('EXISTS', P .. 'rescue'), need}
`)

// rescueScript makes ready the messages that own their task ID but are in
// no set: an older release's delayed push leaves them when an older
// client has deleted the mark in P..'pold' (see layoutScript), as it
// fails at the mark in P..'delayed' after storing the message. ARGV:
// prefix, then pairs (task id, message id) from the ids hash. Returns how
// many it made ready.
var rescueScript = goredis.NewScript(common + readyLua + announceLua + `
local IDS = P .. 'ids'
local now = now_ms()
local n = 0
for i = 2, #ARGV - 1, 2 do
  local id, mid = ARGV[i], ARGV[i + 1]
  local k = mkey(mid)
  if mid ~= '' and redis.call('HGET', IDS, id) == mid and redis.call('TYPE', k).ok == 'hash'
      and not redis.call('ZSCORE', DELAYED, mid) and not redis.call('ZSCORE', INFLIGHT, mid)
      and not redis.call('ZSCORE', P .. 'dead', mid) then
    local f = redis.call('HMGET', k, 'q', 'p')
    if not redis.call('ZSCORE', READY, ready_member(f[1] or mid, mid)) then
      redis.call('HDEL', k, 't', 'l')
      redis.call('HSET', k, 'v', str(now))
      make_ready(mid, f[2])
      n = n + 1
    end
  end
end
if n > 0 then announce(n) end
return n
`)
