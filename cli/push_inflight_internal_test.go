package cli

import (
	"path/filepath"
	"testing"

	"github.com/jobq/jobq"
)

// TestBatchesInFlight: push keeps one batch in flight on SQLite (one
// writer), pushInFlight elsewhere, and --num-workers wins over both.
func TestBatchesInFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		url  string
		flag int
		want int
	}{
		{"sqlite default", "sqlite://" + filepath.Join(dir, "a.db"), 0, 1},
		{"sqlite flag", "sqlite://" + filepath.Join(dir, "b.db"), 6, 6},
		{"mem default", "mem://inflight-default", 0, pushInFlight},
		{"mem flag", "mem://inflight-flag", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := jobq.Open(t.Context(), tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if got := batchesInFlight(q, tc.flag); got != tc.want {
				t.Errorf("batchesInFlight(%s, %d) = %d, want %d", tc.url, tc.flag, got, tc.want)
			}
		})
	}
}
