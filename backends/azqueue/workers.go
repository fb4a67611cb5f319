package azqueue

// workerRegistryFallback says why a Storage Queue keeps no worker
// registry here: a queue can hold no per-worker records that can be listed
// and replaced (its messages can be updated only by whoever dequeued them,
// and its metadata is 8 KiB shared with the policies). The registry needs
// a blob container of the same account, as the result records use; until
// that is wired, workers on Storage Queue are not registered.
const workerRegistryFallback = "Storage Queue has no store for per-worker records: workers are not registered, and `jobq QUEUE workers` (Queue.Workers) fails with Unimplemented; watch the workers' own logs instead"
