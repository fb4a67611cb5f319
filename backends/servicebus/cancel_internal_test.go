package servicebus

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestCancelScheduledSkipsMissing: Service Bus refuses a cancel that names
// a sequence number no longer scheduled (it came due, or was canceled), so
// cancelScheduled (Clear) cancels the others one by one and counts only
// those it canceled.
func TestCancelScheduledSkipsMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client, _ := startEmulator(t)
	d := openDriver(t, client, "hd-cancel")
	schedule := func(at time.Time) int64 {
		t.Helper()
		seqs, err := d.sender.ScheduleMessages(ctx, []*azservicebus.Message{{Body: []byte("x")}}, at, nil)
		if err != nil || len(seqs) != 1 {
			t.Fatalf("schedule: %v %v", seqs, err)
		}
		return seqs[0]
	}
	for _, tc := range []struct {
		name    string
		missing []int64 // sequence numbers no longer scheduled
	}{
		{"none missing", nil},
		{"one came due", []int64{schedule(time.Now().Add(-time.Minute))}},
		{"never sent", []int64{1 << 40}},
	} {
		future := []int64{schedule(time.Now().Add(time.Hour)), schedule(time.Now().Add(time.Hour))}
		n, err := d.cancelScheduled(ctx, append(append([]int64{}, future...), tc.missing...))
		if err != nil || n != int64(len(future)) {
			t.Errorf("%s: cancelScheduled = %d, %v; want %d, nil", tc.name, n, err, len(future))
		}
		for _, seq := range future {
			if peeked, err := d.recv.PeekMessages(ctx, 1, &azservicebus.PeekMessagesOptions{FromSequenceNumber: &seq}); err != nil || len(peeked) > 0 && *peeked[0].SequenceNumber == seq {
				t.Errorf("%s: scheduled message %d is still there (%v)", tc.name, seq, err)
			}
		}
	}
}
