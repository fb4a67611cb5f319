// Command abbench compares a package's benchmarks between two builds of
// jobq, run alternately on one machine: the way performance.md asks every
// change that adds work to a task to be measured. It builds the package's
// test binary from each commit (a git worktree for a commit, or the
// working tree itself for "."), runs them in ABBA order (old, new, new,
// old, ...) so that a drift of the machine over the run falls on both
// alike, and prints each benchmark's median per metric for each build,
// their ratio, the range of the rounds' own ratios and the range of its
// runs. -ratio also divides one benchmark by another within each run.
//
//	go run ./tools/abbench -old ab2c871 -pkg ./backends/postgres -bench '^BenchmarkEndToEnd$' -checkpoint postgres://postgres@127.0.0.1:5432/test
//	go run ./tools/abbench -old HEAD -pkg ./backends/redis -bench '^BenchmarkEndToEnd$' -rounds 8
//
// -checkpoint runs a Postgres CHECKPOINT before every run, so that no run
// pays for the full-page writes of the one before it. The benchmarks' own
// environment (JOBQ_TEST_POSTGRES_URL and the rest, performance.md) is
// passed through. Run it on a machine doing nothing else: the ranges show
// how far a single run can be trusted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

func main() {
	old := flag.String("old", "", "commit to compare against (required)")
	cur := flag.String("new", ".", `commit to compare, or "." for the working tree`)
	pkg := flag.String("pkg", "", "package whose benchmarks run, e.g. ./backends/postgres (required)")
	bench := flag.String("bench", "^BenchmarkEndToEnd$", "benchmarks to run (-test.bench)")
	benchtime := flag.String("benchtime", "20000x", "-test.benchtime of each run")
	rounds := flag.Int("rounds", 4, "ABBA rounds: each build runs twice a round")
	checkpoint := flag.String("checkpoint", "", "Postgres URL to CHECKPOINT before each run (none when empty)")
	ratio := flag.String("ratio", "", "NUMERATOR:DENOMINATOR, two patterns that each match one benchmark run; also print, per build,\nthe first's metrics over the second's, run by run (e.g. 'capped-2$:no-policies-2$')")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `abbench runs a package's benchmarks at two commits, alternately (old, new,
new, old, ...), and prints each metric's median per build, new over old,
the range of the rounds' own ratios and each build's range. With -ratio it
also compares two benchmarks within each build, run by run. Run it from the
repository, on a quiet machine.

  go run ./tools/abbench -old ab2c871 -pkg ./backends/postgres -checkpoint postgres://postgres@127.0.0.1:5432/test
  go run ./tools/abbench -old HEAD -pkg ./backends/postgres -bench 'DrainPolicies/100keys-(capped|no-policies)$' -ratio 'capped-2$:no-policies-2$'

`)
		flag.PrintDefaults()
	}
	flag.Parse()
	if *old == "" || *pkg == "" || *rounds < 1 {
		fmt.Fprintln(os.Stderr, "abbench: give -old COMMIT and -pkg PACKAGE (and -rounds of at least 1); see -help")
		os.Exit(2)
	}
	c := config{old: *old, cur: *cur, pkg: *pkg, bench: *bench, benchtime: *benchtime, rounds: *rounds, checkpoint: *checkpoint}
	if *ratio != "" {
		var err error
		if c.ratio, err = parseRatio(*ratio); err != nil {
			fmt.Fprintln(os.Stderr, "abbench:", err)
			os.Exit(2)
		}
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "abbench:", err)
		os.Exit(1)
	}
}

type config struct {
	old, cur, pkg, bench, benchtime string
	rounds                          int
	checkpoint                      string
	// ratio, when set, is -ratio's numerator and denominator.
	ratio [2]*regexp.Regexp
}

// parseRatio reads -ratio's NUMERATOR:DENOMINATOR patterns.
func parseRatio(s string) (ratio [2]*regexp.Regexp, err error) {
	numerator, denominator, ok := strings.Cut(s, ":")
	if !ok || numerator == "" || denominator == "" {
		return ratio, fmt.Errorf("-ratio %q: give two benchmark patterns as NUMERATOR:DENOMINATOR; see -help", s)
	}
	for i, p := range []string{numerator, denominator} {
		if ratio[i], err = regexp.Compile(p); err != nil {
			return ratio, fmt.Errorf("-ratio: %q is not a pattern: %w", p, err)
		}
	}
	return ratio, nil
}

