package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/postgres"
)

func openQueue(t *testing.T) *jobq.Queue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q, err := jobq.Open(ctx, queueURL(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		q.Clear(context.Background())
		q.Close()
	})
	return q
}

// txHandles returns q's TxPusher and pool through its escape hatch.
func txHandles(t *testing.T, q *jobq.Queue) (postgres.TxPusher, *pgxpool.Pool) {
	t.Helper()
	var txp postgres.TxPusher
	var pool *pgxpool.Pool
	if !q.As(&txp) || !q.As(&pool) {
		t.Fatal("As(*postgres.TxPusher) or As(**pgxpool.Pool) returned false")
	}
	return txp, pool
}

// TestPushTx enqueues inside the application's transaction: a rollback
// leaves nothing queued, a commit makes the task visible with the
// application's own write.
func TestPushTx(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	txp, pool := txHandles(t, q)
	var other struct{}
	if q.As(&other) {
		t.Error("As accepted an unsupported type")
	}

	errRollback := errors.New("application failed")
	tests := []struct {
		name    string
		cmd     string
		fail    error
		wantRun bool
	}{
		{"rollback", "echo rolled-back", errRollback, false},
		{"commit", "echo committed", nil, true},
	}
	for _, tt := range tests {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			res, err := txp.PushTx(ctx, tx, &jobq.Task{Command: tt.cmd})
			if err != nil {
				return err
			}
			if len(res) != 1 || res[0].ID == "" || res[0].Duplicate {
				t.Errorf("%s: PushTx result %+v", tt.name, res)
			}
			// Not visible to others before the commit.
			if n, err := q.Size(ctx); err != nil || n != 0 {
				t.Errorf("%s: queue size inside the transaction = %d, %v; want 0", tt.name, n, err)
			}
			return tt.fail
		})
		if !errors.Is(err, tt.fail) {
			t.Fatalf("%s: transaction: %v", tt.name, err)
		}
	}
	e, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute, Wait: 5 * time.Second})
	if err != nil {
		t.Fatalf("receive the committed task: %v", err)
	}
	if e.Task.Command != "echo committed" {
		t.Fatalf("received %q, want the committed task", e.Task.Command)
	}
	if err := e.Complete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Receive(ctx, jobq.ReceiveOptions{Visibility: time.Minute}); !errors.Is(err, jobq.ErrEmpty) {
		t.Fatalf("after the committed task: %v, want ErrEmpty (the rolled-back task must not exist)", err)
	}
}

// TestPushTxMaxDepth: PushTx honours a max-depth policy, and a push that
// would overflow is undone alone: the application's transaction goes on
// and commits the rest of its work.
func TestPushTxMaxDepth(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	txp, pool := txHandles(t, q)
	if err := q.Policies().Set(ctx, jobq.Policy{Kind: jobq.MaxDepthPolicy, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo first"}); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := txp.PushTx(ctx, tx, &jobq.Task{Command: "echo a"}, &jobq.Task{Command: "echo b"}); !errors.Is(err, jobq.ErrResourceExhausted) {
			t.Errorf("PushTx of 2 onto 1 of max-depth 2: %v; want ResourceExhausted", err)
		}
		// The transaction is still usable, and one more task fits.
		_, err := txp.PushTx(ctx, tx, &jobq.Task{Command: "echo fits"})
		return err
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	if n, err := q.Size(ctx); err != nil || n != 2 {
		t.Fatalf("queue size %d, %v; want 2 (the first push and the one that fit)", n, err)
	}
}
