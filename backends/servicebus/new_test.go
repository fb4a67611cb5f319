package servicebus_test

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	"github.com/jobq/jobq"
	sb "github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/errcode"
)

// emulatorClients returns clients the test builds itself on the emulator
// this package started, closed when the test ends.
func emulatorClients(t *testing.T) (*azservicebus.Client, *admin.Client) {
	t.Helper()
	if env.emu == nil {
		t.Skip("needs the emulator: " + env.skip)
	}
	client, err := azservicebus.NewClientFromConnectionString(env.connStr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(ctxT(t)) })
	adm, err := admin.NewClientFromConnectionString(env.connStr, &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: env.emu.AdminTransport()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return client, adm
}

func freshName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "t-" + hex.EncodeToString(b)
}

// TestNewFromClient builds a queue from clients the test made, with and
// without the admin client, runs a task through it, and checks that the
// client still works after the queue closed.
func TestNewFromClient(t *testing.T) {
	t.Parallel()
	client, adm := emulatorClients(t)
	for _, tc := range []struct {
		name  string
		admin *admin.Client
	}{{"with admin", adm}, {"without admin", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			name := freshName()
			d, err := sb.New(ctx, client, tc.admin, sb.Options{Queue: name, Create: tc.admin != nil, LockDuration: lockDuration, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			q, err := newQueue(ctx, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := q.Push(ctx, &jobq.Task{Command: "echo from-client"}); err != nil {
				t.Fatalf("push: %v", err)
			}
			e := receive(t, q)
			if e.Task.Command != "echo from-client" {
				t.Errorf("received %q, want the pushed task", e.Task.Command)
			}
			if err := e.Complete(ctx); err != nil {
				t.Fatalf("complete: %v", err)
			}
			_, statsErr := q.Admin().Stats(ctx)
			if tc.admin == nil && errcode.Of(statsErr) != errcode.Unimplemented {
				t.Errorf("stats without an admin client: %v, want Unimplemented", statsErr)
			}
			if tc.admin != nil && statsErr != nil {
				t.Errorf("stats with the admin client: %v", statsErr)
			}
			if err := q.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			// The client is the test's: it still sends and receives.
			s, err := client.NewSender(name, nil)
			if err != nil {
				t.Fatalf("the client no longer works after the queue closed: %v", err)
			}
			defer s.Close(ctx)
			if err := s.SendMessage(ctx, &azservicebus.Message{Body: []byte("after")}, nil); err != nil {
				t.Fatalf("send with the client after the queue closed: %v", err)
			}
			r, err := client.NewReceiverForQueue(name, &azservicebus.ReceiverOptions{ReceiveMode: azservicebus.ReceiveModeReceiveAndDelete})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close(ctx)
			msgs, err := r.ReceiveMessages(ctx, 1, nil)
			if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "after" {
				t.Fatalf("receive with the client after the queue closed: %v, %d messages", err, len(msgs))
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	// A client for a loopback address nothing listens on: none of these
	// cases may connect.
	client, err := azservicebus.NewClientFromConnectionString("Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=k;SharedAccessKey=v;UseDevelopmentEmulator=true", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(ctxT(t))
	for _, tc := range []struct {
		name   string
		client *azservicebus.Client
		opts   sb.Options
		want   string
	}{
		{"nil client", nil, sb.Options{Queue: "jobs"}, "Client is nil"},
		{"no queue", client, sb.Options{}, "no queue name"},
		{"bad queue", client, sb.Options{Queue: "$jobs"}, "invalid Service Bus queue name"},
		{"bad requeue", client, sb.Options{Queue: "jobs", Requeue: "later"}, "Options.Requeue"},
		{"short lock", client, sb.Options{Queue: "jobs", LockDuration: 1}, "Options.LockDuration"},
		{"negative max delivery", client, sb.Options{Queue: "jobs", MaxDeliveryCount: -1}, "Options.MaxDeliveryCount"},
		{"short dedup window", client, sb.Options{Queue: "jobs", DedupWindow: 1}, "Options.DedupWindow"},
		{"create without admin", client, sb.Options{Queue: "jobs", Create: true}, "needs the admin client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := sb.New(ctxT(t), tc.client, nil, tc.opts)
			if err == nil {
				d.Close()
				t.Fatal("no error")
			}
			if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want InvalidArgument mentioning %q", err, tc.want)
			}
		})
	}
}
