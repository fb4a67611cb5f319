package driver_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

func TestParams(t *testing.T) {
	t.Parallel()
	// Each case reads queue (string), n (int), wait (duration) and sync
	// (bool) from the query, as a driver does, then calls Done.
	cases := []struct {
		query   string
		want    string // the values read, formatted by the test
		wantErr string // substring of Done's error; empty for none
	}{
		{query: "", want: "queue=default n=7 wait=1s sync=true"},
		{query: "queue=etl&n=3&wait=250ms&sync=false", want: "queue=etl n=3 wait=250ms sync=false"},
		{query: "queue=a&queue=b", want: "queue=b n=7 wait=1s sync=true"},
		{query: "wait=0", want: "queue=default n=7 wait=0s sync=true"},
		{query: "wait=soon", wantErr: `query parameter wait="soon": not a duration`},
		{query: "wait=-1ms", wantErr: `query parameter wait="-1ms": it is negative; use 0s or more`},
		{query: "n=many", wantErr: `query parameter n="many": not a whole number`},
		{query: "wait=NaN", wantErr: `query parameter wait="NaN": not a duration`},
		{query: "wait=1e10", wantErr: `query parameter wait="1e10": it has no unit`},
		{query: "wait=15251w", wantErr: `query parameter wait="15251w": too long`},
		{query: "wait=2d", want: "queue=default n=7 wait=48h0m0s sync=true"},
		{query: "n=99999999999999999999", wantErr: `query parameter n="99999999999999999999": out of range`},
		{query: "sync=maybe", wantErr: `sync="maybe" is not true or false`},
		{query: "qeue=x&zz=1", wantErr: "unknown query parameter qeue, zz (this backend accepts: n, queue, sync, wait)"},
		{query: "n=x&wait=-1s", wantErr: `query parameter n="x": not a whole number; invalid query parameter wait="-1s": it is negative`},
	}
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			t.Parallel()
			p := driver.NewParams(&url.URL{RawQuery: c.query})
			got := "queue=" + p.String("queue", "default") +
				" n=" + strconv.Itoa(p.Int("n", 7)) +
				" wait=" + p.Duration("wait", time.Second).String() +
				" sync=" + strconv.FormatBool(p.Bool("sync", true))
			err := p.Done()
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("Done: %v", err)
				}
				if got != c.want {
					t.Fatalf("read %q, want %q", got, c.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Done = %v, want an error containing %q", err, c.wantErr)
			}
			var de *driver.Error
			if !errors.As(err, &de) || de.Code != errcode.InvalidArgument {
				t.Fatalf("Done = %#v, want a *driver.Error with code InvalidArgument", err)
			}
		})
	}
}
