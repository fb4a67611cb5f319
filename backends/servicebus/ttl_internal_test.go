package servicebus

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
)

// TestWarnsOfExpiringQueue: Service Bus drops messages older than the
// queue's default time-to-live, so opening a queue whose TTL is under a
// year warns that tasks may be lost; one with Azure's default (never)
// does not.
func TestWarnsOfExpiringQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, adm := startEmulator(t)
	for _, tc := range []struct {
		queue string
		ttl   *string
		warn  bool
	}{
		{"hd-ttl-day", to.Ptr("P1D"), true},
		{"hd-ttl-never", nil, false},
	} {
		if _, err := adm.CreateQueue(ctx, tc.queue, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{DefaultMessageTimeToLive: tc.ttl}}); err != nil {
			t.Fatalf("%s: create: %v", tc.queue, err)
		}
		var logs syncbuf.Buffer
		d, err := New(ctx, client, adm, Options{Queue: tc.queue, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("%s: open: %v", tc.queue, err)
		}
		_ = d.Close()
		if got := strings.Contains(logs.String(), "default time-to-live"); got != tc.warn {
			t.Errorf("%s: warned of the queue's TTL: %v, want %v; log:\n%s", tc.queue, got, tc.warn, logs.String())
		}
	}
}

// TestRefusesSessionQueue: jobq does not use sessions, and a receiver
// without one cannot take messages from a queue that requires them, so
// opening such a queue is refused and says why.
func TestRefusesSessionQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, adm := startEmulator(t)
	yes := true
	if _, err := adm.CreateQueue(ctx, "hd-sessions", &admin.CreateQueueOptions{Properties: &admin.QueueProperties{RequiresSession: &yes}}); err != nil {
		t.Fatal(err)
	}
	d, err := New(ctx, client, adm, Options{Queue: "hd-sessions"})
	if err == nil {
		_ = d.Close()
		t.Fatal("opened a queue that requires sessions")
	}
	if errorCode(err) != errcode.FailedPrecondition || !strings.Contains(err.Error(), "sessions") {
		t.Errorf("open = %v (%v), want FailedPrecondition naming sessions", err, errorCode(err))
	}
}
