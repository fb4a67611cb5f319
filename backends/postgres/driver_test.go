package postgres

import (
	"testing"
	"time"

	"github.com/jobq/jobq/driver"
)

func TestSmoke(t *testing.T) {
	t.Parallel()
	d := openDriver(t)
	ctx := ctxT(t)
	res, err := d.Push(ctx, []*driver.Message{msg("a"), msg("b"), msg("a"), {Body: []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	got, err := d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got {
		t.Logf("%+v", *r)
	}
	l, err := d.Renew(ctx, got[0].Lease, time.Hour)
	t.Log(l, err)
	t.Log(d.Complete(ctx, []driver.Lease{got[0].Lease, got[0].Lease}))
	t.Log(d.Requeue(ctx, []driver.RequeueParams{{Lease: got[1].Lease, Delay: time.Second}}))
	t.Log(d.DeadLetter(ctx, []driver.DeadLetterParams{{Lease: got[2].Lease, Reason: "r", Detail: "dd"}}))
	st, err := d.Stats(ctx)
	t.Log(st, err)
	p, err := d.Peek(ctx, 10)
	for _, m := range p {
		t.Logf("%+v", *m)
	}
	dl, err := d.ListDead(ctx, 10)
	t.Log(dl[0], err)
	t.Log(d.RequeueDead(ctx, nil))
	start := time.Now()
	got, err = d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute, Wait: 3 * time.Second})
	t.Log(len(got), err, time.Since(start))
	got, err = d.Receive(ctx, driver.ReceiveParams{Max: 10, Visibility: time.Minute, Wait: 3 * time.Second})
	t.Log(len(got), err, time.Since(start))
}
