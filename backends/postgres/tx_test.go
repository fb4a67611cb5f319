package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
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
		q.Admin().Clear(context.Background())
		q.Close()
	})
	return q
}

// poolOf returns q's pool through its escape hatch.
func poolOf(t *testing.T, q *jobq.Queue) *pgxpool.Pool {
	t.Helper()
	var pool *pgxpool.Pool
	if !q.As(&pool) {
		t.Fatal("As(**pgxpool.Pool) returned false")
	}
	return pool
}

// TestPushTx enqueues inside the application's transaction: a rollback
// leaves nothing queued, a commit makes the task visible with the
// application's own write.
func TestPushTx(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	pool := poolOf(t, q)
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
			res, err := q.PushTx(ctx, tx, []*jobq.Task{{Command: tt.cmd}}, jobq.PushOptions{})
			if err != nil {
				return err
			}
			if len(res) != 1 || res[0].ID == "" || res[0].Duplicate {
				t.Errorf("%s: PushTx result %+v", tt.name, res)
			}
			// Not visible to others before the commit.
			if n, err := q.Admin().Size(ctx); err != nil || n != 0 {
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

// TestPushTxWrongTx: anything but a pgx.Tx is refused, naming what was
// passed.
func TestPushTxWrongTx(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx := t.Context()
	for _, tx := range []any{nil, poolOf(t, q), "tx"} {
		_, err := q.PushTx(ctx, tx, []*jobq.Task{{Command: "echo x"}}, jobq.PushOptions{})
		if errcode.Of(err) != errcode.InvalidArgument {
			t.Errorf("PushTx with a %T: %v; want InvalidArgument", tx, err)
		}
	}
}

// TestPushAndPushTxRejectTheSame runs one table of invalid tasks through
// Push and through PushTx: both must refuse each with the same error, and
// store nothing.
func TestPushAndPushTxRejectTheSame(t *testing.T) {
	t.Parallel()
	q := openQueue(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := poolOf(t, q)

	tests := []struct {
		name string
		task *jobq.Task
	}{
		{"nil task", nil},
		{"neither command nor payload", &jobq.Task{}},
		{"command and payload", &jobq.Task{Command: "echo", Payload: json.RawMessage(`{}`)}},
		{"negative num_retries", &jobq.Task{Command: "echo", NumRetries: -1}},
		{"priority above the range", &jobq.Task{Command: "echo", Priority: driver.MaxPriority + 1}},
		{"priority below the range", &jobq.Task{Command: "echo", Priority: driver.MinPriority - 1}},
		{"payload not an object", &jobq.Task{Payload: json.RawMessage(`[1]`)}},
		{"payload not JSON", &jobq.Task{Payload: json.RawMessage(`{`)}},
		{"env name with =", &jobq.Task{Command: "echo", Env: []jobq.EnvVar{{Name: "A=B", Value: "x"}}}},
		{"ID not UTF-8", &jobq.Task{ID: "\xff", Command: "echo"}},
		{"command not UTF-8", &jobq.Task{Command: "echo \xff"}},
		{"concurrency key with /", &jobq.Task{Command: "echo", ConcurrencyKey: "gpu/0"}},
		{"concurrency key with =", &jobq.Task{Command: "echo", ConcurrencyKey: "gpu=0"}},
		{"concurrency key with a control character", &jobq.Task{Command: "echo", ConcurrencyKey: "gpu\n"}},
		{"concurrency key not UTF-8", &jobq.Task{Command: "echo", ConcurrencyKey: "\xff"}},
		{"concurrency key too long", &jobq.Task{Command: "echo", ConcurrencyKey: strings.Repeat("k", driver.MaxPolicyKeyLen+1)}},
		{"rate key with /", &jobq.Task{Command: "echo", RateLimitKey: "api/1"}},
		{"rate key too long", &jobq.Task{Command: "echo", RateLimitKey: strings.Repeat("k", driver.MaxPolicyKeyLen+1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, pushErr := q.Push(ctx, tt.task)
			var txErr error
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				_, txErr = q.PushTx(ctx, tx, []*jobq.Task{tt.task}, jobq.PushOptions{})
				return nil
			})
			if err != nil {
				t.Fatalf("transaction: %v", err)
			}
			if pushErr == nil || txErr == nil {
				t.Fatalf("Push: %v; PushTx: %v; want both to refuse the task", pushErr, txErr)
			}
			if errcode.Of(pushErr) != errcode.InvalidArgument || pushErr.Error() != txErr.Error() {
				t.Errorf("Push and PushTx disagree:\n Push:   %v (%s)\n PushTx: %v (%s)",
					pushErr, errcode.Of(pushErr), txErr, errcode.Of(txErr))
			}
		})
	}
	if n, err := q.Admin().Size(ctx); err != nil || n != 0 {
		t.Errorf("queue size %d, %v after only invalid pushes; want 0", n, err)
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
	pool := poolOf(t, q)
	if err := q.Admin().SetPolicy(ctx, driver.Policy{Kind: driver.MaxDepthPolicy, Limit: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Push(ctx, &jobq.Task{Command: "echo first"}); err != nil {
		t.Fatal(err)
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		two := []*jobq.Task{{Command: "echo a"}, {Command: "echo b"}}
		if _, err := q.PushTx(ctx, tx, two, jobq.PushOptions{}); !errors.Is(err, errcode.ResourceExhausted) {
			t.Errorf("PushTx of 2 onto 1 of max-depth 2: %v; want ResourceExhausted", err)
		}
		// The transaction is still usable, and one more task fits.
		_, err := q.PushTx(ctx, tx, []*jobq.Task{{Command: "echo fits"}}, jobq.PushOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("transaction: %v", err)
	}
	if n, err := q.Admin().Size(ctx); err != nil || n != 2 {
		t.Fatalf("queue size %d, %v; want 2 (the first push and the one that fit)", n, err)
	}
}