// build is one side of the comparison: its test binary and the package
// directory it runs in (tests may read files beside them).
type build struct {
	label, binary, dir string
}

func run(ctx context.Context, c config) error {
	root, err := gitOutput(ctx, ".", "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("not in a git checkout of jobq: %w", err)
	}
	tmp, err := os.MkdirTemp("", "abbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var builds [2]build
	for i, commit := range []string{c.old, c.cur} {
		label := []string{"old", "new"}[i]
		b, cleanup, err := buildAt(ctx, root, tmp, label, commit, c.pkg)
		if cleanup != nil {
			defer cleanup()
		}
		if err != nil {
			return err
		}
		builds[i] = b
		fmt.Printf("%s: %s\n", label, describe(ctx, root, commit))
	}
	results := newResults()
	for r := 0; r < c.rounds; r++ {
		for _, i := range []int{0, 1, 1, 0} {
			if c.checkpoint != "" {
				if err := runCheckpoint(ctx, c.checkpoint); err != nil {
					return err
				}
			}
			out, err := runBench(ctx, builds[i], c.bench, c.benchtime)
			if err != nil {
				return err
			}
			n := results.add(builds[i].label, out)
			if n == 0 {
				return fmt.Errorf("the %s build printed no benchmark result for -bench %q:\n%s", builds[i].label, c.bench, out)
			}
			fmt.Fprintf(os.Stderr, "round %d, %s: %d results\n", r+1, builds[i].label, n)
		}
	}
	fmt.Print(results.table("old", "new"))
	if c.ratio[0] == nil {
		return nil
	}
	t, err := results.ratioTable([]string{"old", "new"}, c.ratio[0], c.ratio[1])
	if err != nil {
		return err
	}
	fmt.Print(t)
	return nil
}

// buildAt compiles pkg's test binary at commit ("." for the working tree
// at root), from a worktree of its own under tmp.
func buildAt(ctx context.Context, root, tmp, label, commit, pkg string) (build, func(), error) {
	tree, cleanup := root, func() {}
	if commit != "." {
		tree = filepath.Join(tmp, label)
		if _, err := gitOutput(ctx, root, "worktree", "add", "--detach", "--quiet", tree, commit); err != nil {
			return build{}, nil, fmt.Errorf("check out %s: %w", commit, err)
		}
		cleanup = func() { _, _ = gitOutput(context.Background(), root, "worktree", "remove", "--force", tree) }
	}
	b := build{label: label, binary: filepath.Join(tmp, label+".test"), dir: filepath.Join(tree, pkg)}
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", b.binary, ".")
	cmd.Dir = b.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return b, cleanup, fmt.Errorf("build %s of %s: %w\n%s", pkg, commit, err, out)
	}
	return b, cleanup, nil
}

func runBench(ctx context.Context, b build, bench, benchtime string) (string, error) {
	cmd := exec.CommandContext(ctx, b.binary, "-test.run", "^$", "-test.bench", bench, "-test.benchtime", benchtime, "-test.benchmem")
	cmd.Dir = b.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("the %s build's benchmarks failed: %w\n%s", b.label, err, out)
	}
	return string(out), nil
}

func runCheckpoint(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("-checkpoint: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("-checkpoint: %w", err)
	}
	return nil
}

func gitOutput(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
	}
	return strings.TrimSpace(string(out)), err
}

// describe names commit for the report: its short hash and subject, or
// the working tree with its base.
func describe(ctx context.Context, root, commit string) string {
	if commit == "." {
		head, _ := gitOutput(ctx, root, "log", "-1", "--format=%h")
		return "working tree (on " + head + ")"
	}
	s, err := gitOutput(ctx, root, "log", "-1", "--format=%h %s", commit)
	if err != nil {
		return commit
	}
	return s
}
