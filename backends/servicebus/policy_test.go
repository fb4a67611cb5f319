package servicebus_test

import (
	"strings"
	"testing"

	sb "github.com/jobq/jobq/backends/servicebus"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestPolicyKeyInvalidUTF8: a key that is not valid UTF-8 would come back
// from the queue's user metadata as U+FFFD (and govern another key); it is
// refused with a clear error and nothing is stored.
func TestPolicyKeyInvalidUTF8(t *testing.T) {
	t.Parallel()
	client, adm := emulatorClients(t)
	d, err := sb.New(ctxT(t), client, adm, sb.Options{Queue: freshName(), Create: true, LockDuration: lockDuration})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.SetPolicy(ctxT(t), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu\xff", Limit: 2})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("set a policy with key \"gpu\\xff\": %v, want InvalidArgument saying the key is not valid UTF-8", err)
	}
	if pols, err := d.ListPolicies(ctxT(t)); err != nil || len(pols) != 0 {
		t.Errorf("policies after the refused set: %+v, %v; want none", pols, err)
	}
	// A UTF-8 key beyond ASCII is kept as it is.
	if err := d.SetPolicy(ctxT(t), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpü", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if pols, err := d.ListPolicies(ctxT(t)); err != nil || len(pols) != 1 || pols[0].Key != "gpü" {
		t.Errorf("policies: %+v, %v; want the key gpü", pols, err)
	}
}
