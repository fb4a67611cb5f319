package confsuite_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/jobq/jobq/backends/mem"
	"github.com/jobq/jobq/driver"
	conformance "github.com/jobq/jobq/internal/confsuite"
)

// recT is a conformance.T that records what a check reports.
type recT struct {
	ctx      context.Context
	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	cleanups []func()
}

func (r *recT) Helper() {}
func (r *recT) log(failed bool, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = r.failed || failed
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recT) Logf(format string, args ...any)   { r.log(false, format, args...) }
func (r *recT) Errorf(format string, args ...any) { r.log(true, format, args...) }
func (r *recT) Fatalf(format string, args ...any) { r.log(true, format, args...); runtime.Goexit() }
func (r *recT) Skipf(format string, args ...any) {
	r.log(false, format, args...)
	r.skipped = true
	runtime.Goexit()
}
func (r *recT) Failed() bool             { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *recT) Cleanup(f func())         { r.cleanups = append(r.cleanups, f) }
func (r *recT) Context() context.Context { return r.ctx }
func (r *recT) messages() string         { return strings.Join(r.msgs, "; ") }
func (r *recT) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// runCheck runs the check named name on h, as testing would, and returns
// what it reported.
func runCheck(t *testing.T, h conformance.Harness, name string) *recT {
	t.Helper()
	for _, ck := range conformance.Checks() {
		if ck.Name != name {
			continue
		}
		ctx, cancel := context.WithCancel(t.Context())
		r := &recT{ctx: ctx}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer r.runCleanups()
			defer cancel()
			ck.Run(conformance.NewC(r, h, nil))
		}()
		<-done
		return r
	}
	t.Fatalf("no check named %s", name)
	return nil
}

// declared is a driver with only the methods of driver.Driver (mem's, its
// optional interfaces hidden) that declares caps.
type declared struct {
	driver.Driver
	caps driver.Capabilities
}

func (d declared) Capabilities() driver.Capabilities { return d.caps }

// TestDeclarationNeedsInterface: a feature declared at a level that needs
// an optional interface the driver lacks fails the Capabilities check with
// a message naming the interface; declared unsupported, it passes.
func TestDeclarationNeedsInterface(t *testing.T) {
	t.Parallel()
	needy := []driver.Feature{driver.Results, driver.Cancel, driver.WorkerRegistry, driver.ConcurrencyLimit, driver.RateLimit, driver.Pause, driver.Schedules, driver.Groups, driver.BulkActions, driver.Dependencies, driver.TransactionalPush}
	tests := []struct {
		feature driver.Feature
		level   driver.Level
		want    string // "" for a pass
	}{
		{driver.Results, driver.Native, "driver.ResultStore"},
		{driver.Results, driver.Emulated, "driver.ResultStore"},
		{driver.Cancel, driver.Native, "driver.TaskRemover"},
		{driver.WorkerRegistry, driver.Emulated, "driver.WorkerStore"},
		{driver.ConcurrencyLimit, driver.Native, "driver.PolicyStore"},
		{driver.RateLimit, driver.Emulated, "driver.PolicyStore"},
		{driver.Pause, driver.Native, "driver.PolicyStore"},
		{driver.Schedules, driver.Native, "driver.PolicySwapper"},
		{driver.TransactionalPush, driver.Native, "driver.TxPusher"},
		{driver.Groups, driver.Emulated, "driver.GroupStore"},
		{driver.BulkActions, driver.Native, "driver.Pager"},
		{driver.Dependencies, driver.Emulated, "driver.HeldStore"},
		{driver.Dependencies, driver.Native, "driver.TaskFinder"},
		{driver.Results, driver.Unsupported, ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s", tt.feature, tt.level), func(t *testing.T) {
			t.Parallel()
			h := conformance.Harness{Name: "declared", NewDriver: func(_ context.Context, queue string) (driver.Driver, error) {
				d, err := mem.New(mem.Options{Queue: queue, Unsupported: needy[:len(needy)-1]}) // all but TransactionalPush, which mem never has
				if err != nil {
					return nil, err
				}
				caps := d.Capabilities()
				caps.Features[tt.feature] = driver.Support{Level: tt.level, Fallback: "as the test declares"}
				return declared{Driver: d, caps: caps}, nil
			}}
			r := runCheck(t, h, "Capabilities")
			switch {
			case tt.want == "" && r.failed:
				t.Errorf("Capabilities failed: %s", r.messages())
			case tt.want != "" && (!r.failed || !strings.Contains(r.messages(), tt.want)):
				t.Errorf("Capabilities: failed %v, messages %q; want a failure naming %s", r.failed, r.messages(), tt.want)
			}
		})
	}
}

// panicky is a driver whose As panics on a target it does not know.
type panicky struct{ driver.Driver }

func (panicky) As(target any) bool { return *target.(*int) == 0 }

// TestAsCheck: the As check fails a driver whose As panics or does not
// fill a listed type, and passes one that refuses what it does not know.
func TestAsCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		wrap func(driver.Driver) driver.Driver
		as   []any
		want string // "" for a pass
	}{
		{"refuses unknown types", func(d driver.Driver) driver.Driver { return d }, nil, ""},
		{"panics", func(d driver.Driver) driver.Driver { return panicky{d} }, nil, "panicked"},
		{"does not fill a listed type", func(d driver.Driver) driver.Driver { return d }, []any{new(*int)}, "returned false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := conformance.Harness{Name: "as", As: tt.as, NewDriver: func(_ context.Context, queue string) (driver.Driver, error) {
				d, err := mem.New(mem.Options{Queue: queue})
				if err != nil {
					return nil, err
				}
				return tt.wrap(d), nil
			}}
			r := runCheck(t, h, "As")
			switch {
			case tt.want == "" && r.failed:
				t.Errorf("As failed: %s", r.messages())
			case tt.want != "" && (!r.failed || !strings.Contains(r.messages(), tt.want)):
				t.Errorf("As: failed %v, messages %q; want a failure saying %q", r.failed, r.messages(), tt.want)
			}
		})
	}
}

// TestDriversDocGatesEveryCheck: the table of docs/drivers.md that maps
// capabilities to interfaces and checks names every check and every
// optional interface of package driver.
func TestDriversDocGatesEveryCheck(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/drivers.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "| Capability | Interface it needs | Conformance checks it gates |")
	if start < 0 {
		t.Fatal("docs/drivers.md has no capability table")
	}
	end := strings.Index(doc[start:], "\n\n")
	table := doc[start : start+end]
	cells := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		for _, w := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == '|' || r == '(' || r == ')' || r == ' ' || r == '`' }) {
			cells[w] = true
		}
	}
	for _, name := range conformance.Names() {
		if !cells[name] {
			t.Errorf("the capability table of docs/drivers.md does not name the check %s", name)
		}
	}
	// Every interface package driver declares.
	files, err := filepath.Glob("../../driver/*.go")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(x ast.Node) bool {
			ts, ok := x.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			if _, isIface := ts.Type.(*ast.InterfaceType); isIface {
				n++
				if !cells["driver."+ts.Name.Name] {
					t.Errorf("the capability table of docs/drivers.md does not name driver.%s", ts.Name.Name)
				}
			}
			return true
		})
	}
	if n < 9 {
		t.Errorf("found %d interfaces in package driver; want at least 9", n)
	}
}
