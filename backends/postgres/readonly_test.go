package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// TestReadOnlyOpen: a read-only open creates nothing (a missing schema is
// NotFound, and stays missing) and works for a role that may only SELECT.
func TestReadOnlyOpen(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	schema, pool := freshSchema(t)
	s := pgx.Identifier{schema}.Sanitize()

	_, err := New(ctx, pool, Options{Schema: schema, ReadOnly: true})
	if errcode.Of(err) != errcode.NotFound {
		t.Fatalf("read-only open of a missing schema: %v; want NotFound", err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regnamespace($1) IS NOT NULL`, schema).Scan(&exists); err != nil || exists {
		t.Fatalf("schema %s exists after a read-only open (%v); want it not created", schema, err)
	}

	w, err := New(ctx, pool, Options{Schema: schema, Queue: "ro"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Push(ctx, []*driver.Message{{ID: "a", Body: []byte(`{}`)}}); err != nil {
		t.Fatal(err)
	}

	role := fmt.Sprintf("jobq_reader_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, `CREATE ROLE `+role+` NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool.Exec(ctx, `DROP OWNED BY `+role)
		pool.Exec(ctx, `DROP ROLE `+role)
	})
	if _, err := pool.Exec(ctx, `GRANT USAGE ON SCHEMA `+s+` TO `+role+`; GRANT SELECT ON ALL TABLES IN SCHEMA `+s+` TO `+role); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(testConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["role"] = role
	reader, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	r, err := New(ctx, reader, Options{Schema: schema, Queue: "ro", ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open as a role that may only SELECT: %v", err)
	}
	defer r.Close()
	st, err := r.Stats(ctx)
	if err != nil || st.Ready != 1 {
		t.Fatalf("stats as the reading role: %+v, %v; want 1 ready", st, err)
	}
	// The dashboard's window, which the role cannot keep rollups of: it
	// is added up from the records.
	until := time.Now().Truncate(time.Hour).Add(time.Hour)
	if _, err := r.AggregateResults(ctx, driver.HistoryParams{Since: until.Add(-24 * time.Hour), Until: until, Bucket: time.Hour, ErrorGroups: 5}); err != nil {
		t.Errorf("result history as the reading role: %v", err)
	}
}
