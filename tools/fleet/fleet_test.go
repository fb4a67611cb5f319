package main

import (
	"errors"
	"os"
	"testing"

	"github.com/jobq/jobq/tools/testkit/pgbouncer"
)

// TestFleetThroughPgBouncer runs a small fleet — 20 worker processes on
// one Postgres queue through PgBouncer in transaction mode with 5 server
// connections — and checks that every pushed task ran and none is left.
func TestFleetThroughPgBouncer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 20 worker processes")
	}
	server := os.Getenv("JOBQ_TEST_POSTGRES_URL")
	if server == "" {
		server = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	cfg, cleanup, err := setup(t.Context(), Options{Engine: "postgres", Server: server, Params: "poll=100ms",
		ServerConns: 5, Workers: 20, Handlers: 1, Tasks: 200})
	if errors.Is(err, pgbouncer.ErrNotInstalled) {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v; CI is set, so pgbouncer must be installed", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Lost != 0 || rep.Distinct != cfg.Tasks || rep.Left != 0 {
		t.Fatalf("fleet run: %s\nwant every one of %d tasks run and none left", rep, cfg.Tasks)
	}
	if rep.BusyConns > 5 {
		t.Errorf("the server had %d connections from the bouncer; its pool is 5", rep.BusyConns)
	}
	t.Logf("%s", rep)
}

// TestCount: the task log's runs are counted as distinct, duplicate and
// lost, and a line no task writes is an error.
func TestCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                            string
		log                             string
		ran, distinct, dups, lost, errs int
	}{
		{"all once", "0\n1\n2\n", 3, 3, 0, 0, 0},
		{"one twice one lost", "0\n2\n0\n", 3, 2, 1, 1, 0},
		{"stray line", "0\nx\n", 0, 0, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := t.TempDir() + "/runs.log"
			if err := os.WriteFile(p, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			rep := Report{Tasks: 3}
			err := count(p, &rep)
			if (err != nil) != (tc.errs > 0) {
				t.Fatalf("count = %v, want error %v", err, tc.errs > 0)
			}
			if err == nil && (rep.Ran != tc.ran || rep.Distinct != tc.distinct || rep.Duplicates != tc.dups || rep.Lost != tc.lost) {
				t.Errorf("count(%q) = ran %d distinct %d dups %d lost %d, want %d %d %d %d",
					tc.log, rep.Ran, rep.Distinct, rep.Duplicates, rep.Lost, tc.ran, tc.distinct, tc.dups, tc.lost)
			}
		})
	}
}
