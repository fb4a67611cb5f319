package servicebus

import (
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// PropTraceParent is the application property that carries the producer's
// W3C trace context (driver.Message.TraceParent), under the name W3C and
// Azure's own SDKs use, so the body keeps ai4s-jobq's bytes. Requeue's
// copies of a message do not carry it.
const PropTraceParent = "traceparent"

// withTrace sets the trace context on a message to push.
func withTrace(m *azservicebus.Message, traceParent string) *azservicebus.Message {
	if traceParent != "" {
		m.ApplicationProperties[PropTraceParent] = traceParent
	}
	return m
}

// traceParent reads the trace context of a received message, "" when it
// has none.
func traceParent(m *azservicebus.ReceivedMessage) string {
	tp, _ := m.ApplicationProperties[PropTraceParent].(string)
	return tp
}
