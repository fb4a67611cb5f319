package jobq_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestCodesMatchDriverErrors: errors.Is with an errcode.Code works on a
// driver error that reached the caller directly (an escape hatch), even
// wrapped, and only for its own code.
func TestCodesMatchDriverErrors(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("pushing: %w", driver.Errorf(errcode.ResourceExhausted, "queue is full"))
	tests := []struct {
		sentinel error
		want     bool
	}{
		{errcode.ResourceExhausted, true},
		{errcode.LockLost, false},
		{errcode.NotFound, false},
	}
	for _, tt := range tests {
		if got := errors.Is(err, tt.sentinel); got != tt.want {
			t.Errorf("errors.Is(%v, %v) = %v; want %v", err, tt.sentinel, got, tt.want)
		}
	}
}

// TestErrorIsRedacted: a library error never shows a credential, whatever
// the driver or SDK put in its message.
func TestErrorIsRedacted(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		&jobq.Error{Code: errcode.Unavailable, Op: "open", Msg: "cannot reach postgres://u:S3CRETpw@h/db"},
		&jobq.Error{Code: errcode.InvalidArgument, Err: errors.New("bad connection string AccountName=a;AccountKey=S3CRETpw")},
	} {
		if strings.Contains(err.Error(), "S3CRETpw") {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}

// TestSizeErrorNamesSize: Admin.Size reads the counts through Stats, and its
// errors said "jobq stats"; they name size.
func TestSizeErrorNamesSize(t *testing.T) {
	t.Parallel()
	q, err := jobq.Open(t.Context(), "mem://size-error")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = q.Admin().Size(t.Context())
	var e *jobq.Error
	if !errors.As(err, &e) || e.Op != "size" || !strings.HasPrefix(err.Error(), "jobq size") {
		t.Fatalf("Size on a closed queue: %v; want a *jobq.Error of op size", err)
	}
	if !errors.Is(err, errcode.FailedPrecondition) {
		t.Errorf("Size on a closed queue: %v; want code FailedPrecondition, as Stats gives", err)
	}
}
