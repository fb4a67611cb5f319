package driver

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/errcode"
)

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    Policy
		want errcode.Code // Unknown: valid
	}{
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu", Limit: 2}, errcode.Unknown},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 10, Period: time.Minute}, errcode.Unknown},
		{Policy{Kind: MaxDepthPolicy, Limit: 1}, errcode.Unknown},
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu"}, errcode.InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu", Limit: -1}, errcode.InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Limit: 1}, errcode.InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Key: "a=b", Limit: 1}, errcode.InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu", Limit: 1, Period: time.Second}, errcode.InvalidArgument},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 1}, errcode.InvalidArgument},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 1, Period: math.MaxInt64}, errcode.InvalidArgument},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 1, Period: time.Microsecond}, errcode.InvalidArgument},
		{Policy{Kind: MaxDepthPolicy, Key: "x", Limit: 1}, errcode.InvalidArgument},
		{Policy{Kind: "fairness", Key: "x", Limit: 1}, errcode.InvalidArgument},
		{Retention(time.Hour), errcode.Unknown},
		{Retention(time.Millisecond), errcode.InvalidArgument},
		{Policy{Kind: RetentionPolicy, Limit: 2, Period: time.Hour}, errcode.InvalidArgument},
		{Policy{Kind: RetentionPolicy, Key: "k", Limit: 1, Period: time.Hour}, errcode.InvalidArgument},
		{RetryBackoff(time.Second, time.Hour), errcode.Unknown},
		{RetryBackoff(time.Hour, time.Second), errcode.InvalidArgument},
		{RetryBackoff(0, time.Second), errcode.InvalidArgument},
		{RetryBackoff(time.Second, 20*365*24*time.Hour), errcode.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.p), func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			if got := errcode.Of(err); got != tt.want || (tt.want == errcode.Unknown) != (err == nil) {
				t.Fatalf("Validate() = %v (code %v); want code %v", err, got, tt.want)
			}
		})
	}
}

func TestPolicyCodecRoundTrip(t *testing.T) {
	t.Parallel()
	in := []Policy{
		RetryBackoff(10*time.Second, time.Hour),
		Retention(48 * time.Hour),
		{Kind: MaxDepthPolicy, Limit: 100},
		{Kind: RatePolicy, Key: "api", Limit: 10, Period: 90 * time.Second},
		{Kind: ConcurrencyPolicy, Key: "gpü", Limit: 2},
	}
	out, err := DecodePolicies(EncodePolicies(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Policy{in[4], in[3], in[2], in[1], in[0]} // sorted by kind
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Fatalf("round trip = %v; want %v", out, want)
	}
	if _, err := DecodePolicies("not base64!"); errcode.Of(err) != errcode.Internal {
		t.Errorf("decoding garbage: %v; want Internal", err)
	}
	replaced, had := ReplacePolicy(out, Policy{Kind: ConcurrencyPolicy, Key: "gpü", Limit: 5}, false)
	if !had || len(replaced) != len(in) || replaced[0].Limit != 5 {
		t.Errorf("ReplacePolicy = %v, %v; want the gpü cap replaced", replaced, had)
	}
	removed, had := ReplacePolicy(replaced, Policy{Kind: MaxDepthPolicy}, true)
	if !had || len(removed) != len(in)-1 {
		t.Errorf("ReplacePolicy(remove) = %v, %v; want max-depth gone", removed, had)
	}
}

func TestQueueFull(t *testing.T) {
	t.Parallel()
	err := QueueFull(7, 7, 2)
	if errcode.Of(err) != errcode.ResourceExhausted {
		t.Fatalf("code %v; want ResourceExhausted", errcode.Of(err))
	}
	if got := err.Error(); got == "" || !strings.Contains(got, "7 of max-depth 7") {
		t.Errorf("message %q does not give the depth", got)
	}
}

func TestUncountedKeyStats(t *testing.T) {
	t.Parallel()
	ps := []Policy{
		{Kind: ConcurrencyPolicy, Key: "gpu", Limit: 2},
		{Kind: MaxDepthPolicy, Limit: 100},
		{Kind: RatePolicy, Key: "api", Limit: 5, Period: time.Second},
	}
	got := UncountedKeyStats(ps)
	want := []KeyStat{
		{Kind: ConcurrencyPolicy, Key: "gpu", Waiting: -1},
		{Kind: RatePolicy, Key: "api", Waiting: -1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("UncountedKeyStats = %+v; want %+v", got, want)
	}
}
