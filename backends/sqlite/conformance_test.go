package sqlite_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/conformance"
	"github.com/jobq/jobq/wire"
)

// TestConformance runs the shared suite on sqlite: with the default limits,
// and with max_message_bytes lowered (which the size-limit checks use).
// Every queue of a mode lives in one file, as queues in production share
// one, so the checks also prove that queues in a file stay apart.
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
				NewQueueURL: func(testing.TB) string {
					return "sqlite://" + file + "?queue=" + rand.Text() + m.params
				},
				MaxMessageBytes: m.maxBytes,
				PushRaw:         conformance.RawPusher(sqlite.URLOpener{}),
				Corruptions:     corruptions,
			})
		})
	}
}

// corruptions are the damaged rows the CorruptRecord check stores: values
// SQLite accepts in any column but no jobq writes.
var corruptions = []conformance.Corruption{
	damaged("delivery count is text", "deliveries = 'x'"),
	damaged("delivery count beyond any count", "deliveries = 9223372036854775807"),
	damaged("enqueue time is text", "enqueued_at = 'yesterday'"),
	damaged("priority is text", "priority = 'high'"),
	damaged("priority out of range", "priority = 5000"),
	damaged("priority is real", "priority = 1.5"),
	damaged("body is an integer", "body = 42"),
	damagedID("task ID is not valid UTF-8", "key\xbe-key"),
}

// damaged stores body as a message straight into the file, then damages
// its row with the SET clause set.
func damaged(name, set string) conformance.Corruption {
	return conformance.Corruption{Name: name, Write: func(ctx context.Context, rawURL string, body []byte) error {
		return writeDamaged(ctx, rawURL, []byte{}, body, 0, set)
	}}
}

// damagedID stores body as a push stores a task whose ID it spells out:
// the ID cut out of the body (id_at says where), to be rebuilt from
// task_id, which holds id instead, as text (SQLite checks no encoding).
func damagedID(name, id string) conformance.Corruption {
	return conformance.Corruption{Name: name, Write: func(ctx context.Context, rawURL string, body []byte) error {
		t, err := wire.Unmarshal(body)
		if err != nil {
			return err
		}
		at := bytes.Index(body, []byte(t.ID))
		if at < 0 {
			return fmt.Errorf("task ID %s is not in the body %s", t.ID, body)
		}
		cut := append(append([]byte{}, body[:at]...), body[at+len(t.ID):]...)
		return writeDamaged(ctx, rawURL, []byte(id), cut, at+1, "")
	}}
}

// writeDamaged inserts a message row into the file of rawURL, its task_id
// the text key, then damages it with the SET clause set (none when empty).
func writeDamaged(ctx context.Context, rawURL string, key, body []byte, idAt int, set string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", u.Host+u.Path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	res, err := db.ExecContext(ctx, `INSERT INTO jobq_messages (queue, task_id, body, id_at, visible_at, enqueued_at) VALUES (?, CAST(? AS TEXT), ?, ?, 0, 0)`,
		u.Query().Get("queue"), key, body, idAt)
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
