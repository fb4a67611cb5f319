package postgres

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/internal/spinconn"
)

// Polling for a one-task push's reply (spin=).
//
// A producer that pushes one task at a time waits for each commit. When the
// reply comes, the Go runtime has parked the goroutine and must wake a
// thread to run it again, which on a small virtual machine is a sizeable
// share of a durable push (docs/performance.md).
// So the pool's connections are wrapped by internal/spinconn with polling
// off, and a one-task push turns it on for its own connection: its reads
// poll the socket for up to spin before parking, under spinconn's rules (a
// lone waiting read polls, a connection whose replies come late backs
// off). Claims, settlements and batch pushes never poll: many of them run
// at once, and a poller would take the CPU the server needs.

// quietConns wraps a pgx dial function so that every connection it makes
// can poll once told to (spinconn.WrapQuiet). Under TLS the wrapper sits
// beneath the TLS connection and is found through it (spinconn.Of).
func quietConns(dial pgconn.DialFunc) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return spinconn.WrapQuiet(c), nil
	}
}

// polling acquires a pool connection whose reads poll for up to the spin
// budget, and returns it with the function that turns polling off and
// releases it. With polling off it returns the pool itself.
func (d *Driver) polling(ctx context.Context) (pushDB, func(), error) {
	if d.cfg.spin <= 0 {
		return d.pool, func() {}, nil
	}
	c, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	sc := spinconn.Of(c.Conn().PgConn().Conn())
	if sc == nil {
		// A platform whose sockets spinconn cannot read.
		return c, c.Release, nil
	}
	sc.SetBudget(d.cfg.spin)
	return c, func() {
		sc.SetBudget(0)
		c.Release()
	}, nil
}

var _ pushDB = (*pgxpool.Conn)(nil)
