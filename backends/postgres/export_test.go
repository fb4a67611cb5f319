package postgres

import (
	"context"
	"net/url"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/internal/bodypack"
	"github.com/jobq/jobq/wire"
)

// StartPgBouncer runs a PgBouncer in transaction pooling mode in front of
// the test server and returns the test URL pointed at it (skipping the test
// when pgbouncer is not installed).
var StartPgBouncer = startPgBouncer

// WriteDamaged stores body as a message of the queue at rawURL straight
// into its table, then damages it with the SET clause set (for example
// "deliveries = 2147483647"), as another tool or a hand edit might.
func WriteDamaged(ctx context.Context, rawURL string, body []byte, set string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	cfg, err := parseURL(u)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, cfg.connString)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	t := pgx.Identifier{cfg.schema, "messages"}.Sanitize()
	var id int64
	task, err := wire.Unmarshal(body)
	if err != nil {
		return err
	}
	// As a push stores it: the task ID in task_key, and left out of the
	// packed body, which a reader rebuilds from the key.
	if err := conn.QueryRow(ctx, `INSERT INTO `+t+` (queue, task_key, packed_body) VALUES ($1, $2, $3) RETURNING id`,
		cfg.queue, taskKey(task.ID), bodypack.Encode(body, task.ID)).Scan(&id); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `UPDATE `+t+` SET `+set+` WHERE queue = $1 AND id = $2`, cfg.queue, id)
	return err
}
