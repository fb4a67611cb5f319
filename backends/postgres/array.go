package postgres

import (
	"database/sql/driver"

	"github.com/jackc/pgx/v5/pgtype"
)

// The array types below are slices that pgx sends as Postgres arrays
// (pgtype.ArrayGetter) without an allocation per element. pgx's own
// support for a slice boxes every element in an interface (and, for an
// element handed over as a plain pointer, again when it dereferences it):
// an allocation for each ID, key, body, time and string of a push or a
// settlement. Their elements go to pgx as pointers to types that give pgx
// their value themselves (pgtype.Int64Valuer, TextValuer, BytesValuer,
// UUIDValuer), which boxing a pointer does not allocate.
//
// pgx takes that path when it knows the parameter's type, as in its default
// mode, which prepares statements. Where it does not
// (default_query_exec_mode=exec or simple_protocol, as with pgbouncer=true),
// it asks each array for its driver.Value: the plain slice, which it sends
// element by element as it would have.
type (
	int8Array  []int64
	int4Array  []int32
	textArray  []string
	byteaArray [][]byte
	// valuerArray is for element types whose pointers are pgx valuers
	// already (pgtype.UUID, pgtype.Int8).
	valuerArray[T any] []T
)

type (
	int8Elem  int64
	int4Elem  int32
	textElem  string
	byteaElem []byte
)

func (v *int8Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*v), Valid: true}, nil
}
func (v *int4Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*v), Valid: true}, nil
}
func (v *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*v), Valid: true}, nil
}
func (v *byteaElem) BytesValue() ([]byte, error) { return *v, nil } // nil: NULL

// dims is an ArrayGetter's Dimensions: one of n elements, or none for a
// nil slice, which pgx sends as NULL.
func dims(isNil bool, n int) []pgtype.ArrayDimension {
	if isNil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(n), LowerBound: 1}}
}

// Dimensions, Index and IndexType implement pgtype.ArrayGetter.
func (a int8Array) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a int8Array) Index(i int) any                     { return (*int8Elem)(&a[i]) }
func (a int8Array) IndexType() any                      { return (*int8Elem)(nil) }

// Dimensions, Index and IndexType implement pgtype.ArrayGetter.
func (a int4Array) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a int4Array) Index(i int) any                     { return (*int4Elem)(&a[i]) }
func (a int4Array) IndexType() any                      { return (*int4Elem)(nil) }

// Dimensions, Index and IndexType implement pgtype.ArrayGetter.
func (a textArray) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a textArray) Index(i int) any                     { return (*textElem)(&a[i]) }
func (a textArray) IndexType() any                      { return (*textElem)(nil) }

// Dimensions, Index and IndexType implement pgtype.ArrayGetter.
func (a byteaArray) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a byteaArray) Index(i int) any                     { return (*byteaElem)(&a[i]) }
func (a byteaArray) IndexType() any                      { return (*byteaElem)(nil) }

// Dimensions, Index and IndexType implement pgtype.ArrayGetter.
func (a valuerArray[T]) Dimensions() []pgtype.ArrayDimension { return dims(a == nil, len(a)) }
func (a valuerArray[T]) Index(i int) any                     { return &a[i] }
func (a valuerArray[T]) IndexType() any                      { return (*T)(nil) }

// Value implements driver.Valuer (see above).
func (a int8Array) Value() (driver.Value, error) { return []int64(a), nil }

// Value implements driver.Valuer (see above).
func (a int4Array) Value() (driver.Value, error) { return []int32(a), nil }

// Value implements driver.Valuer (see above).
func (a textArray) Value() (driver.Value, error) { return []string(a), nil }

// Value implements driver.Valuer (see above).
func (a byteaArray) Value() (driver.Value, error) { return [][]byte(a), nil }

// Value implements driver.Valuer (see above).
func (a valuerArray[T]) Value() (driver.Value, error) { return []T(a), nil }
