package driver

import "context"

// TaskFinder is implemented by drivers that can tell, by task ID, which
// tasks are queued, delayed or running (live messages, not dead letters
// and not held ones). A push with dependencies reads it to refuse a
// parent ID that no task has: a parent is known when it is held
// (HeldStore.HeldOf), live (FindTasks) or has a result record. A driver
// that declares Dependencies Native implements it; it is one short read
// of the index its Dedup already keeps.
type TaskFinder interface {
	// FindTasks returns those of ids that are the task IDs of live
	// messages (ready, delayed or in flight), in any order, each once.
	FindTasks(ctx context.Context, ids []string) ([]string, error)
}
