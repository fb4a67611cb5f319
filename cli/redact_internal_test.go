package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestLogIsRedacted: the CLI's logger writes through redactWriter, so an
// error that quotes a URL or a connection string loses its secrets.
func TestLogIsRedacted(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewTextHandler(redactWriter{&buf}, nil), slog.NewJSONHandler(redactWriter{&buf}, nil)} {
		slog.New(h).Warn("cannot reach postgres://u:S3CRET@h/db", "error", errors.New("AccountName=a;AccountKey=S3CRET;"))
	}
	if strings.Contains(buf.String(), "S3CRET") || strings.Count(buf.String(), "xxxxx") != 4 {
		t.Fatalf("log not redacted:\n%s", buf.String())
	}
}
