package redis

import "github.com/jobq/jobq/driver"

// maxReceiveBatch bounds one claim so that a single script never holds
// Redis for long.
const maxReceiveBatch = 1000

// capabilities returns the declaration, with the message size limit from
// the URL (0: none beyond the server's proto-max-bulk-len, 512 MB by
// default).
func capabilities(maxMessageBytes int) driver.Capabilities {
	return driver.Capabilities{
		Features: driver.NativeExcept(map[driver.Feature]driver.Support{
			driver.WorkerRegistry: {Level: driver.Native}, // a hash and a sorted set (workers.go)
			driver.TransactionalPush: {Level: driver.Unsupported,
				Fallback: "Redis has no application transaction to join; push after your own transaction commits"},
			driver.ResultHistory: {Level: driver.Unsupported,
				Fallback: "result records are kept in hashes by expiry, which cannot be listed by end time yet: the dashboard's history panels stay empty (its live plots work)"},
		}),
		MaxReceiveBatch: maxReceiveBatch,
		MaxMessageBytes: maxMessageBytes,
	}
}
