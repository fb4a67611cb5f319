package servicebus

// schedulesFallback says what Service Bus's schedules lack: the queue's
// user metadata has no conditional write, so a slot is claimed with a read
// then a write, and duplicate detection (when the queue has it) is what
// keeps a slot that two schedulers claimed to one message.
func schedulesFallback(dedup bool) string {
	const kept = "schedules are kept in the queue's user metadata with the other policies (1024 characters in all: a schedule or two, with short commands), which has no conditional write; "
	if dedup {
		return kept + "two schedulers that fire the same slot at once both push its task, and duplicate detection drops the second (the slot runs once while the detection window, 10 minutes by default, covers both pushes)"
	}
	return kept + "the queue has duplicate detection off, so two schedulers that fire the same slot at once may both push it and it runs twice; " +
		"create the queue with duplicate detection, or let one process fire schedules (`jobq QUEUE scheduler`, workers with --no-schedules)"
}
