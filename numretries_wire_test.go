package jobq_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/tools/testkit/engines"
)

// TestForeignNumRetriesRuns: ai4s-jobq (Python, whose ints have no size)
// writes whatever num_retries its --num-retries flag is given. A negative
// one, however large, is read as 0; one beyond jobq's 32-bit range runs,
// its retries counted from the delivery count. Neither is dead-lettered
// as poison without ever running.
func TestForeignNumRetriesRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		retries string
		left    int // RetriesLeft at the first delivery
	}{
		{"negative beyond 32 bits", "-99999999999", 0},
		{"negative beyond 64 bits", "-123456789012345678901234567890", 0},
		{"beyond 32 bits", "99999999999", 99999999999},
		{"beyond 64 bits", "123456789012345678901234567890", math.MaxInt},
	}
	for i, tc := range tests {
		for engine, u := range engines.URLs(t, fmt.Sprintf("numretries-%d", i)) {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				q := engines.Open(t, u)
				o, ok := jobq.DefaultURLMux().Opener(engine)
				if !ok {
					t.Fatalf("no backend registered for %s", engine)
				}
				body := `{"version": 1, "reply_requested": false, "kwargs": "{\"cmd\": \"true\", \"bg_dirsync_to\": null, \"env\": {}}", "num_retries": ` +
					tc.retries + `, "id": "nr"}`
				if err := conformance.RawPusher(o)(t.Context(), u, []byte(body)); err != nil {
					t.Fatal(err)
				}
				e, err := q.Receive(t.Context(), jobq.ReceiveOptions{Visibility: time.Minute})
				if err != nil {
					dls, _ := q.Admin().DeadLetters(t.Context(), 10)
					for _, d := range dls {
						t.Logf("dead letter: %s", d.Reason)
					}
					t.Fatalf("Receive: %v; want the task", err)
				}
				if e.Task.Command != "true" || e.RetriesLeft() != tc.left {
					t.Fatalf("received command %q with %d retries left; want \"true\" with %d", e.Task.Command, e.RetriesLeft(), tc.left)
				}
				res, err := e.Fail(t.Context(), errors.New("boom"), "")
				if err != nil || res.Retried != (tc.left > 0) {
					t.Fatalf("Fail = %+v, %v; want retried %v", res, err, tc.left > 0)
				}
			})
		}
	}
}
