package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// clockTick is Linux's USER_HZ, the unit of /proc/PID/stat's CPU times.
const clockTick = 100

// procCPU is the CPU time (user + system) and resident memory of process
// pid, read from /proc; zero for a process that is gone.
func procCPU(pid int) (time.Duration, int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// Fields after the command name, which is in parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 22 {
		return 0, 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	rss, _ := strconv.ParseInt(f[21], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTick, rss * int64(os.Getpagesize())
}

// procUsage is the summed CPU time and resident memory of cmds' processes.
func procUsage(cmds []*exec.Cmd) (time.Duration, int64) {
	var cpu time.Duration
	var rss int64
	for _, c := range cmds {
		t, m := procCPU(c.Process.Pid)
		cpu += t
		rss += m
	}
	return cpu, rss
}

// bouncedPostgres reads a Postgres server behind a pgbouncer: the server
// connections the bouncer holds (its admin console's SHOW SERVERS, matched
// to pg_stat_activity by port) and the CPU of those backends and of the
// bouncer itself.
type bouncedPostgres struct {
	admin      string // the bouncer's admin console, a postgres:// URL
	server     string // the server, a postgres:// URL
	bouncerPid int
}

// Usage implements Engine.
func (e bouncedPostgres) Usage(ctx context.Context) (int, time.Duration, error) {
	cfg, err := pgx.ParseConfig(e.admin)
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: bouncer admin URL: %w", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	ac, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: bouncer admin console: %w", err)
	}
	defer ac.Close(ctx)
	rows, err := ac.Query(ctx, "SHOW SERVERS")
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: SHOW SERVERS: %w", err)
	}
	var ports []int32
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, 0, fmt.Errorf("fleet: SHOW SERVERS: %w", err)
		}
		for i, fd := range rows.FieldDescriptions() {
			if fd.Name == "local_port" {
				p, _ := strconv.Atoi(fmt.Sprint(vals[i]))
				ports = append(ports, int32(p))
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("fleet: SHOW SERVERS: %w", err)
	}
	n, cpu, err := backends(ctx, e.server, `client_addr = '127.0.0.1' AND client_port = ANY($1)`, ports)
	if err != nil {
		return 0, 0, err
	}
	bouncer, _ := procCPU(e.bouncerPid)
	return n, cpu + bouncer, nil
}

// backends counts the server's backends that match where (a condition on
// pg_stat_activity, with args), and sums their CPU time.
func backends(ctx context.Context, server, where string, args ...any) (int, time.Duration, error) {
	sc, err := pgx.Connect(ctx, server)
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: server: %w", err)
	}
	defer sc.Close(ctx)
	var pids []int32
	if err := sc.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity WHERE `+where, args...).Scan(&pids); err != nil {
		return 0, 0, fmt.Errorf("fleet: pg_stat_activity: %w", err)
	}
	var cpu time.Duration
	for _, pid := range pids {
		t, _ := procCPU(int(pid))
		cpu += t
	}
	return len(pids), cpu, nil
}

// directPostgres reads a Postgres server that the workers reach directly:
// the client backends of the database, besides the one asking, and their
// CPU.
type directPostgres struct {
	server string // a postgres:// URL
}

// Usage implements Engine.
func (e directPostgres) Usage(ctx context.Context) (int, time.Duration, error) {
	return backends(ctx, e.server, `backend_type = 'client backend' AND datname = current_database() AND pid <> pg_backend_pid()`)
}

// redisEngine reads a Redis server's client connections (less those open
// before the fleet started) and its CPU time, from INFO.
type redisEngine struct {
	c        *redis.Client
	baseline int
}

// newRedisEngine connects to the server at rawURL and records its current
// client count as the baseline.
func newRedisEngine(ctx context.Context, rawURL string) (*redisEngine, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("fleet: redis URL: %w", err)
	}
	e := &redisEngine{c: redis.NewClient(opt)}
	n, _, err := e.Usage(ctx)
	if err != nil {
		e.c.Close()
		return nil, err
	}
	e.baseline = n
	return e, nil
}

// Usage implements Engine.
func (e *redisEngine) Usage(ctx context.Context) (int, time.Duration, error) {
	info, err := e.c.Info(ctx, "clients", "cpu").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("fleet: redis INFO: %w", err)
	}
	var conns int
	var cpu float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "connected_clients":
			conns, _ = strconv.Atoi(v)
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		}
	}
	return conns - e.baseline, time.Duration(cpu * float64(time.Second)), nil
}
