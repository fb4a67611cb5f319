package worker

import (
	"fmt"
	"testing"
)

func TestReceiversDefault(t *testing.T) {
	t.Parallel()
	tests := []struct{ concurrency, receivers, prefetch, want, share int }{
		{0, 0, 0, 2, 25}, // Concurrency 10, Prefetch 40
		{1, 0, 0, 2, 3},
		{1, 0, -1, 1, 1},
		{1, 4, 0, 4, 2},
		{2, 0, 0, 2, 5},
		{3, 0, 0, 2, 8},
		{16, 0, 0, 2, 40},
		{16, 0, -1, 2, 8},
		{15, 0, 0, 2, 38},
		{16, 1, 0, 1, 80},
		{16, 4, 0, 4, 20},
		{16, 4, 4, 4, 5},
		{3, 9, -1, 3, 1},
		{3, 9, 0, 9, 2},
		{8, -1, 0, 2, 20},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d/%d", tt.concurrency, tt.receivers, tt.prefetch), func(t *testing.T) {
			t.Parallel()
			o := Options{Concurrency: tt.concurrency, Receivers: tt.receivers, Prefetch: tt.prefetch}.withDefaults()
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
