package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/tools/testkit/settletest"
)

// TestSettlementStoresRecordsInChunks: a settlement of more records than
// one statement stores (recordChunk) stores each, with its own data, in
// the chunk boundaries' every position, and leaves out those whose lease
// was lost.
func TestSettlementStoresRecordsInChunks(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, recordChunk - 1, recordChunk, recordChunk + 1, 2*recordChunk + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			b := setup(t, "")
			ids := make([]string, n)
			msgs := make([]*driver.Message, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("t%03d", i)
				msgs[i] = msg(ids[i])
			}
			b.push(t, msgs...)
			got := b.receive(t, n, time.Minute)
			if len(got) != n {
				t.Fatalf("received %d of %d", len(got), n)
			}
			leases := make([]driver.Lease, n)
			recs := make([]*driver.ResultRecord, n)
			for i, r := range got {
				leases[i], recs[i] = r.Lease, rec(r.ID, driver.ResultSucceeded, time.Hour)
			}
			lost := n / 2 // its lease is not held: no record
			leases[lost].Token = "not-the-token"
			b.drv.Complete(b.ctx, settletest.WithResults(leases, recs))
			stored := b.results(t, ids...)
			byID := map[string]*driver.ResultRecord{}
			for i, r := range stored {
				byID[ids[i]] = r
			}
			for i, r := range got {
				s := byID[r.ID]
				switch {
				case i == lost && s != nil:
					t.Errorf("%s lost its lease but has a record", r.ID)
				case i != lost && (s == nil || string(s.Data) != string(recs[i].Data)):
					t.Errorf("%s: record %+v; want data %q", r.ID, s, recs[i].Data)
				}
			}
		})
	}
}
