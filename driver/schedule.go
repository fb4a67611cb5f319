package driver

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"time"

	"github.com/jobq/jobq/errcode"
)

// Recurring schedules are queue state kept in the PolicyStore as two
// policies per schedule:
//
//   - a SchedulePolicy whose Key is the encoded ScheduleSpec (name, cron
//     expression, time zone, missed-run policy, the task) and whose Limit
//     is when it was added, in Unix milliseconds; it never changes;
//   - a ScheduleFiredPolicy whose Key is the schedule's name and whose
//     Limit says the last slot claimed and whether its task was pushed
//     (see FiredState). Schedulers change it with PolicySwapper.SwapPolicy
//     where the store has it, which is what makes a slot fire once;
//   - while the schedule is paused, a SchedulePausedPolicy.
const (
	// SchedulePolicy is a recurring schedule's definition; see
	// ScheduleSpec.Policy. Drivers store it as any other policy.
	SchedulePolicy PolicyKind = "schedule"
	// ScheduleFiredPolicy is a recurring schedule's firing state; see
	// FiredState.Policy. Drivers store it as any other policy, and swap it
	// atomically when they implement PolicySwapper.
	ScheduleFiredPolicy PolicyKind = "schedule-fired"
	// SchedulePausedPolicy marks a schedule paused: Key is its name and
	// Limit when it was paused, in Unix milliseconds. Drivers store it as
	// any other policy.
	SchedulePausedPolicy PolicyKind = "schedule-paused"
)

// ScheduleRefresh is how often a worker or `jobq QUEUE scheduler` looks
// for due slots: a slot's task is pushed within about this long of its time.
const ScheduleRefresh = 2 * time.Second

// ScheduleClaimGrace is how long a claimed slot may stay unconfirmed (its
// task not known to be pushed) before another scheduler takes it over and
// pushes the task itself: the claiming scheduler may have died.
const ScheduleClaimGrace = 30 * time.Second

// MaxScheduleSpecLen bounds a schedule's encoded definition, which every
// engine keeps beside the queue's policies (Azure keeps them all in a few
// KiB of queue metadata).
const MaxScheduleSpecLen = 2048

// maxScheduleNameLen bounds a schedule's name.
const maxScheduleNameLen = 100

// MissedPolicy says what a schedule does about slots that passed while no
// worker or scheduler fired them.
type MissedPolicy string

// The missed-run policies.
const (
	// MissedSkip fires a slot only while it is due (within
	// ScheduleLateness of its time); slots missed while nothing ran are
	// skipped. The default.
	MissedSkip MissedPolicy = "skip"
	// MissedOnce fires one catch-up run (for the latest missed slot) when
	// slots were missed while nothing ran.
	MissedOnce MissedPolicy = "once"
)

// ScheduleLateness is how long after its time a slot still counts as due
// under MissedSkip.
const ScheduleLateness = time.Minute

// ParseMissed reads skip or once; the empty string is skip.
func ParseMissed(s string) (MissedPolicy, error) {
	switch MissedPolicy(s) {
	case "", MissedSkip:
		return MissedSkip, nil
	case MissedOnce:
		return MissedOnce, nil
	}
	return "", Errorf(errcode.InvalidArgument, "missed-run policy %q: use skip (fire only slots due now) or once (one catch-up run for missed slots)", s)
}

// ScheduleSpec is a recurring schedule's definition.
type ScheduleSpec struct {
	// Name identifies the schedule in its queue.
	Name string
	// Cron is the standard five-field cron expression (or a descriptor
	// such as @hourly).
	Cron string
	// TimeZone is the IANA zone Cron is read in; empty means UTC.
	TimeZone string
	// Missed is the missed-run policy; empty means MissedSkip.
	Missed MissedPolicy
	// Task is the encoded task (wire body, without an ID) each slot pushes.
	Task []byte
	// Paused schedules fire nothing. It is kept as a SchedulePausedPolicy
	// of its own, not in the SchedulePolicy.
	Paused bool
	// Since is when the schedule was added: no slot before it fires.
	Since time.Time
}

