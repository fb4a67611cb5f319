package azqueue_test

import (
	"testing"

	"github.com/jobq/jobq/conformance"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	conformance.Run(t, conformance.Harness{
		Name:        "azqueue",
		NewQueueURL: newQueueURL,
		PushRaw:     pushRaw,
	})
}
