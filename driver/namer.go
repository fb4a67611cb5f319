package driver

// Namer is implemented by drivers that know their queue's name (the queue=
// parameter, or the default they chose). The portable layer asks for it so
// that Queue.Name, and the worker's JOBQ_QUEUE_NAME, match what the driver
// uses. Drivers that do not implement it get the URL's queue= parameter or,
// failing that, the last element of its path.
type Namer interface {
	QueueName() string
}
