package main

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestAnalyse: each kind of repeat is put down to its cause and its kill.
// Worker 10 is killed at t=100 and worker 20 at t=200; worker 30 lives.
func TestAnalyse(t *testing.T) {
	t.Parallel()
	kills := []kill{{pid: 10, at: time.Unix(100, 0), running: 1}, {pid: 20, at: time.Unix(200, 0), running: 0}}
	rf := runFile{starts: map[int][]rec{}, ends: map[int][]rec{}}
	run := func(n, pid int, start, end float64) {
		rf.starts[n] = append(rf.starts[n], rec{pid, start})
		if end > 0 {
			rf.ends[n] = append(rf.ends[n], rec{pid, end})
			rf.runs++
		}
	}
	run(0, 10, 1, 2)      // task 0: done and settled
	run(1, 10, 99, 101)   // task 1: running at the kill, ran on,
	run(1, 30, 110, 111)  //   and ran again: a duplicate (running)
	run(2, 10, 98, 99)    // task 2: finished before the kill, unsettled,
	run(2, 20, 110, 111)  //   ran again on 20 (killed later): a duplicate (unsettled)
	run(3, 10, 99.5, 0)   // task 3: running at the kill, died with it,
	run(3, 30, 110, 111)  //   ran once more: a redelivery, no duplicate
	run(4, 30, 110, 111)  // task 4: claimed by 10 without starting
	run(5, 30, 300, 301)  // task 5: run twice on a live worker
	run(5, 30, 310, 311)  //   (a lease that expired): other
	run(7, 1, 100.5, 101) // task 7: launched as 10 died (its bash saw init
	run(7, 30, 110, 111)  //   as its parent): a duplicate (running)
	deliveries := map[int]int{4: 2, 5: 2}
	// Task 6 never ran: lost.

	var res result
	analyse(&res, 8, rf, deliveries, kills, nil)
	want := result{
		Kills: 2, Runs: 11, Lost: 1, LostTasks: []int{6}, Duplicates: 4,
		PerKill: 1.5, MaxPerKill: 3,
		DupCauses: map[string]int{causeRunning: 2, causeUnsettled: 1, causeOther: 1},
		// Task 5's redelivery has no kill to blame, but kills happened
		// and the harness cannot tell it from a claim lost with a
		// worker: it reads as claimed.
		Redelivered: map[string]int{causeRunning: 3, causeUnsettled: 1, causeClaimed: 2},
		KillLog:     []killReport{{Pid: 10, Running: 1, Orphans: 2, Duplicates: 3}, {Pid: 20}},
	}
	if !reflect.DeepEqual(res, want) {
		t.Errorf("analyse:\n got %+v\nwant %+v", res, want)
	}
}

// TestReadRuns skips lines cut short by a kill.
func TestReadRuns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "runs")
	data := "s 1 10 5.5\ne 1 10 6.25\ne 2 1\ns 3 10 7\nx 4 10 8\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	rf, err := readRuns(path)
	if err != nil {
		t.Fatal(err)
	}
	want := runFile{
		starts: map[int][]rec{1: {{10, 5.5}}, 3: {{10, 7}}},
		ends:   map[int][]rec{1: {{10, 6.25}}},
		runs:   1,
	}
	if !reflect.DeepEqual(rf, want) {
		t.Errorf("readRuns: got %+v, want %+v", rf, want)
	}
}

// TestAnalyseRedeliveredBeforeKill: a task that a worker finished and that
// came back while the worker still lived is not put down to the worker's
// later kill, but to an engine restart when it ended just before one.
func TestAnalyseRedeliveredBeforeKill(t *testing.T) {
	t.Parallel()
	kills := []kill{{pid: 10, at: time.Unix(100, 0), running: 0}}
	restarts := []span{{time.Unix(51, 500e6), time.Unix(53, 0)}}
	rf := runFile{starts: map[int][]rec{}, ends: map[int][]rec{}}
	run := func(n, pid int, start, end float64) {
		rf.starts[n] = append(rf.starts[n], rec{pid, start})
		rf.ends[n] = append(rf.ends[n], rec{pid, end})
		rf.runs++
	}
	run(0, 10, 50, 51) // ended in the second before the restart,
	run(0, 30, 61, 62) //   back 10 s later
	run(1, 10, 20, 21) // back while 10 lived, no restart near:
	run(1, 30, 31, 32) //   a lease that expired
	run(2, 10, 98, 99) // finished just before the kill: unsettled
	run(2, 30, 110, 111)

	var res result
	analyse(&res, 3, rf, map[int]int{}, kills, restarts)
	want := map[string]int{causeRestart: 1, causeOther: 1, causeUnsettled: 1}
	if !reflect.DeepEqual(res.DupCauses, want) || res.KillLog[0].Duplicates != 1 {
		t.Errorf("duplicates by cause %v, kill %+v; want %v and 1 duplicate for the kill", res.DupCauses, res.KillLog[0], want)
	}
}
