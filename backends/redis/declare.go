package redis

import "github.com/jobq/jobq/driver"

// On Redis Cluster a script declares only the queue's counter (scripts.go)
// and builds the names of its other keys from the prefix. While the
// queue's slot moves to another master (CLUSTER SETSLOT MIGRATING and
// IMPORTING, then MIGRATE key by key), Redis checks only the declared keys
// before it runs a script. A command of the script on a key that has moved
// already, or on one that does not exist yet (the node the slot leaves
// creates no key), fails with "Script attempted to access a non local
// key", and the script stops there, keeping what it wrote before: a
// completion deleted the message and stored no result record.
//
// So on a cluster the settlement and record scripts declare the keys they
// write. Redis then refuses a call before it runs when some of them are
// not on the node: with TRYAGAIN, or ASK when none is, which the importing
// node answers with TRYAGAIN until it has them all (a client opened from a
// URL sends it no script: asking.go). Both are Unavailable, which the
// worker retries. Keys a script finds only as it runs are read with pcall
// (a concurrency key's set of held leases, whose stale entries the claim
// drops) or checked before the first write (removeScript). A plain server
// moves no slots: its calls declare the counter alone, which costs Redis
// least per call.

// writes names the keys of the queue a settlement or record call writes:
// names (after the prefix), and the bucket and the bucket list of rs when
// it has records. It is nil on a plain server.
func (d *Driver) writes(rs recordSet, names ...string) []string {
	if !d.cluster {
		return nil
	}
	out := make([]string, 0, 1+len(names)+2)
	out = append(out, d.keys[0])
	for _, n := range names {
		out = append(out, d.prefix+n)
	}
	if rs.n > 0 {
		out = append(out, d.prefix+"rb:"+rs.bucket, d.prefix+"rbs")
	}
	return out
}

// declared returns the keys a settlement call on the messages lo to hi
// declares on a cluster: fixed (from writes, the counter first), the
// messages' hashes and the groups their tallies count in. It is nil when
// fixed is.
func (d *Driver) declared(lo, hi int, fixed []string, lease func(int) driver.Lease, tally func(int) driver.GroupTally) []string {
	if fixed == nil {
		return nil
	}
	out := make([]string, 0, len(fixed)+hi-lo+2)
	out = append(out, fixed...)
	pm := d.prefix + "m:"
	for i := lo; i < hi; i++ {
		out = append(out, pm+lease(i).MessageID)
	}
	groups := false
	for i := lo; i < hi; i++ {
		if g := tally(i).Group; g != "" && (i == lo || tally(i-1).Group != g) {
			out, groups = append(out, d.prefix+"g:"+g), true
		}
	}
	if groups {
		out = append(out, d.prefix+"groups")
	}
	return out
}
