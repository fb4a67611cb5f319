package postgres

import (
	"slices"
	"testing"
)

// TestJobqTables: the tables the grants check looks at are every table a
// schema step creates, and schema_migrations; results_rollup, made on
// demand, is not among them.
func TestJobqTables(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		table string
		want  bool
	}{
		{"schema_migrations", true},
		{"messages", true},
		{"dead_letters", true},
		{"held", true},
		{"results", true},
		{"workers", true},
		{"waiters", true},
		{"claim_cursors", true},
		{"results_rollup", false},
	} {
		if got := slices.Contains(jobqTables, tc.table); got != tc.want {
			t.Errorf("%s among jobq's tables: %v, want %v (tables: %v)", tc.table, got, tc.want, jobqTables)
		}
	}
}
