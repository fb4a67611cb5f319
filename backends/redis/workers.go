package redis

import (
	"context"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// The worker registry (driver.WorkerStore) is two keys beside the queue's,
// under the same hash tag: the hash <prefix>workers maps a worker ID to its
// record (a flag byte, '1' when withdrawn, then the portable layer's data),
// and the sorted set <prefix>workers:hb scores each worker ID by its last
// heartbeat in Unix milliseconds on Redis's clock (TIME at the write, less
// how long before it the worker stamped the heartbeat by its own clock),
// for listings and purges by age: workers and listers whose clocks are off
// from each other's agree on how long a worker has been silent. Every
// write pushes both keys' expiry to workerKeyTTL ahead, so the registry of
// a queue nobody works on any more expires by itself.

// workerKeyTTL is how long the registry keys outlive their last write: the
// portable layer's retention (24 hours) and an hour of slack.
const workerKeyTTL = 25 * time.Hour

func (d *Driver) workerKeys() (records, beats string) {
	return d.prefix + "workers", d.prefix + "workers:hb"
}

// redisNowLua sets now to Redis's clock in milliseconds.
const redisNowLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// putWorkerScript stores worker ARGV[1]'s record ARGV[2] with a heartbeat
// ARGV[3] ms before now, and sets both keys to expire in ARGV[4] ms.
var putWorkerScript = goredis.NewScript(redisNowLua + `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], now - tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 0`)

// listWorkersScript returns, for every worker with a heartbeat at most
// ARGV[1] ms ago, its ID, how many ms ago, and its record.
var listWorkersScript = goredis.NewScript(redisNowLua + `
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], now - tonumber(ARGV[1]), '+inf', 'WITHSCORES')
local out = {}
for i = 1, #ids, 2 do
	local rec = redis.call('HGET', KEYS[1], ids[i])
	if rec then
		out[#out+1] = ids[i]
		out[#out+1] = string.format('%d', now - tonumber(ids[i+1]))
		out[#out+1] = rec
	end
end
return out`)

// purgeWorkersScript deletes the workers whose heartbeat is more than
// ARGV[1] ms ago and returns how many.
var purgeWorkersScript = goredis.NewScript(redisNowLua + `
local before = '(' .. string.format('%d', now - tonumber(ARGV[1]))
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', before)
for i = 1, #ids do
	redis.call('HDEL', KEYS[1], ids[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', before)
return #ids`)

var _ driver.WorkerStore = (*Driver)(nil)

// PutWorker implements driver.WorkerStore.
func (d *Driver) PutWorker(ctx context.Context, rec *driver.WorkerRecord) error {
	const op = "put worker"
	if err := d.closing.Check(ctx); err != nil {
		return err
	}
	records, beats := d.workerKeys()
	flag := byte('0')
	if rec.Withdrawn {
		flag = '1'
	}
	val := append([]byte{flag}, rec.Data...)
	lag := d.now().Sub(rec.Heartbeat).Milliseconds()
	err := putWorkerScript.Run(ctx, d.client, []string{records, beats}, rec.ID, val, lag, workerKeyTTL.Milliseconds()).Err()
	if err != nil {
		return d.fail(ctx, op, err)
	}
	return nil
}

// ListWorkers implements driver.WorkerStore.
func (d *Driver) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	const op = "list workers"
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	records, beats := d.workerKeys()
	now := d.now()
	res, err := listWorkersScript.Run(ctx, d.client, []string{records, beats}, now.Sub(since).Milliseconds()).Slice()
	if err != nil {
		return nil, d.fail(ctx, op, err)
	}
	out := make([]*driver.WorkerRecord, 0, len(res)/3)
	for i := 0; i+2 < len(res); i += 3 {
		ago, err := strconv.ParseInt(asStr(res[i+1]), 10, 64)
		if err != nil {
			return nil, driver.Errorf(errcode.Internal, "redis list workers: heartbeat age %q of worker %q is not a number", asStr(res[i+1]), asStr(res[i]))
		}
		val := asStr(res[i+2])
		if val == "" {
			continue
		}
		out = append(out, &driver.WorkerRecord{ID: asStr(res[i]), Heartbeat: now.Add(-time.Duration(ago) * time.Millisecond).UTC(),
			Withdrawn: val[0] == '1', Data: []byte(val[1:])})
	}
	return out, nil
}

// PurgeWorkers implements driver.WorkerStore.
func (d *Driver) PurgeWorkers(ctx context.Context, before time.Time) (int64, error) {
	const op = "purge workers"
	if err := d.closing.Check(ctx); err != nil {
		return 0, err
	}
	records, beats := d.workerKeys()
	n, err := purgeWorkersScript.Run(ctx, d.client, []string{records, beats}, d.now().Sub(before).Milliseconds()).Int64()
	if err != nil {
		return 0, d.fail(ctx, op, err)
	}
	return n, nil
}
