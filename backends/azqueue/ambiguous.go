package azqueue

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue/queueerror"

	"github.com/jobq/jobq/driver"
)

// A request whose response is lost may still have been applied by the
// service: a 500 OperationTimedOut, a 503 other than ServerBusy, a connection
// reset after the request was sent. The SDK's retry policy then sends the
// request again, and for a request that names a pop receipt (Update
// Message, Delete Message) the retry fails with 404 MessageNotFound or
// 400 PopReceiptMismatch because the first attempt already deleted the
// message or changed its receipt. Such a "lease lost" is not evidence that
// another receiver has the message, and undoing work on the strength of it
// can lose a task. The driver therefore asks, for every request on a
// claim, whether any attempt ended without a clear answer (an ambiguous
// outcome), and treats a lost lease after one as "probably applied by us".

// outcome records, across the SDK's attempts of one call, whether any of
// them ended ambiguously.
type outcome struct{ ambiguous atomic.Bool }

type outcomeKey struct{}

// track returns a context whose requests record their ambiguity in the
// returned outcome.
func track(ctx context.Context) (context.Context, *outcome) {
	o := &outcome{}
	return context.WithValue(ctx, outcomeKey{}, o), o
}

// ambiguityPolicy is a per-attempt pipeline policy that marks the call's
// outcome ambiguous when an attempt got no answer or a server error, which
// may come after the service applied the request.
type ambiguityPolicy struct{}

// Do implements policy.Policy.
func (ambiguityPolicy) Do(req *policy.Request) (*http.Response, error) {
	resp, err := req.Next()
	if o, ok := req.Raw().Context().Value(outcomeKey{}).(*outcome); ok && unanswered(resp, err) {
		o.ambiguous.Store(true)
	}
	return resp, err
}

// unanswered reports whether an attempt's result leaves open whether the
// service applied the request. A request that never left (no connection)
// was not applied, nor was a throttled one (503 ServerBusy).
func unanswered(resp *http.Response, err error) bool {
	if err != nil {
		return !driver.Unsent(err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("x-ms-error-code") == string(queueerror.ServerBusy) {
		return false
	}
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout
}
