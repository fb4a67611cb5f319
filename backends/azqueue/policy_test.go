package azqueue_test

import (
	"strings"
	"testing"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestPolicyKeyInvalidUTF8: a key that is not valid UTF-8 would come back
// as U+FFFD (and govern another key); it is refused with a clear error and
// nothing is stored.
func TestPolicyKeyInvalidUTF8(t *testing.T) {
	t.Parallel()
	d, err := openDriver(t.Context(), newQueueURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ps, ok := d.(driver.PolicyStore)
	if !ok {
		t.Fatal("the azqueue driver is not a PolicyStore")
	}
	err = ps.SetPolicy(t.Context(), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpu\xff", Limit: 2})
	if errcode.Of(err) != errcode.InvalidArgument || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("set a policy with key \"gpu\\xff\": %v, want InvalidArgument saying the key is not valid UTF-8", err)
	}
	pols, err := ps.ListPolicies(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(pols) != 0 {
		t.Errorf("policies after the refused set: %+v, want none", pols)
	}
	// A UTF-8 key beyond ASCII is kept as it is.
	if err := ps.SetPolicy(t.Context(), driver.Policy{Kind: driver.ConcurrencyPolicy, Key: "gpü", Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if pols, err := ps.ListPolicies(t.Context()); err != nil || len(pols) != 1 || pols[0].Key != "gpü" {
		t.Errorf("policies: %+v, %v; want the key gpü", pols, err)
	}
}
