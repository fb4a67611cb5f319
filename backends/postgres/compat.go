package postgres

// pgDriver is the driver's former name, still used by tx.go until its
// rewrite for driver.TxPusher lands.
type pgDriver = Driver
