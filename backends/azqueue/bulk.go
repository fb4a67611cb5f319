package azqueue

// bulkFallback is how the bulk actions by filter degrade here: Storage Queue
// cannot page through a queue.
const bulkFallback = "Storage Queue cannot page through a queue: one pass of a bulk action (requeue, cancel, purge by filter) sees the first 32 visible queued tasks (Peek Messages; delayed and leased ones are not seen) and the first 32 dead letters (peeked likewise); passes repeat while a pass sees tasks it has not seen, so matches behind 32 that do not match are left: the result says so (partial), and a run may be repeated"
