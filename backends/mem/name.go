package mem

// QueueName returns the queue's name (driver.Namer).
func (d *Driver) QueueName() string { return d.name }
