package postgres

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// checkGrants refuses a writing open of an up-to-date schema by a role
// that may write some of jobq's tables (jobqTables) but lacks a right jobq
// uses on another: SELECT on schema_migrations, SELECT, INSERT, UPDATE
// and DELETE on the others. A role granted those before an upgrade added
// a table (claim_cursors, step 25) opened, and then failed at whatever
// statement first used the new table (a claim under caps hours into a
// run, or a clear) with a bare "permission denied for table"; now the
// open says which tables and the GRANT that fixes it. A role that may
// write none of them (one given SELECT only, say for a dashboard) opens
// as before: its reads work and its writes fail. The schema's owner has
// every right.
func checkGrants(ctx context.Context, q rowQuerier, schema string) error {
	var missing []string
	var writable int
	err := q.QueryRow(ctx, `SELECT coalesce(array_agg(t.name ORDER BY t.name) FILTER (WHERE NOT t.ok), '{}'),
		count(*) FILTER (WHERE t.ok AND t.name <> 'schema_migrations')
		FROM (SELECT c.relname::text AS name, has_table_privilege(c.oid, 'SELECT')
			AND (c.relname = 'schema_migrations' OR (has_table_privilege(c.oid, 'INSERT')
			     AND has_table_privilege(c.oid, 'UPDATE') AND has_table_privilege(c.oid, 'DELETE'))) AS ok
			FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relname = ANY ($2)) AS t`, schema, jobqTables).Scan(&missing, &writable)
	if err != nil {
		return wrap(ctx, "open: reading this role's rights on schema "+schema, err)
	}
	if len(missing) == 0 || writable == 0 {
		return nil
	}
	role, s := roleName(ctx, q), pgx.Identifier{schema}.Sanitize()
	return driver.Errorf(errcode.PermissionDenied,
		"postgres open: %s lacks SELECT, INSERT, UPDATE or DELETE on jobq's tables in schema %s: %s (a jobq upgrade may have added them after the grants were made); "+
			"as the schema's owner, run `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s TO %s`",
		role, s, strings.Join(missing, ", "), s, role)
}

// roleName is the session's role, quoted, for an error that tells an
// administrator what to grant it; "this role" when it cannot be read.
func roleName(ctx context.Context, q rowQuerier) string {
	var name string
	if q.QueryRow(ctx, `SELECT current_user`).Scan(&name) != nil {
		return "this role"
	}
	return pgx.Identifier{name}.Sanitize()
}

// jobqTables are the tables checkGrants looks at: those the schema steps
// create, and schema_migrations. A schema may hold others: the
// application's, or results_rollup, which a history makes on demand and
// does without where the role may not write it (rollup.go).
var jobqTables = tablesOf(migrations)

// createTable finds the tables a schema step creates.
var createTable = regexp.MustCompile(`CREATE (?:UNLOGGED )?TABLE (?:IF NOT EXISTS )?\{\{s\}\}\.([a-z_]+)`)

// tablesOf is the names of the tables steps create, and schema_migrations.
func tablesOf(steps []migration) []string {
	names := []string{"schema_migrations"}
	for _, m := range steps {
		for _, sub := range createTable.FindAllStringSubmatch(m.sql, -1) {
			if !slices.Contains(names, sub[1]) {
				names = append(names, sub[1])
			}
		}
	}
	return names
}
