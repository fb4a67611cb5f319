package sqlite_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/wire"
)

// TestConformance runs the shared suite on sqlite drivers built with New
// (the driver-value form): with the default limits, and with
// MaxMessageBytes lowered (which the size-limit checks use). Every queue
// of a mode lives in one file, as queues in production share one, so the
// checks also prove that queues in a file stay apart. Each mode's URL
// serves the UnknownParameter check of the URL opener.
func TestConformance(t *testing.T) {
	t.Parallel()
	modes := []struct {
		name, params string
		maxBytes     int
	}{
		{"default", "", 0},
		{"limited", "&max_message_bytes=4096", 4096},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			file := filepath.Join(t.TempDir(), "conformance.db")
			conformance.Run(t, conformance.Harness{
				Name: "sqlite " + m.name,
				NewDriver: func(ctx context.Context, _ testing.TB, queue string) (driver.Driver, error) {
					return sqlite.New(ctx, file, sqlite.Options{Queue: queue, MaxMessageBytes: m.maxBytes})
				},
				NewQueueURL: func(testing.TB) string {
					return "sqlite://" + file + "?queue=" + rand.Text() + m.params
				},
				MaxMessageBytes: m.maxBytes,
				Corruptions:     corruptions(file),
				As:              []any{new(*sql.DB)},
			})
		})
	}
}

// corruptions are the damaged rows the CorruptRecord check stores in file:
// values SQLite accepts in any column but no jobq writes.
func corruptions(file string) []conformance.Corruption {
	return []conformance.Corruption{
		damaged(file, "delivery count is text", "deliveries = 'x'"),
		damaged(file, "delivery count beyond any count", "deliveries = 9223372036854775807"),
		damaged(file, "enqueue time is text", "enqueued_at = 'yesterday'"),
		damaged(file, "priority is text", "priority = 'high'"),
		damaged(file, "priority out of range", "priority = 5000"),
		damaged(file, "priority is real", "priority = 1.5"),
		damaged(file, "body is an integer", "body = 42"),
		damagedID(file, "task ID is not valid UTF-8", "key\xbe-key"),
	}
}

// damaged stores body as a message on queue straight into file, then
// damages its row with the SET clause set.
func damaged(file, name, set string) conformance.Corruption {
	return conformance.Corruption{Name: name, Write: func(ctx context.Context, queue string, body []byte) error {
		return writeDamaged(ctx, file, queue, []byte{}, body, 0, set)
	}}
}

// damagedID stores body as a push stores a task whose ID it spells out:
// the ID cut out of the body (id_at says where), to be rebuilt from
// task_id, which holds id instead, as text (SQLite checks no encoding).
func damagedID(file, name, id string) conformance.Corruption {
	return conformance.Corruption{Name: name, Write: func(ctx context.Context, queue string, body []byte) error {
		t, err := wire.Unmarshal(body)
		if err != nil {
			return err
		}
		at := bytes.Index(body, []byte(t.ID))
		if at < 0 {
			return fmt.Errorf("task ID %s is not in the body %s", t.ID, body)
		}
		cut := append(append([]byte{}, body[:at]...), body[at+len(t.ID):]...)
		return writeDamaged(ctx, file, queue, []byte(id), cut, at+1, "")
	}}
}

// writeDamaged inserts a message row of queue into file, its task_id the
// text key, then damages it with the SET clause set (none when empty).
func writeDamaged(ctx context.Context, file, queue string, key, body []byte, idAt int, set string) error {
	db, err := sql.Open("sqlite", file+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.ExecContext(ctx, `INSERT INTO jobq_messages (queue, task_id, body, id_at, visible_at, enqueued_at) VALUES (?, CAST(? AS TEXT), ?, ?, 0, 0)`,
		queue, key, body, idAt)
	if err != nil || set == "" {
		return err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `UPDATE jobq_messages SET `+set+` WHERE id = ?`, id)
	return err
}
