package postgres

import (
	"context"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// arrayCases are one value of each array type and what Postgres must
// read from it.
var arrayCases = []struct {
	name, cast string
	value      any
	want       any
}{
	{"int8", "bigint[]", int8Array{1, 1 << 40, -7}, []int64{1, 1 << 40, -7}},
	{"int4", "int[]", int4Array{0, -1000, 1000}, []int32{0, -1000, 1000}},
	{"text", "text[]", textArray{"", "a", "ünï"}, []string{"", "a", "ünï"}},
	{"bytea", "bytea[]", byteaArray{{1, 2}, {}, nil}, [][]byte{{1, 2}, {}, nil}},
	{"int8 with NULLs", "bigint[]", valuerArray[pgtype.Int8]{{Int64: 5, Valid: true}, {}}, []pgtype.Int8{{Int64: 5, Valid: true}, {}}},
	{"uuid", "uuid[]", valuerArray[pgtype.UUID]{{Bytes: [16]byte{1}, Valid: true}}, []pgtype.UUID{{Bytes: [16]byte{1}, Valid: true}}},
}

// TestArraysRoundTrip sends each array in pgx's default mode, where it
// knows the parameters' types (the path without an allocation per
// element), and in the modes where it does not (pgbouncer=true's exec, and
// the simple protocol), where the arrays give it their plain slices.
func TestArraysRoundTrip(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		for _, tc := range arrayCases {
			got := reflect.New(reflect.TypeOf(tc.want))
			if err := d.pool.QueryRow(ctx, "SELECT $1::"+tc.cast, mode, tc.value).Scan(got.Interface()); err != nil {
				t.Fatalf("%s, mode %s: %v", tc.name, mode, err)
			}
			if !reflect.DeepEqual(got.Elem().Interface(), tc.want) {
				t.Errorf("%s, mode %s: Postgres read %#v; want %#v", tc.name, mode, got.Elem().Interface(), tc.want)
			}
		}
	}
	// A nil slice is NULL, as pgx sends a nil []string (push's traces).
	var isNull bool
	if err := d.pool.QueryRow(ctx, "SELECT $1::text[] IS NULL", textArray(nil)).Scan(&isNull); err != nil || !isNull {
		t.Fatalf("a nil textArray: NULL is %v (err %v); want true", isNull, err)
	}
}

// TestArraysEncodeWithoutAllocationPerElement guards what the types are
// for: encoding 1,000 elements costs a few allocations, not one each. Not
// parallel: AllocsPerRun counts the whole process's allocations.
func TestArraysEncodeWithoutAllocationPerElement(t *testing.T) {
	m := pgtype.NewMap()
	const n = 1000
	values := map[string]any{
		"bigint[]": make(int8Array, n),
		"int[]":    make(int4Array, n),
		"text[]":   append(make(textArray, 0, n), make([]string, n)...),
		"bytea[]":  make(byteaArray, n),
		"uuid[]":   make(valuerArray[pgtype.UUID], n),
	}
	for i := range n {
		values["bigint[]"].(int8Array)[i] = int64(i) << 20
		values["int[]"].(int4Array)[i] = int32(-i)
		values["text[]"].(textArray)[i] = "task"
		values["bytea[]"].(byteaArray)[i] = []byte("body")
	}
	oids := map[string]uint32{"bigint[]": pgtype.Int8ArrayOID, "int[]": pgtype.Int4ArrayOID, "text[]": pgtype.TextArrayOID,
		"bytea[]": pgtype.ByteaArrayOID, "uuid[]": pgtype.UUIDArrayOID}
	buf := make([]byte, 0, 64<<10)
	for name, v := range values {
		allocs := testing.AllocsPerRun(20, func() {
			if _, err := m.Encode(oids[name], pgtype.BinaryFormatCode, v, buf[:0]); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > n/10 {
			t.Errorf("encoding %d elements of %s took %.0f allocations; want a few, not one per element", n, name, allocs)
		}
	}
}
