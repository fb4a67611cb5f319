package mem

// QueueName returns the queue's name (driver.Namer).
func (d *memDriver) QueueName() string { return d.name }
