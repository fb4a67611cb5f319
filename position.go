package jobq

import (
	"context"
	"time"

	"github.com/jobq/jobq/driver"
)

// readyAhead counts the ready tasks before a push that asked for positions
// (PushOptions.Position), on backends whose counts are exact; -1 when not
// asked, not exact, or the count failed (positions are a hint: a push does
// not fail for want of one).
func (q *Queue) readyAhead(ctx context.Context, opts PushOptions) int64 {
	if !opts.Position || q.caps.Level(driver.ExactCount) != driver.Native {
		return -1
	}
	st, err := q.drv.Stats(ctx)
	if err != nil || !st.Known.Ready {
		q.log.Debug("jobq: could not count the ready tasks for push positions", "error", err)
		return -1
	}
	return st.Ready
}

// positions sets the Position of each pushed task: ahead plus the ready,
// new tasks of the batch before it; -1 for a delayed or duplicate task, and
// for all when ahead is -1.
func positions(res []PushResult, msgs []*driver.Message, ahead int64) {
	now := time.Now()
	for i := range res {
		res[i].Position = -1
		if ahead < 0 || res[i].Duplicate || res[i].ID == "" || msgs[i].NotBefore.After(now) {
			continue
		}
		res[i].Position = ahead
		ahead++
	}
}
