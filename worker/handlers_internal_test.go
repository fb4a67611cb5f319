package worker

import (
	"slices"
	"testing"
)

// TestHandlerQueueGrantsInClaimOrder: handlers go to tickets in the order
// they were taken, a withdrawn ticket is skipped, and releasing twice frees
// one handler only.
func TestHandlerQueueGrantsInClaimOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		handlers int
		tickets  int
		withdraw []int // tickets released before they hold a handler
		want     []int // tickets holding a handler, in grant order, after releasing each holder in turn
	}{
		{"one handler", 1, 4, nil, []int{0, 1, 2, 3}},
		{"two handlers", 2, 5, nil, []int{0, 1, 2, 3, 4}},
		{"withdrawn tickets are skipped", 1, 5, []int{1, 3}, []int{0, 2, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := newHandlerQueue(tt.handlers)
			tickets := make([]*handlerTicket, tt.tickets)
			for i := range tickets {
				tickets[i] = q.take()
			}
			for _, i := range tt.withdraw {
				tickets[i].release()
			}
			var got []int
			for len(got) < len(tt.want) {
				i := slices.IndexFunc(tickets, func(tk *handlerTicket) bool { return tk.held && !tk.done })
				if i < 0 {
					t.Fatalf("no ticket holds a handler after %v; want %v", got, tt.want)
				}
				got = append(got, i)
				tickets[i].release()
				tickets[i].release() // a second release is a no-op
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("granted %v; want %v", got, tt.want)
			}
			if q.free != tt.handlers || len(q.waiting) != 0 {
				t.Errorf("after all: %d free, %d waiting; want %d free, none waiting", q.free, len(q.waiting), tt.handlers)
			}
		})
	}
}
