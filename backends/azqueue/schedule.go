package azqueue

// schedulesFallback says what Storage Queue's schedules lack: the queue's
// metadata has no conditional write and the queue no dedup, so a slot is
// claimed with a read then a write.
const schedulesFallback = "schedules are kept in the queue's metadata with the other policies (8 KiB in all: a few schedules); " +
	"the metadata has no conditional write and the queue no dedup, so two schedulers that fire the same slot within the same moment " +
	"may both push it and it runs twice (a slot is never lost, and a slot whose task already ran is refused through its result record); " +
	"for exactly once, let one process fire schedules (`jobq QUEUE scheduler`, workers with --no-schedules)"
