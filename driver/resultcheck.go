package driver

import "github.com/jobq/jobq/errcode"

// CheckResultRecord reports what is wrong with a record a driver is asked
// to store (an InvalidArgument error), or nil: it needs a task ID, a known
// state and an expiry time. Drivers call it before they store a record.
func CheckResultRecord(r *ResultRecord) error {
	switch {
	case r == nil:
		return Errorf(errcode.InvalidArgument, "result record is nil")
	case r.ID == "":
		return Errorf(errcode.InvalidArgument, "result record has no task ID")
	case !r.State.Final() && r.State != ResultCancelRequested:
		return Errorf(errcode.InvalidArgument, "result record of task %q has state %q; use succeeded, dead-lettered, cancelled or cancel-requested", r.ID, r.State)
	case r.ExpiresAt.IsZero():
		return Errorf(errcode.InvalidArgument, "result record of task %q has no expiry time (ExpiresAt)", r.ID)
	}
	return nil
}
