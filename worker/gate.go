package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/jobq/jobq/internal/bound"
)

// GateConfig tunes gate commands: a task may carry a gate command that must
// succeed on a worker before the task runs there (a GPU check, say). Each
// worker caches the result per command, so a gate runs once per worker.
type GateConfig struct {
	// CacheSize is how many gate results a worker remembers (least recently
	// used evicted first). Defaults to 128; $JOBQ_GATE_CACHE_SIZE.
	CacheSize int
	// Timeout bounds one gate run; a gate that takes longer fails. Defaults
	// to 60 seconds; $JOBQ_GATE_TIMEOUT_S.
	Timeout time.Duration
	// RequeueDelay is how long a task whose gate failed stays invisible
	// before another worker can take it. It does not use up a retry.
	// Defaults to 30 seconds; $JOBQ_GATE_REQUEUE_DELAY_S.
	RequeueDelay time.Duration
	// RequeueDelaySet makes a RequeueDelay of zero mean "at once" instead of
	// the default.
	RequeueDelaySet bool
	// MaxNotQualified ends the worker (Run returns nil) after this many gate
	// failures in a row: it cannot run anything on the queue. Defaults to
	// 100; $JOBQ_GATE_MAX_NOT_QUALIFIED.
	MaxNotQualified int
}

func (g GateConfig) withDefaults() GateConfig {
	if g.CacheSize <= 0 {
		g.CacheSize = 128
	}
	if g.Timeout <= 0 {
		g.Timeout = 60 * time.Second
	}
	if g.RequeueDelay <= 0 && !g.RequeueDelaySet {
		g.RequeueDelay = 30 * time.Second
	}
	if g.MaxNotQualified <= 0 {
		g.MaxNotQualified = 100
	}
	return g
}

// The environment variables GateConfigFromEnv reads.
const (
	EnvGateCacheSize       = "JOBQ_GATE_CACHE_SIZE"
	EnvGateTimeout         = "JOBQ_GATE_TIMEOUT_S"
	EnvGateRequeueDelay    = "JOBQ_GATE_REQUEUE_DELAY_S"
	EnvGateMaxNotQualified = "JOBQ_GATE_MAX_NOT_QUALIFIED"
)

// GateConfigFromEnv reads the JOBQ_GATE_* variables through lookup (pass
// os.LookupEnv). Unset or empty variables keep their defaults. Every invalid
// value is reported, each naming its variable, so a worker fails at start-up
// rather than on its first gated task.
func GateConfigFromEnv(lookup func(string) (string, bool)) (GateConfig, error) {
	var g GateConfig
	var errs []error
	// Seconds stop where a time.Duration does (about 292 years).
	const maxSeconds = int64(bound.MaxDuration / time.Second)
	read := func(name string, min, max int64, set func(int)) {
		v, ok := lookup(name)
		if !ok || v == "" {
			return
		}
		n, err := bound.Ints{Min: min, Max: max}.ParseInt(name, v)
		if err != nil {
			errs = append(errs, err)
			return
		}
		set(n)
	}
	read(EnvGateCacheSize, 1, math.MaxInt32, func(n int) { g.CacheSize = n })
	read(EnvGateTimeout, 1, maxSeconds, func(n int) { g.Timeout = time.Duration(n) * time.Second })
	read(EnvGateRequeueDelay, 0, maxSeconds, func(n int) {
		g.RequeueDelay = time.Duration(n) * time.Second
		g.RequeueDelaySet = true
	})
	read(EnvGateMaxNotQualified, 1, math.MaxInt32, func(n int) { g.MaxNotQualified = n })
	if err := errors.Join(errs...); err != nil {
		return GateConfig{}, err
	}
	return g.withDefaults(), nil
}

// gatekeeper runs gate commands and remembers their results.
type gatekeeper struct {
	cfg   GateConfig
	run   func(ctx context.Context, cmd string) error
	cache *lru.Cache[string, bool]
	log   *slog.Logger

	mu       sync.Mutex
	misses   int                  // gate failures in a row
	deferred map[string]time.Time // task ID -> when its gate requeue ends
}

func newGatekeeper(cfg GateConfig, run func(context.Context, string) error, log *slog.Logger) *gatekeeper {
	c, _ := lru.New[string, bool](cfg.CacheSize) // size is validated positive
	return &gatekeeper{cfg: cfg, run: run, cache: c, log: log, deferred: map[string]time.Time{}}
}

// check reports whether cmd passes on this worker, from the cache when it
// was run before.
func (g *gatekeeper) check(ctx context.Context, cmd string, log *slog.Logger) bool {
	sum := sha256.Sum256([]byte(cmd))
	key := hex.EncodeToString(sum[:])
	if ok, hit := g.cache.Get(key); hit {
		log.Debug("gate result from cache", "gate", key[:12], "passed", ok)
		return ok
	}
	err := g.run(ctx, cmd)
	if ctx.Err() != nil {
		// The worker is stopping; do not cache a result it did not get.
		return false
	}
	ok := err == nil
	if ok {
		log.Info("gate passed", "gate", key[:12])
	} else {
		log.Info("gate failed; tasks with this gate will be left to other workers", "gate", key[:12], "error", err)
	}
	g.cache.Add(key, ok)
	return ok
}

// miss records a gate failure for a task requeued with the gate delay and
// reports whether the worker has now missed MaxNotQualified times in a row.
func (g *gatekeeper) miss(taskID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.misses++
	g.deferred[taskID] = time.Now().Add(g.cfg.RequeueDelay)
	return g.misses >= g.cfg.MaxNotQualified
}

// pass records that a task ran.
func (g *gatekeeper) pass() {
	g.mu.Lock()
	g.misses = 0
	g.mu.Unlock()
}

// pendingDeferred counts the tasks this worker requeued after a failed gate
// that are still delayed: the worker would only reject them again, so they
// must not keep it waiting on an otherwise empty queue.
func (g *gatekeeper) pendingDeferred() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	var n int64
	for id, until := range g.deferred {
		if until.After(now) {
			n++
		} else {
			delete(g.deferred, id)
		}
	}
	return n
}

// runGate runs cmd with bash -c in its own process group, in the worker's
// environment without the withheld variables (TaskEnv); the whole group is
// killed when the timeout passes or ctx ends.
func runGate(ctx context.Context, cmd string, timeout time.Duration, passEnv []string, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.Command("bash", "-c", cmd)
	c.SysProcAttr = groupAttr()
	c.WaitDelay = 2 * time.Second // background processes holding the pipes must not hang the gate
	var tail tailBuffer
	tail.init(20, 4096)
	w := &lineWriter{fn: func(line string) { tail.add(line); log.Debug("gate output", "line", line) }}
	c.Stdout, c.Stderr = w, w
	c.Env = TaskEnv(os.Environ(), passEnv)
	if err := c.Start(); err != nil {
		return fmt.Errorf("starting gate command: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		w.flush()
		switch out := tail.String(); {
		case err == nil:
			return nil
		case out == "":
			return fmt.Errorf("gate command %w", err)
		default:
			return fmt.Errorf("gate command %w; output tail: %s", err, out)
		}
	case <-ctx.Done():
		_ = signalPID(-c.Process.Pid, syscall.SIGKILL)
		<-done
		return fmt.Errorf("gate command did not finish within %v: %w", timeout, ctx.Err())
	}
}
