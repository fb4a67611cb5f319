package servicebus

import (
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/sdkerr"
)

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) errcode.Code { return errorCode(err) }

// sdkCodes and amqpConditions classify the SDK's error codes and the
// broker's AMQP error conditions.
var (
	sdkCodes = map[azservicebus.Code]errcode.Code{
		azservicebus.CodeLockLost:           errcode.LockLost,
		azservicebus.CodeNotFound:           errcode.NotFound,
		azservicebus.CodeUnauthorizedAccess: errcode.PermissionDenied,
		azservicebus.CodeConnectionLost:     errcode.Unavailable,
		azservicebus.CodeTimeout:            errcode.Unavailable,
		azservicebus.CodeClosed:             errcode.FailedPrecondition,
	}
	amqpConditions = map[amqp.ErrCond]errcode.Code{
		amqp.ErrCondMessageSizeExceeded:   errcode.TooLarge,
		amqp.ErrCondNotFound:              errcode.NotFound,
		amqp.ErrCondUnauthorizedAccess:    errcode.PermissionDenied,
		amqp.ErrCondResourceLimitExceeded: errcode.ResourceExhausted,
		"com.microsoft:server-busy":       errcode.ResourceExhausted,
		"com.microsoft:message-lock-lost": errcode.LockLost,
	}
)

func errorCode(err error) errcode.Code {
	if c := errcode.Of(err); c != errcode.Unknown {
		return c
	}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		if c, ok := sdkCodes[sbErr.Code]; ok {
			return c
		}
	}
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return errcode.TooLarge
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		if c, ok := amqpConditions[amqpErr.Condition]; ok {
			return c
		}
	}
	return transportCode(err)
}

// transportCode classifies connection, link and session failures and the
// admin API's HTTP errors.
func transportCode(err error) errcode.Code {
	var connErr *amqp.ConnError
	var linkErr *amqp.LinkError
	var sessErr *amqp.SessionError
	if errors.As(err, &connErr) || errors.As(err, &linkErr) || errors.As(err, &sessErr) {
		return errcode.Unavailable
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode == http.StatusConflict {
			return errcode.AlreadyExists
		}
		return driver.CodeOfHTTPStatus(re.StatusCode)
	}
	return errcode.Unknown
}

// fail wraps an SDK error with its code and the operation.
func (d *Driver) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	detail := err.Error()
	if sdkerr.NoCredential(detail) {
		detail = "(" + sdkerr.NoCredentialHint(EnvConnectionString) + "): " + detail
	}
	return &driver.Error{Code: errorCode(err), Msg: "servicebus " + op + " " + d.queueURL() + ": " + sdkerr.OneLine(detail), Err: err}
}

// lockLost is the error for a lease that is no longer held.
func (d *Driver) lockLost(op string) error {
	return driver.Errorf(errcode.LockLost, "servicebus %s %s: the message's lock is no longer held (it expired, or the message was settled already)", op, d.queueURL())
}
