package redis

import "github.com/jobq/jobq/driver"

// maxReceiveBatch bounds one claim so that a single script never holds
// Redis for long.
const maxReceiveBatch = 1000

// resultHistoryFallback says what the result history costs: the records
// are kept in hashes by expiry (results.go), not by end time.
const resultHistoryFallback = "result records are kept in hashes by expiry, not by end time: jobq lists every unexpired record (HSCAN, 1,000 at a time) and adds up those of the window, " +
	"so every record crosses the wire whatever the window (a 7-day window of 10,000 records took 0.4 s, of 100,000 records 14 s)"

// capabilities returns the declaration, with the message size limit from
// the URL (0: none beyond the server's proto-max-bulk-len, 512 MB by
// default).
func capabilities(maxMessageBytes int) driver.Capabilities {
	return driver.Capabilities{
		Features: driver.NativeExcept(map[driver.Feature]driver.Support{
			driver.WorkerRegistry: {Level: driver.Native}, // a hash and a sorted set (workers.go)
			driver.TransactionalPush: {Level: driver.Unsupported,
				Fallback: "Redis has no application transaction to join; push after your own transaction commits"},
			driver.ResultHistory: {Level: driver.Emulated, Fallback: resultHistoryFallback},
		}),
		MaxReceiveBatch: maxReceiveBatch,
		MaxMessageBytes: maxMessageBytes,
	}
}
