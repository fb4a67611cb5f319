package jobq

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestRecordImpliedSuccess: a succeeded record leaves out the success its
// other fields describe, reads back with it, and keeps every attempt it
// cannot rebuild; records that list the success, as earlier jobq wrote
// them, read the same.
func TestRecordImpliedSuccess(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 26, 9, 41, 2, 118_000_000, time.UTC)
	code := 1
	success := Attempt{Delivery: 2, Worker: "n1-7", Host: "n1", Start: at, End: at.Add(time.Second), Outcome: OutcomeSuccess}
	failure := Attempt{Delivery: 1, Worker: "n1-7", Host: "n1", Start: at.Add(-time.Minute), End: at.Add(-time.Minute / 2),
		Outcome: OutcomeFailure, ExitCode: &code, Detail: "exit 1", RetryDelay: time.Second}
	details := func(as ...Attempt) recordDetails {
		return recordDetails{deliveries: 2, worker: "n1-7", host: "n1", started: at, ended: at.Add(time.Second), attempts: as}
	}
	withDetail := success
	withDetail.Detail = "a note"
	// An environment label, and a preempted attempt's lost and saved work.
	onSpot := success
	onSpot.Env = "Standard_D2s_v5/westeurope"
	preempted := Attempt{Delivery: 1, Worker: "n2-3", Host: "n2", Env: "spot", Start: at.Add(-time.Hour), End: at.Add(-time.Minute),
		Outcome: OutcomePreempted, Lost: 30 * time.Second, Saved: 58 * time.Minute}
	envDetails := func(as ...Attempt) recordDetails {
		d := details(as...)
		d.env = onSpot.Env
		return d
	}
	tests := []struct {
		name     string
		state    driver.ResultState
		d        recordDetails
		listed   int // attempts written in the record
		attempts []Attempt
	}{
		{"success at once", driver.ResultSucceeded, details(success), 0, []Attempt{success}},
		{"success after a failure", driver.ResultSucceeded, details(failure, success), 1, []Attempt{failure, success}},
		{"success with a detail", driver.ResultSucceeded, details(withDetail), 1, []Attempt{withDetail}},
		{"dead-lettered", driver.ResultDeadLettered, details(failure, success), 2, []Attempt{failure, success}},
		{"success without attempts or start", driver.ResultSucceeded, recordDetails{deliveries: 1}, 0, nil},
		{"success with an environment", driver.ResultSucceeded, envDetails(onSpot), 0, []Attempt{onSpot}},
		{"success after a preemption", driver.ResultSucceeded, envDetails(preempted, onSpot), 1, []Attempt{preempted, onSpot}},
	}
	for _, tt := range tests {
		data := tt.d.encode(tt.state)
		if got := strings.Count(string(data), `"outcome"`); got != tt.listed {
			t.Errorf("%s: %d attempts written in %s; want %d", tt.name, got, data, tt.listed)
		}
		r, _, err := decodeRecord(&driver.ResultRecord{ID: "t", State: tt.state, Data: data})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !reflect.DeepEqual(r.Attempts, tt.attempts) {
			t.Errorf("%s: attempts read back %+v\nwant %+v", tt.name, r.Attempts, tt.attempts)
		}
	}

	// As earlier jobq wrote a first-time success: the success listed.
	old := `{"v": 1, "delivery_count": 1, "worker": "n1-7", "host": "n1", "started": "2026-11-26T09:41:02.118Z", "finished": "2026-11-26T09:41:03.118Z", ` +
		`"attempts": [{"delivery": 1, "outcome": "success", "worker": "n1-7", "host": "n1", "start": "2026-11-26T09:41:02.118Z", "end": "2026-11-26T09:41:03.118Z"}]}`
	r, _, err := decodeRecord(&driver.ResultRecord{ID: "t", State: driver.ResultSucceeded, Data: []byte(old)})
	if err != nil {
		t.Fatal(err)
	}
	want := []Attempt{{Delivery: 1, Worker: "n1-7", Host: "n1", Start: at, End: at.Add(time.Second), Outcome: OutcomeSuccess}}
	if !reflect.DeepEqual(r.Attempts, want) {
		t.Errorf("a record listing its success: attempts %+v\nwant %+v", r.Attempts, want)
	}
}

// TestRecordEncodeAllocatesOnce: the record of a task that succeeded at
// once (worker, host, start and finish, the implied attempt) is encoded
// into one allocation, as every completion stores one.
func TestRecordEncodeAllocatesOnce(t *testing.T) {
	start := time.Date(2026, 11, 28, 23, 30, 1, 123456789, time.UTC)
	end := start.Add(1500 * time.Microsecond)
	d := recordDetails{deliveries: 1, started: start, ended: end, worker: "w-7f3a9c2e1b4d", host: "build-host-01.example.internal",
		attempts: []Attempt{{Delivery: 1, Worker: "w-7f3a9c2e1b4d", Host: "build-host-01.example.internal", Start: start, End: end, Outcome: OutcomeSuccess}}}
	if n := testing.AllocsPerRun(100, func() { d.encode(driver.ResultSucceeded) }); n != 1 {
		t.Errorf("encoding a success record took %v allocations, want 1", n)
	}
}
