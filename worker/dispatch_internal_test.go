package worker

import (
	"fmt"
	"testing"
)

func TestReceiversDefault(t *testing.T) {
	t.Parallel()
	tests := []struct{ concurrency, receivers, want, share int }{
		{0, 0, 1, 1},
		{1, 0, 1, 1},
		{1, 4, 1, 1},
		{2, 0, 2, 1},
		{3, 0, 2, 2},
		{16, 0, 2, 8},
		{15, 0, 2, 8},
		{16, 1, 1, 16},
		{16, 4, 4, 4},
		{3, 9, 3, 1},
		{8, -1, 2, 4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d", tt.concurrency, tt.receivers), func(t *testing.T) {
			t.Parallel()
			o := Options{Concurrency: tt.concurrency, Receivers: tt.receivers}.withDefaults()
			if o.Receivers != tt.want {
				t.Errorf("Receivers = %d; want %d", o.Receivers, tt.want)
			}
			d := newDispatcher(&Worker{o: o})
			defer d.cancel()
			if d.share != tt.share {
				t.Errorf("share = %d; want %d", d.share, tt.share)
			}
		})
	}
}
