package redis

import (
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/driver"
)

// TestListResultsGoesOnPastAnExpiredBucket: the listing reads the bucket
// that expires first first, so that bucket may expire while it is being
// listed (Redis deletes it, and the reads drop it from the set of
// buckets). The listing must then go on with the buckets after it, not
// end there and leave out every later record (results --jsonl, and the
// dashboard's history on Redis, silently missed them).
func TestListResultsGoesOnPastAnExpiredBucket(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// The first bucket expires as Redis and the readers see it: its
		// key is gone, and with drop its entry in the set of buckets too
		// (the cleanup of a later read); without it, the entry is left
		// with its expiry in the past.
		drop bool
	}{
		{"key and entry gone", true},
		{"key gone, entry left", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := openDriver(t)
			ctx := testCtx(t)
			// Two records in a bucket that expires within the hour, two in
			// one that expires in two days.
			if err := d.PutResults(ctx, []*driver.ResultRecord{record("soon-1", driver.ResultSucceeded, time.Hour),
				record("soon-2", driver.ResultSucceeded, time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if err := d.PutResults(ctx, []*driver.ResultRecord{record("late-1", driver.ResultSucceeded, 48*time.Hour),
				record("late-2", driver.ResultSucceeded, 48*time.Hour)}); err != nil {
				t.Fatal(err)
			}
			first, expires := bucketOf(time.Now().Add(time.Hour), time.Hour)
			if at, ok := bucketExpiry(first); !ok || at != expires {
				t.Fatalf("bucketExpiry(%q) = %d, %v; want %d, true", first, at, ok, expires)
			}
			recs, cursor, err := d.ListResults(ctx, driver.ResultFilter{}, "", 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != 1 || !slices.Contains([]string{"soon-1", "soon-2"}, recs[0].ID) || cursor == "" {
				t.Fatalf("first page %v, cursor %q: want one record of the first bucket and a cursor", recordIDs(recs), cursor)
			}
			// The first bucket expires between two pages.
			if err := d.client.Del(ctx, d.prefix+"rb:"+first).Err(); err != nil {
				t.Fatal(err)
			}
			if tt.drop {
				err = d.client.ZRem(ctx, d.prefix+"rbs", first).Err()
			} else {
				err = d.client.ZAdd(ctx, d.prefix+"rbs", goredis.Z{Score: float64(time.Now().Add(-time.Second).UnixMilli()), Member: first}).Err()
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for cursor != "" {
				recs, cursor, err = d.ListResults(ctx, driver.ResultFilter{}, cursor, 1)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, recordIDs(recs)...)
			}
			slices.Sort(got)
			if want := []string{"late-1", "late-2"}; !slices.Equal(got, want) {
				t.Fatalf("after the first bucket expired the listing returned %v, want %v", got, want)
			}
		})
	}
}

func recordIDs(recs []*driver.ResultRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}
