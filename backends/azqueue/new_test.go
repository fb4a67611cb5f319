package azqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	azq "github.com/jobq/jobq/backends/azqueue"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// freshName returns a queue name for this test and deletes the queue and
// its dead-letter queue when the test ends.
func freshName(t *testing.T, svc *azqueue.ServiceClient) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "jq-" + sanitize(t.Name(), 30) + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx := t.Context()
		_, _ = svc.DeleteQueue(ctx, name, nil)
		_, _ = svc.DeleteQueue(ctx, name+azq.FailedSuffix, nil)
	})
	return name
}

// TestNewFromClient builds a queue from a service client the test made,
// runs a task through it, and checks that closing the queue leaves the
// client working.
func TestNewFromClient(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := freshName(t, svc)
	d, err := azq.New(ctx, svc, azq.Options{Queue: name, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if d.QueueName() != name {
		t.Errorf("QueueName() = %q, want %q", d.QueueName(), name)
	}
	q, err := newQueue(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, shell("echo from-client")); err != nil {
		t.Fatalf("push: %v", err)
	}
	e := receive(t, q, time.Minute)
	if e.Task.Command != "echo from-client" {
		t.Errorf("received %q, want the pushed task", e.Task.Command)
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// The client is the test's: it still works, and the queue is empty.
	props, err := svc.NewQueueClient(name).GetProperties(ctx, nil)
	if err != nil {
		t.Fatalf("the client no longer works after the queue closed: %v", err)
	}
	if n := props.ApproximateMessagesCount; n == nil || *n != 0 {
		t.Errorf("messages left after complete = %v, want 0", n)
	}
	// The dead-letter queue was created next to the queue.
	if _, err := svc.NewQueueClient(name+azq.FailedSuffix).GetProperties(ctx, nil); err != nil {
		t.Errorf("dead-letter queue: %v", err)
	}
}

// TestNewNoCreate: with NoCreate a missing queue is reported by the first
// call, not created.
func TestNewNoCreate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	name := freshName(t, svc)
	d, err := azq.New(ctx, svc, azq.Options{Queue: name, NoCreate: true})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close()
	_, err = d.Push(ctx, []*driver.Message{{ID: "a", Body: []byte("{}")}})
	if errcode.Of(err) != errcode.NotFound {
		t.Errorf("push to a queue NoCreate did not create: %v, want NotFound", err)
	}
}

// fakeCredential fails if asked for a token: the checks below must fail
// before any request.
type fakeCredential struct{ t *testing.T }

func (c fakeCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	c.t.Error("a token was requested")
	return azcore.AccessToken{}, errors.New("no token")
}

func TestNewRejectsBadArguments(t *testing.T) {
	t.Parallel()
	svc, err := azqueue.NewServiceClientFromConnectionString(connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	cred := fakeCredential{t}
	for _, tc := range []struct {
		name, want string
		open       func() (*azq.Driver, error)
	}{
		{"nil client", "ServiceClient is nil", func() (*azq.Driver, error) { return azq.New(t.Context(), nil, azq.Options{Queue: "jobs"}) }},
		{"no queue", "no queue name", func() (*azq.Driver, error) { return azq.New(t.Context(), svc, azq.Options{}) }},
		{"bad queue", "invalid queue name", func() (*azq.Driver, error) { return azq.New(t.Context(), svc, azq.Options{Queue: "Jobs_1"}) }},
		{"poll max below min", "PollMax", func() (*azq.Driver, error) {
			return azq.New(t.Context(), svc, azq.Options{Queue: "jobs", PollMin: time.Second, PollMax: time.Millisecond})
		}},
		{"nil credential", "credential is nil", func() (*azq.Driver, error) {
			return azq.NewFromCredential(t.Context(), "https://127.0.0.1:1/", nil, azq.Options{Queue: "jobs"})
		}},
		{"service URL with query", "service URL", func() (*azq.Driver, error) {
			return azq.NewFromCredential(t.Context(), "https://127.0.0.1:1/?sig=x", cred, azq.Options{Queue: "jobs"})
		}},
		{"service URL not http", "service URL", func() (*azq.Driver, error) {
			return azq.NewFromCredential(t.Context(), "ftp://127.0.0.1/", cred, azq.Options{Queue: "jobs"})
		}},
		{"credential with bad queue", "invalid queue name", func() (*azq.Driver, error) {
			return azq.NewFromCredential(t.Context(), "https://127.0.0.1:1/", cred, azq.Options{Queue: "x"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := tc.open()
			if err == nil {
				d.Close()
				t.Fatal("no error")
			}
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v (code %v), want InvalidArgument mentioning %q", err, errcode.Of(err), tc.want)
			}
		})
	}
}
