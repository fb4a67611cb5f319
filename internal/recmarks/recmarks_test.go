package recmarks

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestEnded: a task marked with no record counts any final record; one
// marked with a record counts only a final one that differs (state, time
// or details), even one stamped earlier; a later read of an ID already
// marked (a batch after the one that pushed it) does not move its mark.
func TestEnded(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	old := &driver.ResultRecord{ID: "a", State: driver.ResultSucceeded, UpdatedAt: t0, Data: []byte(`{"run":1}`)}
	s := Set{}
	s.Add([]string{"a", "b"}, []*driver.ResultRecord{old, nil})
	newRun := &driver.ResultRecord{ID: "a", State: driver.ResultSucceeded, UpdatedAt: t0.Add(-30 * time.Second), Data: []byte(`{"run":2}`)}
	s.Add([]string{"a"}, []*driver.ResultRecord{newRun})
	for _, c := range []struct {
		id   string
		rec  *driver.ResultRecord
		want bool
	}{
		{"a", old, false},
		{"a", &driver.ResultRecord{ID: "a", State: driver.ResultSucceeded, UpdatedAt: t0, Data: []byte(`{"run":1}`)}, false},
		{"a", newRun, true},
		{"a", &driver.ResultRecord{ID: "a", State: driver.ResultCancelRequested, UpdatedAt: t0.Add(time.Second)}, false},
		{"b", nil, false},
		{"b", &driver.ResultRecord{ID: "b", State: driver.ResultDeadLettered, UpdatedAt: t0.Add(-time.Hour)}, true},
		{"unmarked", &driver.ResultRecord{ID: "unmarked", State: driver.ResultSucceeded}, true},
	} {
		if got := s.Ended(c.id, c.rec); got != c.want {
			t.Errorf("Ended(%s, %+v) = %v; want %v", c.id, c.rec, got, c.want)
		}
	}
}
