package driver

import (
	"context"
	"time"
)

// Groups name the tasks of one campaign (a sweep) so that it can be
// followed as a whole. A task's group is a label kept beside its body, like
// Message.TraceParent, never in it: the body (and so the task's ID) is the
// same with or without a group, and ai4s-jobq workers read it unchanged.
//
// # Contract for implementers (Groups Native)
//
//   - Push keeps Message.Group with the message and returns it as
//     Received.Group. In the same statement, transaction or script as the
//     insert, it adds one to the group's Pushed counter for each message
//     it stores (a duplicate that Dedup drops adds nothing), creating the
//     group at its first push.
//   - Complete, Requeue and DeadLetter add one to the counter named by
//     each request's Tally, in the same statement, transaction or script
//     as the settlement, and only if the settlement happens (a lease no
//     longer held adds nothing). The portable layer sets Tally from
//     Received.Group, so a request whose Tally is zero costs nothing.
//   - RemoveTasks (TaskRemover) adds one to Cancelled for each removed
//     message that has a group, in the same step.
//   - DeadLetter keeps the message's group with the dead letter, and
//     RequeueDead puts it back with the message it queues (returned as
//     Received.Group again) and gives that group one less DeadLettered
//     (the task is open again), in the same statement, transaction or
//     script as the requeue; a dead letter that is not queued again (one
//     merged into a queued message of the same task ID) takes nothing
//     off. A driver that cannot tell the group of a dead letter says so
//     in its Groups fallback.
//
// So a group has ended exactly when the settlement that brings
// Succeeded+DeadLettered+Cancelled up to Pushed commits: one settlement,
// decided in the engine, whatever the number of workers.
//
// A driver that declares Groups Emulated keeps the counts elsewhere (in
// the store its result records use) and says in Support.Fallback what is
// eventually consistent.

// GroupState names one counter of a group that a settlement adds to.
type GroupState string

// The counters a settlement adds to.
const (
	// GroupSucceeded: Complete of a task that succeeded.
	GroupSucceeded GroupState = "succeeded"
	// GroupFailed: Requeue of a failed attempt that will be retried (an
	// attempt, not a task: a task may fail several times).
	GroupFailed GroupState = "failed"
	// GroupDeadLettered: DeadLetter (the task's last failure, or poison).
	GroupDeadLettered GroupState = "dead-lettered"
	// GroupCancelled: a cancelled task, removed by RemoveTasks or settled
	// by Complete after its worker stopped it.
	GroupCancelled GroupState = "cancelled"
)

// GroupTally is what a settlement adds to its task's group: one to the
// counter State of group Group. The zero value adds nothing.
type GroupTally struct {
	Group string
	State GroupState
}

// GroupCounters are one group's counts.
type GroupCounters struct {
	// Name is the group's name.
	Name string
	// Pushed counts the tasks stored in the group (duplicates that dedup
	// dropped are not counted).
	Pushed int64
	// Succeeded, DeadLettered and Cancelled count the tasks that ended so;
	// Failed counts the failed attempts that were retried.
	Succeeded, Failed, DeadLettered, Cancelled int64
	// Queued, Delayed and Running split the open tasks (Pushed less those
	// that ended) by where they are now, when Split is true. A driver that
	// cannot count them leaves Split false and them zero.
	Queued, Delayed, Running int64
	Split                    bool
	// Created is the group's first push; Updated its last change.
	Created, Updated time.Time
}

// Ended is how many of the group's tasks ended (succeeded, dead-lettered
// or cancelled).
func (c *GroupCounters) Ended() int64 { return c.Succeeded + c.DeadLettered + c.Cancelled }

// Open is how many of the group's tasks have not ended yet.
func (c *GroupCounters) Open() int64 { return max(c.Pushed-c.Ended(), 0) }

// Done reports whether every task pushed in the group has ended.
func (c *GroupCounters) Done() bool { return c.Pushed > 0 && c.Ended() >= c.Pushed }

// GroupStore is implemented by drivers that declare Groups (see the
// contract above): it reads the counters.
type GroupStore interface {
	// GroupCounts returns the counters of group name, nil when the queue
	// has no such group (never pushed, or forgotten after the queue's
	// retention without a change).
	GroupCounts(ctx context.Context, name string) (*GroupCounters, error)
	// ListGroups returns up to limit groups, most recently changed first.
	ListGroups(ctx context.Context, limit int) ([]*GroupCounters, error)
}

// MaxGroupBytes bounds a group's name.
const MaxGroupBytes = 200

// GroupMemberLister is implemented by GroupStore drivers whose groups are
// lists of their members kept beside the result records (Groups
// Emulated), whose records then name no group: Admin.ExportResults reads
// a group's records through its members.
type GroupMemberLister interface {
	// GroupMembers returns the task IDs pushed in group name, each once;
	// none when the queue has no such group.
	GroupMembers(ctx context.Context, name string) ([]string, error)
}
