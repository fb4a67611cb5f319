package sqlite

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

// TestDeleteResults: DeleteResults deletes every generation's copy of a
// task's record (so an older one does not show again), for canonical IDs
// (stored as keys) and plain ones alike, counts each task once, leaves
// other tasks' records, and deletes nothing more when repeated.
func TestDeleteResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id string
	}{
		{"canonical ID", canon(41)},
		{"plain ID", "plain-id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "")
			keep := canon(42)
			if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec(tt.id, driver.ResultDeadLettered, time.Hour), rec(keep, driver.ResultSucceeded, time.Hour)}); err != nil {
				t.Fatal(err)
			}
			b.nextGeneration(t)
			if err := b.drv.PutResults(b.ctx, []*driver.ResultRecord{rec(tt.id, driver.ResultSucceeded, time.Hour)}); err != nil {
				t.Fatal(err)
			}
			n, err := b.drv.DeleteResults(b.ctx, []string{tt.id, "no-such-task"})
			if err != nil || n != 1 {
				t.Fatalf("DeleteResults = %d, %v; want 1", n, err)
			}
			if s := states(b.results(t, tt.id, keep)); s[0] != "-" || s[1] != "succeeded" {
				t.Fatalf("states after the delete = %v; want the deleted task's none (no older copy showing) and the other's kept", s)
			}
			var left int
			if err := b.drv.db.QueryRowContext(b.ctx, `SELECT COUNT(*) FROM jobq_results WHERE queue = 'default' AND task_id = ?`, taskKey(tt.id)).Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Fatalf("%d rows of the task left; want every generation's deleted", left)
			}
			if n, err := b.drv.DeleteResults(b.ctx, []string{tt.id}); err != nil || n != 0 {
				t.Fatalf("repeated DeleteResults = %d, %v; want 0", n, err)
			}
		})
	}
}
