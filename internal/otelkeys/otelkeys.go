// Package otelkeys holds the names jobq's OpenTelemetry instrumentation
// shares between the portable package and the worker: the instrumentation
// scope, the messaging system, the attribute keys and the duration buckets.
package otelkeys

import "go.opentelemetry.io/otel/attribute"

// InstrumentationName is the OpenTelemetry instrumentation scope of jobq's
// spans and metrics (docs/observability.md lists them).
const InstrumentationName = "github.com/jobq/jobq"

// MessagingSystem is the messaging.system attribute of jobq's spans and
// metrics; jobq.backend names the engine (the URL scheme).
const MessagingSystem = "jobq"

// Attribute keys jobq adds to the messaging conventions' own.
const (
	// AttrBackend is the URL scheme of the queue's backend ("postgres",
	// "redis", ...); empty for a queue made by New.
	AttrBackend = attribute.Key("jobq.backend")
	// AttrTaskID is the task's ID.
	AttrTaskID = attribute.Key("jobq.task.id")
	// AttrDeliveryCount is how many times the message has been received.
	AttrDeliveryCount = attribute.Key("jobq.delivery_count")
	// AttrRetried says whether a failed attempt was requeued for a retry
	// (true) or dead-lettered (false).
	AttrRetried = attribute.Key("jobq.retried")
	// AttrState is the state a queue depth counts: ready, in_flight,
	// delayed or dead.
	AttrState = attribute.Key("jobq.state")
	// AttrOutcome is how a handler's run ended: completed, failed,
	// lock_lost or stopped.
	AttrOutcome = attribute.Key("jobq.outcome")
)

// DurationBuckets are the bucket bounds, in seconds, of jobq's duration
// histograms: from 5 ms to a day.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}
