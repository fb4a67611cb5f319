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

// TaskGroupFinder is implemented by TaskFinder drivers that keep groups
// (Groups Native). Admin.Cancel reads it before RemoveTasks, so that the
// record of a queued task it removes names the task's group, as the record
// of a task that ran does: the records are built before the removal,
// which alone sees the messages.
type TaskGroupFinder interface {
	// FindTaskGroups returns the group of each of ids that is the task ID
	// of a live message (ready, delayed or in flight) in a group. IDs of
	// tasks without a group, or not live, are left out.
	FindTaskGroups(ctx context.Context, ids []string) (map[string]string, error)
}
