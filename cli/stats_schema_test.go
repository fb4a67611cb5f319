package cli_test

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestStatsJSONSchema pins the field names `stats --json` prints on a live
// queue (docs/autoscaling.md documents them; autoscalers read them).
func TestStatsJSONSchema(t *testing.T) {
	t.Parallel()
	q := sqliteQueue(t)
	for _, args := range [][]string{
		{"policy", "set", "max-depth", "100"},
		{"policy", "set", "rate", "api=10/1m"},
		{"-q", "push", "--rate-limit-key", "api", "-c", "echo one"},
		{"-q", "push", "-c", "echo two"},
	} {
		if code, _, errOut := run(t, append([]string{q}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	tests := []struct {
		name       string
		args       []string
		wantFields []string
	}{
		{"no sample", []string{"--sample", "0"},
			[]string{"dead_lettered", "delayed", "in_flight", "keys", "max_depth", "ready", "size"}},
		{"sample", []string{"--sample", "50ms"},
			[]string{"dead_lettered", "delayed", "drain_eta_s", "drain_rate_per_s", "in_flight", "keys", "max_depth", "new_task_wait_s", "ready", "size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := run(t, append([]string{q, "stats", "--json"}, tt.args...)...)
			if code != 0 {
				t.Fatalf("stats --json: exit %d: %s", code, errOut)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("stats --json printed %q: %v", out, err)
			}
			var fields []string
			for k := range doc {
				fields = append(fields, k)
			}
			slices.Sort(fields)
			if !slices.Equal(fields, tt.wantFields) {
				t.Errorf("fields %v; want %v", fields, tt.wantFields)
			}
			var keys []map[string]json.RawMessage
			if err := json.Unmarshal(doc["keys"], &keys); err != nil || len(keys) != 1 {
				t.Fatalf("keys: %s (%v); want one key", doc["keys"], err)
			}
			var keyFields []string
			for k := range keys[0] {
				keyFields = append(keyFields, k)
			}
			slices.Sort(keyFields)
			if want := []string{"admitted_in_window", "in_flight", "key", "kind", "limit", "period_s", "rate_wait_s", "waiting"}; !slices.Equal(keyFields, want) {
				t.Errorf("key fields %v; want %v", keyFields, want)
			}
			if string(doc["ready"]) != "2" || string(doc["size"]) != "2" || string(doc["max_depth"]) != "100" {
				t.Errorf("ready %s, size %s, max_depth %s; want 2, 2, 100", doc["ready"], doc["size"], doc["max_depth"])
			}
		})
	}
}
