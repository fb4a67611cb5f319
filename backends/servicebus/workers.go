package servicebus

// workerRegistryFallback says why Service Bus keeps no worker registry.
// A queue has no place for per-worker records that can be listed and
// replaced (messages cannot be updated or listed by key, and the queue's
// user metadata is one small string shared with the policies), so workers
// on Service Bus are not listed by `jobq QUEUE workers`, and Queue.Workers
// fails with Unimplemented. Their log lines and the queue's counts remain.
const workerRegistryFallback = "Service Bus has no store for per-worker records: workers are not registered, and `jobq QUEUE workers` (Queue.Workers) fails with Unimplemented; watch the workers' own logs instead"
