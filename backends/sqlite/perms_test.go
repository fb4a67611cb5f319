package sqlite

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jobq/jobq/driver"
)

// TestFilePermissions: a new database file and the -wal and -shm files
// beside it are private to their owner (tasks carry environment values);
// an existing file keeps the permissions it has.
func TestFilePermissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		existing os.FileMode // 0: the file does not exist yet
		want     os.FileMode
	}{
		{"new file", 0, 0o600},
		{"existing file", 0o640, 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "q.db")
			if tt.existing != 0 {
				if err := os.WriteFile(path, nil, tt.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tt.existing); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			u, _ := url.Parse("sqlite://" + path + "?queue=perms")
			d, err := URLOpener{}.Open(ctx, u, driver.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if _, err := d.Push(ctx, []*driver.Message{{ID: "a", Body: []byte(`{}`)}}); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{path, path + "-wal", path + "-shm"} {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatalf("stat: %v", err)
				}
				if got := fi.Mode().Perm(); got != tt.want {
					t.Errorf("%s has mode %v, want %v", filepath.Base(f), got, tt.want)
				}
			}
		})
	}
}
