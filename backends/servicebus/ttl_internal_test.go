package servicebus

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	emu "github.com/jobq/jobq/emulators/servicebus"
	"github.com/jobq/jobq/errcode"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWarnsOfExpiringQueue: Service Bus drops messages older than the
// queue's default time-to-live, so opening a queue whose TTL is under a
// year warns that tasks may be lost; one with Azure's default (never)
// does not.
func TestWarnsOfExpiringQueue(t *testing.T) {
	t.Parallel()
	e := emu.Start(t, emu.Options{LockDuration: 5 * time.Second})
	ctx := context.Background()
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	adm, err := admin.NewClientFromConnectionString(e.ConnectionString(), &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: e.AdminTransport()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		queue string
		ttl   *string
		warn  bool
	}{
		{"hd-ttl-day", to("P1D"), true},
		{"hd-ttl-never", nil, false},
	} {
		if _, err := adm.CreateQueue(ctx, tc.queue, &admin.CreateQueueOptions{Properties: &admin.QueueProperties{DefaultMessageTimeToLive: tc.ttl}}); err != nil {
			t.Fatalf("%s: create: %v", tc.queue, err)
		}
		var logs syncBuffer
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

func to(s string) *string { return &s }

// TestRefusesSessionQueue: jobq does not use sessions, and a receiver
// without one cannot take messages from a queue that requires them, so
// opening such a queue is refused and says why.
func TestRefusesSessionQueue(t *testing.T) {
	t.Parallel()
	e := emu.Start(t, emu.Options{LockDuration: 5 * time.Second})
	ctx := context.Background()
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	adm, err := admin.NewClientFromConnectionString(e.ConnectionString(), &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: e.AdminTransport()}})
	if err != nil {
		t.Fatal(err)
	}
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
