// Package recmarks keeps what a push --wait saw of its tasks' result
// records before the push, so that the wait can tell the record of the
// run it pushed from an earlier run's without comparing clocks: a record
// is this run's when the task had none before the push, or it differs
// from the one it had.
package recmarks

import (
	"hash/maphash"

	"github.com/jobq/jobq/driver"
)

// seed hashes records' details; marks live in one process, so a seed per
// process is enough.
var seed = maphash.MakeSeed()

// mark is what a Set keeps of one record: its state, write time and a
// hash of its details (two runs' records differ there even where their
// times, stamped by different clocks, might collide). A zero mark is a
// task that had no record.
type mark struct {
	state   driver.ResultState
	updated int64
	sum     uint64
}

func markOf(rec *driver.ResultRecord) mark {
	if rec == nil {
		return mark{}
	}
	return mark{state: rec.State, updated: rec.UpdatedAt.UnixNano(), sum: maphash.Bytes(seed, rec.Data)}
}

// Set maps task IDs to the record each had before it was pushed. Not safe
// for concurrent use.
type Set map[string]mark

// Add marks the records recs (aligned with ids, nil where none) as seen
// before the push. An ID marked already keeps its first mark: a later
// read may be of the record of the run pushed since.
func (s Set) Add(ids []string, recs []*driver.ResultRecord) {
	for i, id := range ids {
		if _, ok := s[id]; !ok {
			s[id] = markOf(recs[i])
		}
	}
}

// Has reports whether id was marked.
func (s Set) Has(id string) bool {
	_, ok := s[id]
	return ok
}

// Ended reports whether rec, task id's record now, is a final record
// written since id was marked: a task marked with no record counts any
// final one; one marked with a record counts one that differs from it.
// An ID not marked counts any final record.
func (s Set) Ended(id string, rec *driver.ResultRecord) bool {
	if rec == nil || !rec.State.Final() {
		return false
	}
	m, ok := s[id]
	return !ok || m == (mark{}) || m != markOf(rec)
}
