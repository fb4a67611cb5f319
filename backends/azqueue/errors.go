package azqueue

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/sdkerr"
)

// errorCode classifies an error from the SDK or from this driver.
func errorCode(err error) errcode.Code {
	if c := errcode.Of(err); c != errcode.Unknown {
		return c
	}
	switch {
	case queueerror.HasCode(err, queueerror.PopReceiptMismatch, queueerror.MessageNotFound):
		return errcode.LockLost
	case queueerror.HasCode(err, queueerror.QueueNotFound, queueerror.ResourceNotFound):
		return errcode.NotFound
	case queueerror.HasCode(err, queueerror.MessageTooLarge, queueerror.RequestBodyTooLarge):
		return errcode.TooLarge
	case queueerror.HasCode(err, queueerror.QueueAlreadyExists):
		return errcode.AlreadyExists
	case queueerror.HasCode(err, queueerror.ServerBusy):
		return errcode.ResourceExhausted
	case queueerror.HasCode(err, queueerror.OperationTimedOut, queueerror.InternalError, queueerror.QueueBeingDeleted):
		return errcode.Unavailable
	case queueerror.HasCode(err, queueerror.AuthenticationFailed, queueerror.AuthorizationFailure,
		queueerror.AuthorizationPermissionMismatch, queueerror.InsufficientAccountPermissions,
		queueerror.AccountIsDisabled, queueerror.AuthorizationSourceIPMismatch):
		return errcode.PermissionDenied
	case queueerror.HasCode(err, queueerror.InvalidQueryParameterValue, queueerror.InvalidXMLDocument,
		queueerror.InvalidResourceName, queueerror.OutOfRangeInput, queueerror.OutOfRangeQueryParameterValue):
		return errcode.InvalidArgument
	}
	var authErr *azidentity.AuthenticationFailedError
	if errors.As(err, &authErr) {
		return errcode.PermissionDenied
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusConflict:
			return errcode.FailedPrecondition
		case http.StatusRequestEntityTooLarge:
			return errcode.TooLarge
		case http.StatusBadRequest:
			return errcode.InvalidArgument
		}
		if c := driver.CodeOfHTTPStatus(re.StatusCode); c != errcode.Unknown {
			return c
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return errcode.Unavailable
	}
	return errcode.Unknown
}

// wrap turns an SDK error into a *driver.Error whose message says what was
// being done; the code comes from errorCode. Messages never contain keys or
// SAS tokens: the SDK's errors carry neither, and queue URLs are shown
// without their query.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	code := errorCode(err)
	msg := fmt.Sprintf(format, args...)
	detail := err.Error()
	noCredential := sdkerr.NoCredential(detail)
	switch {
	case noCredential:
		msg += " (" + sdkerr.NoCredentialHint(EnvConnectionString) + ")"
	case code == errcode.PermissionDenied:
		msg += " (permission denied: check the connection string, or give the identity the \"Storage Queue Data Contributor\" role on the account)"
	case code == errcode.ResourceExhausted:
		msg += " (the storage account is throttling requests; retries were exhausted)"
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		// The SDK's own text spans many lines (request, headers, XML body).
		detail = fmt.Sprintf("HTTP %d %s", re.StatusCode, re.ErrorCode)
	} else {
		detail = sdkerr.OneLine(detail)
	}
	return &driver.Error{Code: code, Msg: msg + ": " + detail, Err: err}
}

// lockLost is the error for a lease that is no longer held.
func lockLost(messageID, why string) error {
	return &driver.Error{Code: errcode.LockLost, Msg: fmt.Sprintf("lease on message %s lost: %s", messageID, why)}
}
