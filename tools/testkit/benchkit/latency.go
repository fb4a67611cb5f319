package benchkit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// PickupLatency measures, b.N times, the time from the start of a Push on
// producer to a receiver on consumer holding the task, and reports the
// median and the 99th percentile as ms-p50 and ms-p99. The receiver waits on
// an empty queue with Receive; idle reports whether it is blocked waiting
// again (the backend knows how to tell), so that each push finds it waiting.
// producer and consumer may be the same Queue. consumer is closed at the
// end to stop the receiver.
func PickupLatency(b *testing.B, consumer, producer *jobq.Queue, idle func() bool) {
	ctx := context.Background()
	got := make(chan time.Time)
	go func() {
		for {
			env, err := consumer.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 10 * time.Second})
			if err != nil {
				close(got)
				return
			}
			got <- time.Now()
			_ = env.Complete(ctx)
		}
	}()
	tasks := Tasks(b.N)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for _, t := range tasks {
		for !idle() {
			time.Sleep(50 * time.Microsecond)
		}
		start := time.Now()
		if _, err := producer.Push(ctx, t); err != nil {
			b.Fatal(err)
		}
		at, ok := <-got
		if !ok {
			b.Fatal("receiver stopped")
		}
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	_ = consumer.Close() // ends the receiver
	reportPercentiles(b, lat)
}

// reportPercentiles reports the median and 99th percentile of lat in
// milliseconds as ms-p50 and ms-p99; it sorts lat.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
}
