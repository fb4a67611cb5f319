package postgres

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMain vacuums the shared test schema after the tests: every test
// deletes what it queued, and a server with autovacuum off (as on the
// development machine) would otherwise keep the dead rows of every run, and
// slow later runs down.
func TestMain(m *testing.M) {
	code := m.Run()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if conn, err := pgx.Connect(ctx, testConnString()); err == nil {
		s := pgx.Identifier{testSchema}.Sanitize()
		// Records the tests left (conformance runs through jobq.Open)
		// expire in days; those expired go now.
		conn.Exec(ctx, `DELETE FROM `+s+`.results WHERE expires_at <= now()`)
		conn.Exec(ctx, `VACUUM (SKIP_LOCKED) `+s+`.messages, `+s+`.dead_letters, `+s+`.results`)
		conn.Close(ctx)
	}
	os.Exit(code)
}