// ValidateScheduleName returns an InvalidArgument error naming the problem
// when name cannot name a schedule.
func ValidateScheduleName(name string) error {
	if name == "" || len(name) > maxScheduleNameLen {
		return Errorf(errcode.InvalidArgument, "schedule name %q: give 1 to %d letters, digits, '-', '_' or '.'", name, maxScheduleNameLen)
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
		if !ok {
			return Errorf(errcode.InvalidArgument, "schedule name %q contains %q: use only letters, digits, '-', '_' or '.'", name, r)
		}
	}
	return nil
}

// Policy encodes the definition as the SchedulePolicy drivers store.
func (s ScheduleSpec) Policy() Policy {
	v := url.Values{}
	v.Set("name", s.Name)
	v.Set("cron", s.Cron)
	if s.TimeZone != "" {
		v.Set("tz", s.TimeZone)
	}
	if s.Missed != "" {
		v.Set("missed", string(s.Missed))
	}
	v.Set("task", base64.RawURLEncoding.EncodeToString(s.Task))
	return Policy{Kind: SchedulePolicy, Key: v.Encode(), Limit: max(s.Since.UnixMilli(), 1)}
}

// ParseScheduleSpec decodes a SchedulePolicy; an InvalidArgument error names
// what is wrong with it. It does not parse the cron expression.
func ParseScheduleSpec(p Policy) (ScheduleSpec, error) {
	if p.Kind != SchedulePolicy {
		return ScheduleSpec{}, Errorf(errcode.InvalidArgument, "policy %s is not a schedule", p.Kind)
	}
	if p.Limit <= 0 || p.Period != 0 {
		return ScheduleSpec{}, Errorf(errcode.InvalidArgument, "a schedule has the time it was added as Limit (Unix ms, positive) and no period (got %d, %v): build it with ScheduleSpec.Policy", p.Limit, p.Period)
	}
	if len(p.Key) > MaxScheduleSpecLen {
		return ScheduleSpec{}, Errorf(errcode.InvalidArgument, "schedule is %d bytes long encoded; keep it to %d (put a long command in a script and schedule the script)", len(p.Key), MaxScheduleSpecLen)
	}
	v, err := url.ParseQuery(p.Key)
	if err != nil {
		return ScheduleSpec{}, Errorf(errcode.InvalidArgument, "schedule %q is not the encoding ScheduleSpec.Policy writes: %w", p.Key, err)
	}
	task, err := base64.RawURLEncoding.DecodeString(v.Get("task"))
	if err != nil || len(task) == 0 {
		return ScheduleSpec{}, Errorf(errcode.InvalidArgument, "schedule %q has no readable task", v.Get("name"))
	}
	missed, err := ParseMissed(v.Get("missed"))
	if err != nil {
		return ScheduleSpec{}, err
	}
	s := ScheduleSpec{Name: v.Get("name"), Cron: v.Get("cron"), TimeZone: v.Get("tz"), Missed: missed,
		Task: task, Since: time.UnixMilli(p.Limit)}
	if err := ValidateScheduleName(s.Name); err != nil {
		return ScheduleSpec{}, err
	}
	if s.Cron == "" {
		return ScheduleSpec{}, Errorf(errcode.InvalidArgument, "schedule %q has no cron expression", s.Name)
	}
	return s, nil
}

// FiredState is a schedule's firing state: the last slot a scheduler
// claimed, whether that slot's task is known to be pushed, and when the
// claim was made.
type FiredState struct {
	// Name is the schedule's name.
	Name string
	// Slot is the last slot claimed, at millisecond resolution; the Unix
	// epoch before any.
	Slot time.Time
	// Pushed is true once the slot's task is known to be pushed; a claim
	// still false after ScheduleClaimGrace is taken over.
	Pushed bool
	// ClaimedAt is when the slot was claimed, by the claimer's clock; once
	// Pushed, a resume moves it to the time of the resume, so that the
	// slots passed while paused are not caught up.
	ClaimedAt time.Time
}

// Policy encodes the state as the ScheduleFiredPolicy drivers store: Limit
// is the slot in Unix milliseconds times two, plus one when pushed; Period
// is the claim time in Unix milliseconds (as a Duration).
func (f FiredState) Policy() Policy {
	limit := f.Slot.UnixMilli() * 2
	if f.Pushed {
		limit++
	}
	return Policy{Kind: ScheduleFiredPolicy, Key: f.Name, Limit: max(limit, 1), Period: time.Duration(max(f.ClaimedAt.UnixMilli(), 0)) * time.Millisecond}
}

