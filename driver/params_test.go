package driver_test

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
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
		{query: "wait=soon", wantErr: `wait="soon" is not a duration like 500ms or 2s`},
		{query: "wait=-1ms", wantErr: `wait="-1ms" is negative; give 0 or a positive duration`},
		{query: "n=many", wantErr: `n="many" is not an integer`},
		{query: "sync=maybe", wantErr: `sync="maybe" is not true or false`},
		{query: "qeue=x&zz=1", wantErr: "unknown query parameter qeue, zz (this backend accepts: n, queue, sync, wait)"},
		{query: "n=x&wait=-1s", wantErr: `n="x" is not an integer; query parameter wait="-1s" is negative`},
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
			if !errors.As(err, &de) || de.Code != driver.InvalidArgument {
				t.Fatalf("Done = %#v, want a *driver.Error with code InvalidArgument", err)
			}
		})
	}
}
