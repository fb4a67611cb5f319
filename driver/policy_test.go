package driver

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    Policy
		want Code // Unknown: valid
	}{
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu", Limit: 2}, Unknown},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 10, Period: time.Minute}, Unknown},
		{Policy{Kind: MaxDepthPolicy, Limit: 1}, Unknown},
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu"}, InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu", Limit: -1}, InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Limit: 1}, InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Key: "a=b", Limit: 1}, InvalidArgument},
		{Policy{Kind: ConcurrencyPolicy, Key: "gpu", Limit: 1, Period: time.Second}, InvalidArgument},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 1}, InvalidArgument},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 1, Period: math.MaxInt64}, InvalidArgument},
		{Policy{Kind: RatePolicy, Key: "api", Limit: 1, Period: time.Microsecond}, InvalidArgument},
		{Policy{Kind: MaxDepthPolicy, Key: "x", Limit: 1}, InvalidArgument},
		{Policy{Kind: "fairness", Key: "x", Limit: 1}, InvalidArgument},
		{Retention(time.Hour), Unknown},
		{Retention(time.Millisecond), InvalidArgument},
		{Policy{Kind: RetentionPolicy, Limit: 2, Period: time.Hour}, InvalidArgument},
		{Policy{Kind: RetentionPolicy, Key: "k", Limit: 1, Period: time.Hour}, InvalidArgument},
		{RetryBackoff(time.Second, time.Hour), Unknown},
		{RetryBackoff(time.Hour, time.Second), InvalidArgument},
		{RetryBackoff(0, time.Second), InvalidArgument},
		{RetryBackoff(time.Second, 20*365*24*time.Hour), InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%+v", tt.p), func(t *testing.T) {
			t.Parallel()
			err := tt.p.Validate()
			if got := CodeOf(err); got != tt.want || (tt.want == Unknown) != (err == nil) {
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
	if _, err := DecodePolicies("not base64!"); CodeOf(err) != Internal {
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
	if CodeOf(err) != ResourceExhausted {
		t.Fatalf("code %v; want ResourceExhausted", CodeOf(err))
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
