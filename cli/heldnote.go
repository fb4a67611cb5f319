package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
)

// heldNote says, for show and result, that task id is held (waiting for
// its parents or its group), with what it waits for and how to drop it;
// "" when it is not held (or the lookup failed: the caller's own message
// stands then).
func (a *app) heldNote(ctx context.Context, q *jobq.Queue, id string) string {
	h, err := hooks.HeldTask(ctx, q, id)
	if err != nil || h == nil {
		return ""
	}
	var waits []string
	if n := len(h.After); n > 0 {
		list := strings.Join(h.After[:min(n, 3)], ", ")
		if n > 3 {
			list += fmt.Sprintf(" and %d more", n-3)
		}
		waits = append(waits, "task "+list)
	}
	for _, g := range h.AfterGroups {
		waits = append(waits, "group "+g)
	}
	how := "succeed"
	if h.Require == driver.RequireEnded {
		how = "end, whatever the outcome"
	}
	return fmt.Sprintf("task %s is held: it waits for %s to %s, then it is queued (workers decide held tasks every few seconds); drop it with: %s",
		id, strings.Join(waits, " and "), how, a.commandHint("cancel "+id))
}
