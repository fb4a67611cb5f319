package postgres

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestMigrateConcurrently starts many workers on a fresh schema at once:
// every one must succeed and each step must be applied exactly once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema := fmt.Sprintf("jobq_mig_%d", time.Now().UnixNano())
	pool, err := pgxpool.New(ctx, testConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})

	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			d := openDriver(t, "schema="+schema)
			if _, err := d.Stats(ctx); err != nil {
				t.Errorf("stats on a freshly migrated schema: %v", err)
			}
		})
	}
	wg.Wait()

	var versions, max int
	err = pool.QueryRow(ctx, `SELECT count(*), max(version) FROM `+pgx.Identifier{schema}.Sanitize()+`.schema_migrations`).Scan(&versions, &max)
	if err != nil {
		t.Fatal(err)
	}
	if versions != len(migrations) || max != SchemaVersion {
		t.Fatalf("schema_migrations has %d rows up to version %d; want %d up to %d", versions, max, len(migrations), SchemaVersion)
	}
	// Migrating again is a no-op.
	if err := migrate(ctx, pool, schema); err != nil {
		t.Fatalf("second migration: %v", err)
	}
}
