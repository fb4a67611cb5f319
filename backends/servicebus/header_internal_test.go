package servicebus

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"

	"github.com/jobq/jobq/driver"
)

// TestDeadLetterWithinHeaderLimit: Service Bus refuses a message whose
// properties come to more than 64 KB, also when dead-lettering adds the
// reason and description to them. A message that arrives with large
// properties (another producer's) is still dead-lettered: the texts are cut
// to the room left.
func TestDeadLetterWithinHeaderLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, _ := startEmulator(t)
	d := openDriver(t, client, "hd-header")
	long := strings.Repeat("€", MaxDeadLetterTextLen) // 3 bytes a character
	for _, tc := range []struct {
		name  string
		props map[string]any
	}{
		{"no foreign properties", nil},
		{"30 KB of properties", map[string]any{"a": strings.Repeat("a", 30*1024)}},
		{"60 KB of properties", map[string]any{"a": strings.Repeat("a", 30*1024), "b": strings.Repeat("b", 30*1024)}},
	} {
		if err := d.sender.SendMessage(ctx, &azservicebus.Message{Body: []byte(tc.name), ApplicationProperties: tc.props}, nil); err != nil {
			t.Fatalf("%s: send: %v", tc.name, err)
		}
		got, err := d.Receive(ctx, driver.ReceiveParams{Max: 1, Visibility: 5 * time.Second, Wait: 10 * time.Second})
		if err != nil || len(got) != 1 || string(got[0].Body) != tc.name {
			t.Fatalf("%s: receive: %v %v", tc.name, got, err)
		}
		if errs := d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: got[0].Lease, Reason: long, Detail: long}}); len(errs) > 0 && errs[0] != nil {
			t.Errorf("%s: dead-letter with long texts: %v", tc.name, errs[0])
		}
	}
	dead, err := d.dead.PeekMessages(ctx, 10, &azservicebus.PeekMessagesOptions{FromSequenceNumber: new(int64)})
	if err != nil || len(dead) != 3 {
		t.Fatalf("%d dead letters (%v), want 3", len(dead), err)
	}
	for _, m := range dead {
		if m.DeadLetterReason == nil || !strings.HasPrefix(*m.DeadLetterReason, "€€€") {
			t.Errorf("dead letter %q has reason %.12q…, want the reason's start", m.Body, deref(m.DeadLetterReason))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
