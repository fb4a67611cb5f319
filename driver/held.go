package driver

import (
	"context"
	"time"
)

// Held tasks are what dependencies (a task pushed with After or
// AfterGroups) and a group's step (a task to run when a group ends) are
// made of: a message the queue keeps beside its queued ones, unclaimable,
// until the portable layer decides, from the parents' result records and
// the groups' counters, that it may run (Release) or must be cancelled
// (Drop). The deciding is done by a sweep that every worker and
// `jobq QUEUE scheduler` runs off the task path, so a queue without held
// tasks pays nothing per task. Where Dedup is native, Push reports a held
// ID as a duplicate (stored, the task would run ahead of its parents, and
// again at its release), looking IDs up only while the queue holds a task.
//
// # Contract for implementers (Dependencies Native)
//
//   - Hold stores each HeldMessage, in one statement, transaction or
//     script for the batch. A message whose ID is already held, queued,
//     running or delayed is a duplicate (PushResult.Duplicate, nothing
//     stored), as Push reports one under Dedup. A held message with a
//     Group adds one to that group's Pushed counter in the same step, as
//     Push does: a group does not end while one of its tasks is held.
//   - ListHeld pages through every held message in ascending ID order:
//     cursor "" starts, the returned next cursor continues, "" ends. A
//     page is one short read.
//   - Release moves each named held message into the queue as Push would
//     store its Message (priority, delay, keys and group kept, the group
//     counted once: at Hold, not again), removing the held copy in the
//     same statement, transaction or script. It returns the IDs it moved;
//     an ID no longer held (released or dropped by another sweeper, or
//     never held) is left out without an error. So two sweepers releasing
//     the same message push it once.
//   - Drop removes each named held message without queueing it and
//     returns the IDs it removed, with the same rule for IDs no longer
//     held. A dropped message with a Group adds one to that group's
//     Cancelled counter in the same step. (The portable layer writes the
//     cancelled result record, naming the parent, before it drops.)
//   - HeldOf returns the held messages among ids (any order, missing ones
//     left out): the push-time check of a dependency's parent, and the
//     cancel of a held task, read it.
//
// A held message lives until it is released or dropped; the queue's
// retention does not expire it (a parent that never ends holds it: the
// user cancels it as any other task).
type HeldStore interface {
	Hold(ctx context.Context, msgs []*HeldMessage) ([]PushResult, error)
	ListHeld(ctx context.Context, cursor string, limit int) (held []*HeldMessage, next string, err error)
	Release(ctx context.Context, ids []string) (released []string, err error)
	Drop(ctx context.Context, ids []string) (dropped []string, err error)
	HeldOf(ctx context.Context, ids []string) ([]*HeldMessage, error)
}

// HeldMessage is a task held until its conditions hold.
type HeldMessage struct {
	// Message is what Release pushes. Its ID is the held task's ID.
	Message Message
	// After lists task IDs that must all succeed before the message runs.
	After []string
	// AfterGroups lists groups that must all end before the message runs.
	AfterGroups []string
	// Require says what the parents' ends must be; see HeldRequire.
	Require HeldRequire
	// Created is when it was held.
	Created time.Time
}

// HeldRequire says how a held task's parents must end for it to run.
type HeldRequire string

// The ways a held task's parents may be required to end.
const (
	// RequireSucceeded (the default, ""): every task named in After has
	// succeeded, and every group in AfterGroups ended with every task
	// succeeded. A parent dead-lettered or cancelled, or a group with a
	// task that was, cancels the held task with a reason naming it.
	RequireSucceeded HeldRequire = ""
	// RequireEnded: every parent ended, whatever the outcome (a group's
	// step with --then-if always).
	RequireEnded HeldRequire = "always"
)

// MaxAfter bounds how many parents (task IDs and groups together) one held
// task may name.
const MaxAfter = 10000