// ParseFired decodes a ScheduleFiredPolicy.
func ParseFired(p Policy) (FiredState, error) {
	if p.Kind != ScheduleFiredPolicy {
		return FiredState{}, Errorf(errcode.InvalidArgument, "policy %s is not a schedule's firing state", p.Kind)
	}
	if p.Limit <= 0 || p.Period < 0 {
		return FiredState{}, Errorf(errcode.InvalidArgument, "a schedule's firing state has a positive Limit and no negative Period (got %d, %v): build it with FiredState.Policy", p.Limit, p.Period)
	}
	if err := ValidateScheduleName(p.Key); err != nil {
		return FiredState{}, err
	}
	return FiredState{Name: p.Key, Slot: time.UnixMilli(p.Limit / 2), Pushed: p.Limit%2 == 1, ClaimedAt: time.UnixMilli(p.Period.Milliseconds())}, nil
}

// SchedulePaused returns the SchedulePausedPolicy of the schedule name,
// paused at since.
func SchedulePaused(name string, since time.Time) Policy {
	return Policy{Kind: SchedulePausedPolicy, Key: name, Limit: max(since.UnixMilli(), 1)}
}

// validateSchedulePolicy checks a policy of the schedule kinds.
func validateSchedulePolicy(p Policy) error {
	switch p.Kind {
	case SchedulePolicy:
		_, err := ParseScheduleSpec(p)
		return err
	case SchedulePausedPolicy:
		if p.Limit <= 0 || p.Period != 0 {
			return Errorf(errcode.InvalidArgument, "a schedule's pause has its start as Limit (Unix ms, positive) and no period (got %d, %v): build it with SchedulePaused", p.Limit, p.Period)
		}
		return ValidateScheduleName(p.Key)
	}
	_, err := ParseFired(p)
	return err
}

// IsScheduleKind reports whether k is one of the kinds that hold schedules.
func IsScheduleKind(k PolicyKind) bool {
	return k == SchedulePolicy || k == ScheduleFiredPolicy || k == SchedulePausedPolicy
}

// PolicySwapper is implemented by PolicyStores that can replace a policy
// conditionally, in one atomic step of their engine. Schedulers use it to
// claim a schedule's slot (ScheduleFiredPolicy): with it, two schedulers
// never both claim one slot, and the Schedules feature is Native; a
// PolicyStore without it keeps schedules with a read then a write
// (Emulated).
type PolicySwapper interface {
	// SwapPolicy stores p (already validated) in place of the stored
	// policy of p's kind and key when that one's Limit is old, or when
	// there is none and old is 0, and reports whether it stored p. Two
	// calls that expect the same old value never both succeed.
	SwapPolicy(ctx context.Context, p Policy, old int64) (bool, error)
}

// ScheduleStatus is one schedule as Admin.Schedules lists it.
type ScheduleStatus struct {
	ScheduleSpec
	// LastFired is the last slot claimed; zero when none was.
	LastFired time.Time
	// Pending is true while LastFired's task is not known to be pushed
	// (its scheduler is pushing it, or died: another takes it over after
	// ScheduleClaimGrace).
	Pending bool
	// Next is the next slot after the time of the listing.
	Next time.Time
}

// ScheduleRun is one slot a scheduler fired.
type ScheduleRun struct {
	// Name is the schedule's name; Slot the slot's time.
	Name string
	Slot time.Time
	// TaskID is the slot's task ID (ScheduleTaskID).
	TaskID string
	// Duplicate is true when the queue reported the task as already
	// queued (or, for a take-over, already run): nothing new was pushed.
	Duplicate bool
	// TakeOver is true when the slot was claimed by a scheduler that did
	// not confirm its push within ScheduleClaimGrace.
	TakeOver bool
}

// ScheduleTaskID is the task ID of a schedule's slot: the MD5 hex of the
// schedule's name and the slot's time, so that every scheduler derives the
// same ID and the queue's dedup sees one task per slot.
func ScheduleTaskID(name string, slot time.Time) string {
	sum := md5.Sum([]byte("jobq-schedule\x00" + name + "\x00" + slot.UTC().Format(time.RFC3339Nano)))
	return hex.EncodeToString(sum[:])
}
