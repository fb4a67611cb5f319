package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// table prints a listing as every listing of the CLI prints it: a header
// of upper-case column names, then a row per item, in columns two spaces
// apart.
type table struct {
	tw *tabwriter.Writer
}

// newTable starts a table on w with the column names header.
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(header, "\t"))
	return t
}

// row adds a row: each cell as fmt.Sprint prints it.
func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

// flush writes the table out.
func (t *table) flush() error { return t.tw.Flush() }
