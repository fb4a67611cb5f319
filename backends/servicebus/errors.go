package servicebus

import (
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/go-amqp"

	"github.com/jobq/jobq/driver"
)

// ErrorCode implements driver.Driver.
func (d *Driver) ErrorCode(err error) driver.Code { return errorCode(err) }

func errorCode(err error) driver.Code {
	if c := driver.CodeOf(err); c != driver.Unknown {
		return c
	}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		switch sbErr.Code {
		case azservicebus.CodeLockLost:
			return driver.LockLost
		case azservicebus.CodeNotFound:
			return driver.NotFound
		case azservicebus.CodeUnauthorizedAccess:
			return driver.PermissionDenied
		case azservicebus.CodeConnectionLost, azservicebus.CodeTimeout:
			return driver.Unavailable
		case azservicebus.CodeClosed:
			return driver.FailedPrecondition
		}
	}
	if errors.Is(err, azservicebus.ErrMessageTooLarge) {
		return driver.TooLarge
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		switch amqpErr.Condition {
		case amqp.ErrCondMessageSizeExceeded:
			return driver.TooLarge
		case amqp.ErrCondNotFound:
			return driver.NotFound
		case amqp.ErrCondUnauthorizedAccess:
			return driver.PermissionDenied
		case amqp.ErrCondResourceLimitExceeded, "com.microsoft:server-busy":
			return driver.ResourceExhausted
		case "com.microsoft:message-lock-lost":
			return driver.LockLost
		}
	}
	var connErr *amqp.ConnError
	var linkErr *amqp.LinkError
	var sessErr *amqp.SessionError
	if errors.As(err, &connErr) || errors.As(err, &linkErr) || errors.As(err, &sessErr) {
		return driver.Unavailable
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode == http.StatusConflict {
			return driver.AlreadyExists
		}
		if c := driver.CodeOfHTTPStatus(re.StatusCode); c != driver.Unknown {
			return c
		}
	}
	return driver.Unknown
}

// fail wraps an SDK error with its code and the operation.
func (d *Driver) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	return &driver.Error{Code: errorCode(err), Msg: "servicebus " + op + " " + d.queueURL() + ": " + err.Error(), Err: err}
}

// lockLost is the error for a lease that is no longer held.
func (d *Driver) lockLost(op string) error {
	return driver.Errorf(driver.LockLost, "servicebus %s %s: the message's lock is no longer held (it expired, or the message was settled already)", op, d.queueURL())
}
