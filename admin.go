package jobq

// Admin inspects and administers a queue: what is in it (Peek, Size,
// Stats), its dead letters, policies, results and worker registry, and the
// operations that remove or cancel work. Get one from Queue.Admin; it is as
// safe for concurrent use as its Queue, and closing the Queue ends it too.
type Admin struct {
	q *Queue
}

// Admin returns the queue's inspection and administration handle.
func (q *Queue) Admin() *Admin { return &Admin{q: q} }
