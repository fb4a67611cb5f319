package jobq_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/hooks"
)

func TestParsePolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind, spec string
		want       driver.Policy
		wantErr    string // substring of the error; "" means success
	}{
		{"concurrency", "gpu=2", driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu", Limit: 2}, ""},
		{"rate", "api=10/1m", driver.Policy{Kind: driver.RatePolicy, Key: "api", Limit: 10, Period: time.Minute}, ""},
		{"rate", "api=5/s", driver.Policy{Kind: driver.RatePolicy, Key: "api", Limit: 5, Period: time.Second}, ""},
		{"max-depth", "1000", driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 1000}, ""},
		{"concurrency", "gpu=0", driver.Policy{}, "must be positive"},
		{"concurrency", "gpu=-3", driver.Policy{}, "must be positive"},
		{"concurrency", "=3", driver.Policy{}, "KEY=LIMIT"},
		{"concurrency", "gpu=two", driver.Policy{}, "not a whole number"},
		{"rate", "api=10", driver.Policy{}, "no period"},
		{"rate", "api=10/0s", driver.Policy{}, "positive"},
		{"rate", "api=10/-1m", driver.Policy{}, "positive"},
		{"rate", "api=10/inf", driver.Policy{}, "not finite"},
		{"rate", "api=10/NaN", driver.Policy{}, "not finite"},
		{"rate", "api=10/soon", driver.Policy{}, "not a duration"},
		{"max-depth", "0", driver.Policy{}, "must be positive"},
		{"priority", "x=1", driver.Policy{}, "unknown policy kind"},
		{"rate", "api=10/1d", driver.Policy{Kind: driver.RatePolicy, Key: "api", Limit: 10, Period: 24 * time.Hour}, ""},
		{"rate", "api=10/15251w", driver.Policy{}, "too long"},
		{"concurrency", "gpu=99999999999999999999", driver.Policy{}, "out of range"},
		{"retention", "2d", driver.Retention(48 * time.Hour), ""},
		{"retention", "90s", driver.Retention(90 * time.Second), ""},
		{"retention", "500ms", driver.Policy{}, "out of range"},
		{"retention", "forever", driver.Policy{}, "not a duration"},
		{"retention", "0s", driver.Policy{}, "use 1s to 3650d"},
		{"retention", "-1h", driver.Policy{}, "use 1s to 3650d"},
		{"retention", "87601h", driver.Policy{}, "use 1s to 3650d"},
		{"max-depth", "99999999999999999999", driver.Policy{}, "from 1 to 9223372036854775807"},
		{"concurrency", "gpu =2", driver.Policy{}, "has spaces around it; write gpu=2"},
		{"retry-backoff", "10s,1h", driver.RetryBackoff(10*time.Second, time.Hour), ""},
		{"retry-backoff", "30s", driver.RetryBackoff(30*time.Second, 10*time.Minute), ""},
		{"retry-backoff", "1h,1m", driver.Policy{}, "longer than its cap"},
		{"retry-backoff", "0s,1m", driver.Policy{}, "zero"},
		// Azure handed such a key back as U+FFFD, so the policy never
		// matched its tasks.
		{"concurrency", "g\xffpu=2", driver.Policy{}, "not valid UTF-8"},
		{"rate", "\xc3=1/1s", driver.Policy{}, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+tt.spec, func(t *testing.T) {
			t.Parallel()
			got, err := hooks.ParsePolicy(tt.kind, tt.spec)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParsePolicy(%q, %q) = %+v, %v; want %+v", tt.kind, tt.spec, got, err, tt.want)
				}
				if again, err := hooks.ParsePolicy(tt.kind, specOf(got)); err != nil || again != got {
					t.Errorf("round trip of %v: %+v, %v", got, again, err)
				}
				return
			}
			if err == nil || errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParsePolicy(%q, %q) error = %v; want InvalidArgument containing %q", tt.kind, tt.spec, err, tt.wantErr)
			}
		})
	}
}

// specOf is the spec part of Policy.String.
func specOf(p driver.Policy) string {
	s := p.String()
	return s[len(p.Kind)+1:]
}

func TestQueueFullErrorIsResourceExhausted(t *testing.T) {
	t.Parallel()
	var err error = &jobq.Error{Code: errcode.ResourceExhausted, Err: &driver.QueueFullError{Depth: 5, MaxDepth: 5, Adding: 1}}
	var qf *driver.QueueFullError
	if !errors.As(err, &qf) || qf.Depth != 5 {
		t.Fatalf("errors.As did not find the depth in %v", err)
	}
}

// FuzzParsePolicy: any kind and spec parse to a valid policy or to an
// InvalidArgument error, never a panic; a parsed policy has a UTF-8 key and
// reads back the same from its String form.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range [][2]string{{"concurrency", "gpu=2"}, {"rate", "api=10/1m"}, {"rate", "k=1/s"}, {"max-depth", "10"},
		{"rate", "a=1/1e10"}, {"concurrency", "\xff=1"}, {"rate", "a=1/NaN"}, {"max-depth", "9223372036854775808"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, kind, spec string) {
		p, err := hooks.ParsePolicy(kind, spec)
		if err != nil {
			if errcode.Of(err) != errcode.InvalidArgument {
				t.Fatalf("ParsePolicy(%q, %q): %v is not InvalidArgument", kind, spec, err)
			}
			return
		}
		if err := p.Validate(); err != nil || !utf8.ValidString(p.Key) {
			t.Fatalf("ParsePolicy(%q, %q) = %+v, which is invalid: %v", kind, spec, p, err)
		}
		if again, err := hooks.ParsePolicy(string(p.Kind), specOf(p)); err != nil || again != p {
			t.Fatalf("ParsePolicy(%q, %q) = %+v; its String %q reads back as %+v, %v", kind, spec, p, p.String(), again, err)
		}
	})
}

// TestWaitForRoomStopWaiting: closing PushOptions.StopWaiting ends a
// WaitForRoom wait on a full queue with the refusal (ResourceExhausted,
// the depth in a QueueFullError), nothing stored, without waiting for
// room or for the context.
func TestWaitForRoomStopWaiting(t *testing.T) {
	t.Parallel()
	q, err := jobq.Open(t.Context(), sqliteURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Admin().SetPolicy(t.Context(), driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(t.Context(), &jobq.Task{Command: "echo first"}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	waited := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := q.PushBatch(t.Context(), []*jobq.Task{{Command: "echo second"}}, jobq.PushOptions{
			WaitForRoom: true, StopWaiting: stop,
			OnFull: func(*driver.QueueFullError, time.Duration) {
				select {
				case waited <- struct{}{}:
				default:
				}
			},
		})
		done <- err
	}()
	<-waited
	close(stop)
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("push still waiting for room a minute after StopWaiting was closed")
	}
	var qf *driver.QueueFullError
	if errcode.Of(err) != errcode.ResourceExhausted || !errors.As(err, &qf) || qf.MaxDepth != 1 || !strings.Contains(err.Error(), "stopped waiting for room") {
		t.Fatalf("push after StopWaiting closed = %v; want ResourceExhausted saying it stopped waiting, with the QueueFullError", err)
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 1 {
		t.Errorf("queue size after the stopped push: %d, %v; want 1 (the second task not stored)", n, err)
	}
}
