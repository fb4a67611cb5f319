package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// TestDialTimeoutParameter: the dialer jobq builds honours dial_timeout as
// documented. dial_timeout=0 (no timeout) opens the queue; it failed every
// dial at once with "i/o timeout", since a net.Dialer takes go-redis's -1
// as a deadline already past.
func TestDialTimeoutParameter(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0", "-1", "10s"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			q, err := jobq.Open(t.Context(), newQueueURL(t, "")+"&dial_timeout="+v)
			if err != nil {
				t.Fatalf("open with dial_timeout=%s: %v", v, err)
			}
			q.Close()
		})
	}
}

// TestTLSToPlainServerEnds: rediss:// on a plain Redis server (which never
// answers the TLS handshake) ends in an error naming redis://, at go-redis's
// default dial timeout; the dialer jobq builds had none, so the open, and
// 'jobq QUEUE stats', waited forever. The bound below only tells a hang
// from an answer: the open takes 5 dials of 5 s.
func TestTLSToPlainServerEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the dial timeouts")
	}
	t.Parallel()
	u := newQueueURL(t, "")
	if !strings.HasPrefix(u, "redis://") {
		t.Skipf("JOBQ_TEST_REDIS_URL is not a plain redis:// URL")
	}
	u = "rediss://" + strings.TrimPrefix(u, "redis://")
	done := make(chan error, 1)
	go func() {
		q, err := jobq.Open(context.Background(), u)
		if err == nil {
			q.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "use redis://") {
			t.Fatalf("open of rediss:// on a plain server: %v; want an error naming redis://", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("open of rediss:// on a plain server did not end")
	}
}
