package redis

import (
	"context"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// The worker registry (driver.WorkerStore) is two keys beside the queue's,
// under the same hash tag: the hash <prefix>workers maps a worker ID to its
// record (a flag byte, '1' when withdrawn, then the portable layer's data),
// and the sorted set <prefix>workers:hb scores each worker ID by its last
// heartbeat in Unix milliseconds, for listings and purges by age. Every
// write pushes both keys' expiry to workerKeyTTL ahead, so the registry of
// a queue nobody works on any more expires by itself.

// workerKeyTTL is how long the registry keys outlive their last write: the
// portable layer's retention (24 hours) and an hour of slack.
const workerKeyTTL = 25 * time.Hour

func (d *Driver) workerKeys() (records, beats string) {
	return d.prefix + "workers", d.prefix + "workers:hb"
}

// listWorkersScript returns, for every worker with a heartbeat of at least
// ARGV[1] ms, its ID, heartbeat and record.
var listWorkersScript = goredis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], ARGV[1], '+inf', 'WITHSCORES')
local out = {}
for i = 1, #ids, 2 do
	local rec = redis.call('HGET', KEYS[1], ids[i])
	if rec then
		out[#out+1] = ids[i]
		out[#out+1] = ids[i+1]
		out[#out+1] = rec
	end
end
return out`)

// purgeWorkersScript deletes the workers whose heartbeat is before ARGV[1]
// ms and returns how many.
var purgeWorkersScript = goredis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
for i = 1, #ids do
	redis.call('HDEL', KEYS[1], ids[i])
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[1])
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
	cmds, err := d.client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.HSet(ctx, records, rec.ID, val)
		p.ZAdd(ctx, beats, goredis.Z{Score: float64(rec.Heartbeat.UnixMilli()), Member: rec.ID})
		p.PExpire(ctx, records, workerKeyTTL)
		p.PExpire(ctx, beats, workerKeyTTL)
		return nil
	})
	if err != nil {
		return d.fail(op, queuedErr(err, cmds))
	}
	return nil
}

// queuedErr returns, for a MULTI/EXEC that Redis discarded (EXECABORT),
// the error of the first command it refused (OOM, NOPERM, ...), which
// says why; otherwise err.
func queuedErr(err error, cmds []goredis.Cmder) error {
	if !strings.HasPrefix(err.Error(), "EXECABORT") {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !strings.HasPrefix(cerr.Error(), "EXECABORT") {
			return cerr
		}
	}
	return err
}

// ListWorkers implements driver.WorkerStore.
func (d *Driver) ListWorkers(ctx context.Context, since time.Time) ([]*driver.WorkerRecord, error) {
	const op = "list workers"
	if err := d.closing.Check(ctx); err != nil {
		return nil, err
	}
	records, beats := d.workerKeys()
	res, err := listWorkersScript.Run(ctx, d.client, []string{records, beats}, since.UnixMilli()).Slice()
	if err != nil {
		return nil, d.fail(op, err)
	}
	out := make([]*driver.WorkerRecord, 0, len(res)/3)
	for i := 0; i+2 < len(res); i += 3 {
		hb, err := strconv.ParseFloat(asStr(res[i+1]), 64)
		if err != nil {
			return nil, driver.Errorf(errcode.Internal, "redis list workers: heartbeat %q of worker %q is not a number", asStr(res[i+1]), asStr(res[i]))
		}
		val := asStr(res[i+2])
		if val == "" {
			continue
		}
		out = append(out, &driver.WorkerRecord{ID: asStr(res[i]), Heartbeat: time.UnixMilli(int64(hb)).UTC(),
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
	n, err := purgeWorkersScript.Run(ctx, d.client, []string{records, beats}, before.UnixMilli()).Int64()
	if err != nil {
		return 0, d.fail(op, err)
	}
	return n, nil
}
