package servicebus

import (
	"math"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// TestDeliveryPropsOfDamagedMessages: the delivery properties a requeue
// copies forward cannot widen the retry budget when a message carries
// damaged values: negatives read as 0, uncounted deliveries never exceed
// the earlier deliveries, and huge values cannot overflow the count.
func TestDeliveryPropsOfDamagedMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                   string
		count                  uint32
		prior, uncounted       any
		wantPrior, wantUncount int
	}{
		{"none", 1, nil, nil, 0, 0},
		{"as written", 3, int64(4), int64(2), 4, 2},
		{"int32 and string", 2, int32(3), "1", 3, 1},
		{"negative prior", 2, int64(-5), int64(0), 0, 0},
		{"negative uncounted", 3, int64(2), int64(-7), 2, 0},
		{"negative string", 3, "-4", "-9", 0, 0},
		{"uncounted beyond the deliveries", 2, int64(1), int64(1000), 1, 2},
		{"uncounted on a first delivery", 1, nil, int64(5), 0, 0},
		{"huge prior", 2, int64(math.MaxInt64), int64(0), maxPriorDeliveries, 0},
		{"malformed", 2, "lots", 3.5, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := &azservicebus.ReceivedMessage{DeliveryCount: tc.count, ApplicationProperties: map[string]any{}}
			if tc.prior != nil {
				m.ApplicationProperties[PropPriorDeliveries] = tc.prior
			}
			if tc.uncounted != nil {
				m.ApplicationProperties[PropUncountedDeliveries] = tc.uncounted
			}
			prior, uncounted := deliveryProps(m)
			if prior != tc.wantPrior || uncounted != tc.wantUncount {
				t.Errorf("deliveryProps = %d, %d; want %d, %d", prior, uncounted, tc.wantPrior, tc.wantUncount)
			}
			h := &held{msg: m, prior: prior, uncounted: uncounted}
			// The portable layer counts used retries as deliveries-1-uncounted.
			if d := h.deliveries(); d < 1 || d-1-uncounted < 0 {
				t.Errorf("deliveries %d with %d uncounted: the used retries would be negative", d, uncounted)
			}
		})
	}
}
