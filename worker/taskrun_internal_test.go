package worker

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// TestTaskRunHoldsTheTaskState: what the worker keeps for a task (its
// logger, lease renewal state, handler ticket, attempt and backlog place)
// lives in the task's taskRun, so that taking these steps allocates
// nothing when a handler is free (a ticket that waits for one has a
// channel of its own).
func TestTaskRunHoldsTheTaskState(t *testing.T) {
	w := &Worker{o: Options{Visibility: time.Minute}}
	keeper := newLeaseKeeper(w)
	handlers := newHandlerQueue(1)
	unsettled := newBacklog(1)
	base := slog.New(slog.DiscardHandler)
	env := &jobq.Envelope{Task: &jobq.Task{ID: "t-1"}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var tr taskRun
	if n := testing.AllocsPerRun(100, func() {
		log := tr.log.init(base, env.Task.ID)
		keeper.hold(ctx, cancel, &tr.lease, env, log)
		keeper.release(env)
		handlers.join(&tr.ticket)
		tr.ticket.release()
		w.recordInto(&tr.attempt, env, time.Time{}, jobq.OutcomeSuccess, nil)
		if unsettled.admit(&tr.settling, time.Now()) {
			unsettled.done(&tr.settling)
		}
	}); n != 0 {
		t.Errorf("a task's steps took %v allocations, want 0", n)
	}
	if len(keeper.held) != 0 || handlers.free != 1 || unsettled.n != 0 {
		t.Errorf("after the steps: %d leases held, %d handlers free, %d tasks in the backlog; want 0, 1, 0",
			len(keeper.held), handlers.free, unsettled.n)
	}
}
