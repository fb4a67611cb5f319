package all_test

import (
	"slices"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"

	_ "github.com/jobq/jobq/backends/all"
)

// TestRegistered checks that importing all registers every backend and
// that each declares every feature.
func TestRegistered(t *testing.T) {
	t.Parallel()
	schemes := jobq.DefaultURLMux().Schemes()
	for _, s := range []string{"azqueue", "mem", "postgres", "redis", "sb", "sqlite"} {
		if !slices.Contains(schemes, s) {
			t.Errorf("scheme %s is not registered; registered: %v", s, schemes)
		}
	}
	for _, s := range schemes {
		o, ok := jobq.DefaultURLMux().Opener(s)
		if !ok {
			t.Errorf("no opener for registered scheme %s", s)
			continue
		}
		caps := o.Capabilities()
		for _, f := range driver.AllFeatures {
			if _, ok := caps.Features[f]; !ok {
				t.Errorf("%s does not declare feature %s", s, f)
			}
		}
	}
}
