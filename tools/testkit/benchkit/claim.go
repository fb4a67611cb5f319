package benchkit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Claimers times Handlers goroutines each calling claim until it returns 0
// (nothing left) or an error (which fails the benchmark), checks that the
// counts claim returned add up to b.N and reports tasks/s and CPU per task. claim takes and
// settles up to some number of the b.N pre-filled items and says how many;
// what names the action in the failure message ("claimed", "completed").
func Claimers(b *testing.B, what string, claim func() (int64, error)) {
	var done atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cm := MarkCPU()
	start := time.Now()
	for range Handlers {
		wg.Go(func() {
			for {
				n, err := claim()
				if err != nil {
					b.Error(err)
					return
				}
				if n == 0 {
					return
				}
				done.Add(n)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cm.Report(b, b.N)
	if done.Load() != int64(b.N) {
		b.Fatalf("%s %d, want %d", what, done.Load(), b.N)
	}
	ReportRate(b, b.N, elapsed)
}
