package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDepthBench runs the benchmark at a small depth on each backend (the
// local Postgres and Redis, a temporary SQLite file): it pushes the whole
// backlog, drains every task and weighs the queue. It asserts no speed.
func TestDepthBench(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cfg := config{backend: backend, n: 20_000, window: 2_000, batch: 1_000, handlers: 16}
			var out bytes.Buffer
			res, err := measure(ctx, cfg, &out)
			t.Log("\n" + out.String())
			if err != nil {
				t.Fatal(err)
			}
			if res.drained != int64(cfg.n) {
				t.Errorf("drained %d tasks; want the %d pushed", res.drained, cfg.n)
			}
			if len(res.pushRates) != 10 {
				t.Errorf("%d push rates; want one per tenth of the backlog", len(res.pushRates))
			}
			if res.peak.queue() <= res.idle.queue() {
				t.Errorf("queue's storage %d with the backlog queued, %d without: the backlog weighs nothing", res.peak.queue(), res.idle.queue())
			}
			// Every task drained leaves a record, and the records are
			// weighed apart from the queue's storage.
			if res.afterDrain.count < int64(cfg.n) {
				t.Errorf("%d result records after draining %d tasks; want one per task", res.afterDrain.count, cfg.n)
			}
			// A no-op task's record holds its 32-digit ID, state, times and
			// worker: tens of bytes at least, and well under a page.
			if res.perRecord < 50 || res.perRecord > 4096 {
				t.Errorf("result records weigh %d bytes after the drain, %d before: %.0f bytes per record; want 50 to 4096",
					res.afterDrain.records, res.peak.records, res.perRecord)
			}
			if res.afterDrain.records > res.afterDrain.total {
				t.Errorf("result records weigh %d bytes, more than the %d of everything", res.afterDrain.records, res.afterDrain.total)
			}
			// The records are not counted as the queue's: its storage does
			// not grow over the drain (a tenth of the backlog's weight
			// allowed for maps and pages the engine adds meanwhile). SQLite's
			// WAL after the drain is left out: at this small depth its swing
			// of megabytes (how far it is from its next checkpoint) is about
			// the backlog's weight.
			if slack := (res.peak.queue() - res.idle.queue()) / 10; res.afterDrain.queue()-res.afterDrain.wal > res.peak.queue()+slack {
				t.Errorf("queue's storage %d after the drain (WAL %d of it), more than the %d with the backlog queued",
					res.afterDrain.queue(), res.afterDrain.wal, res.peak.queue())
			}
			for _, want := range []string{"bytes per queued task", "drain at depth", "size right after the drain", "bytes per result record"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("the report lacks %q", want)
				}
			}
		})
	}
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()
	ok := config{backend: "sqlite", n: 60, window: 20, batch: 10, handlers: 1}
	tests := []struct {
		name   string
		change func(*config)
		want   string // in the error; "" for none
	}{
		{"valid", func(*config) {}, ""},
		{"unknown backend", func(c *config) { c.backend = "mysql" }, `-backend "mysql"`},
		{"backlog under three windows", func(c *config) { c.n = 59 }, "three windows"},
		{"zero batch", func(c *config) { c.batch = 0 }, "-batch"},
		{"negative reclaim", func(c *config) { c.reclaim = -time.Second }, "-reclaim"},
	}
	for _, tt := range tests {
		c := ok
		tt.change(&c)
		err := c.check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v; want one naming %s", tt.name, err, tt.want)
		}
	}
}
