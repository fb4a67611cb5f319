// Package settletest builds settlement params for driver tests.
package settletest

import "github.com/jobq/jobq/driver"

// WithResults pairs leases[i] with recs[i] (recs may be shorter: the rest
// carry no record).
func WithResults(leases []driver.Lease, recs []*driver.ResultRecord) []driver.CompleteParams {
	reqs := driver.Completions(leases...)
	for i := range min(len(reqs), len(recs)) {
		reqs[i].Result = recs[i]
	}
	return reqs
}

// DeadWithResults returns a copy of reqs in which reqs[i] carries recs[i].
func DeadWithResults(reqs []driver.DeadLetterParams, recs []*driver.ResultRecord) []driver.DeadLetterParams {
	out := append([]driver.DeadLetterParams(nil), reqs...)
	for i := range min(len(out), len(recs)) {
		out[i].Result = recs[i]
	}
	return out
}
