// Package pgbouncer runs Debian's pgbouncer (.ci/install-pgbouncer.sh
// installs it) in transaction pooling mode on a free loopback port, in front
// of a Postgres server, for tests and the fleet simulation.
package pgbouncer

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// ErrNotInstalled is returned by Start when no pgbouncer binary is found.
var ErrNotInstalled = errors.New("pgbouncer is not installed (run .ci/install-pgbouncer.sh)")

// Bouncer is a running pgbouncer.
type Bouncer struct {
	// Addr is the HOST:PORT it listens on.
	Addr string
	cmd  *exec.Cmd
	dir  string
	log  *syncBuf
	once sync.Once
}

// syncBuf is pgbouncer's output, written by the process's copier goroutine.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs pgbouncer in transaction pooling mode in front of the server
// of serverURL (a postgres:// URL with a user and a database), with at most
// serverConns server connections for all its clients and maxClients client
// connections. The user connecting must be the URL's (trust auth); user
// postgres is also the admin console's user (database pgbouncer).
func Start(serverURL string, serverConns, maxClients int) (*Bouncer, error) {
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, err = os.Stat("/usr/sbin/pgbouncer"); err != nil {
			return nil, ErrNotInstalled
		}
		bin = "/usr/sbin/pgbouncer"
	}
	server, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: server URL: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	// Under root pgbouncer must switch to another user, who must be able to
	// read its files.
	dir, err := os.MkdirTemp("", "jobq-pgbouncer")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	user := server.User.Username()
	db := strings.TrimPrefix(server.Path, "/")
	ini := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = %d
`, db, server.Hostname(), server.Port(), db, user, port, filepath.Join(dir, "users.txt"), user, serverConns, maxClients)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": fmt.Sprintf("%q \"\"\n", user)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgbouncer: %w", err)
		}
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "nobody"}, args...)
	}
	b := &Bouncer{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: exec.Command(bin, args...), dir: dir, log: &syncBuf{}}
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgbouncer: %w", err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", b.Addr)
		if err == nil {
			c.Close()
			return b, nil
		}
		if time.Now().After(deadline) {
			b.Stop()
			return nil, fmt.Errorf("pgbouncer did not listen on %s: %w\n%s", b.Addr, err, b.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL is rawURL (a postgres:// URL) pointed at the bouncer.
func (b *Bouncer) URL(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("pgbouncer: %w", err)
	}
	u.Host = b.Addr
	return u.String(), nil
}

// Pid is the pgbouncer process's ID.
func (b *Bouncer) Pid() int { return b.cmd.Process.Pid }

// Log is what pgbouncer has printed so far.
func (b *Bouncer) Log() string { return b.log.String() }

// Stop kills pgbouncer and removes its files. It may be called more than
// once.
func (b *Bouncer) Stop() {
	b.once.Do(func() {
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
		os.RemoveAll(b.dir)
	})
}
