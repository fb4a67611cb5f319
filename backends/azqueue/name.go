package azqueue

// QueueName returns the queue's name (driver.Namer).
func (q *queue) QueueName() string { return q.cfg.queue }
