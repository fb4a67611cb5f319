package azqueue

// QueueName returns the queue's name (driver.Namer).
func (q *Driver) QueueName() string { return q.cfg.queue }
