package postgres

// QueueName returns the queue's name (driver.Namer).
func (d *pgDriver) QueueName() string { return d.cfg.queue }
