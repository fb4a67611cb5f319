package cli

import (
	"strings"
	"testing"

	"github.com/jobq/jobq"
)

// TestWorkLineCounts: the work line agrees in number with its counts.
func TestWorkLineCounts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		w    jobq.GroupWork
		want string
	}{
		{jobq.GroupWork{Records: 1, Preemptions: 1}, "1 preemption (from 1 record)"},
		{jobq.GroupWork{Records: 2, Preemptions: 0}, "0 preemptions (from 2 records)"},
		{jobq.GroupWork{Records: 0, Preemptions: 3}, "3 preemptions (from 0 records)"},
	} {
		if got := workLine(&tt.w, tt.w.Records); !strings.HasSuffix(got, tt.want) {
			t.Errorf("workLine(%+v) = %q, want it to end with %q", tt.w, got, tt.want)
		}
	}
}
