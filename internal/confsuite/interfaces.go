package confsuite

import (
	"fmt"
	"reflect"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/internal/hooks"
)

// featureInterface is an optional interface of package driver that a
// feature needs when it is declared at least min.
type featureInterface struct {
	feature driver.Feature
	min     driver.Level
	name    string
	has     func(driver.Driver) bool
}

// featureInterfaces lists what each declaration needs. Keep the table in
// docs/drivers.md in step.
var featureInterfaces = []featureInterface{
	{driver.Results, driver.Emulated, "driver.ResultStore", implements[driver.ResultStore]},
	{driver.Cancel, driver.Emulated, "driver.ResultStore", implements[driver.ResultStore]},
	{driver.Cancel, driver.Native, "driver.TaskRemover", implements[driver.TaskRemover]},
	{driver.WorkerRegistry, driver.Emulated, "driver.WorkerStore", implements[driver.WorkerStore]},
	{driver.ConcurrencyLimit, driver.Emulated, "driver.PolicyStore", implements[driver.PolicyStore]},
	{driver.RateLimit, driver.Emulated, "driver.PolicyStore", implements[driver.PolicyStore]},
	{driver.Pause, driver.Emulated, "driver.PolicyStore", implements[driver.PolicyStore]},
	{driver.Schedules, driver.Emulated, "driver.PolicyStore", implements[driver.PolicyStore]},
	{driver.Schedules, driver.Native, "driver.PolicySwapper", implements[driver.PolicySwapper]},
	{driver.TransactionalPush, driver.Native, "driver.TxPusher", implements[driver.TxPusher]},
	{driver.Groups, driver.Emulated, "driver.GroupStore", implements[driver.GroupStore]},
	{driver.Dependencies, driver.Emulated, "driver.HeldStore", implements[driver.HeldStore]},
	{driver.BulkActions, driver.Native, "driver.Pager", implements[driver.Pager]},
	{driver.Dependencies, driver.Native, "driver.TaskFinder", implements[driver.TaskFinder]},
	{driver.Groups, driver.Native, "driver.TaskGroupFinder", implements[driver.TaskGroupFinder]},
	{driver.ResultHistory, driver.Emulated, "driver.ResultLister or driver.ResultAggregator", implementsHistory},
	{driver.ResultHistory, driver.Native, "driver.ResultAggregator", implements[driver.ResultAggregator]},
}

// implementsHistory reports whether d can add up a window of records,
// natively or by a scan.
func implementsHistory(d driver.Driver) bool {
	return implements[driver.ResultAggregator](d) || implements[driver.ResultLister](d)
}

// implements reports whether d implements I.
func implements[I any](d driver.Driver) bool {
	_, ok := d.(I)
	return ok
}

// checkDeclaredInterfaces: every feature declared at a level that needs
// an optional interface comes with it, so that no check (and no user)
// meets an Unimplemented the declaration promised away.
func (c *C) checkDeclaredInterfaces(q *handle) {
	c.Helper()
	d := hooks.Driver(q)
	for _, fi := range featureInterfaces {
		if lv := level(q, fi.feature); lv >= fi.min && !fi.has(d) {
			c.Errorf("feature %s is declared %s, which needs %s; the driver (%T) does not implement it: implement it or declare %s unsupported",
				fi.feature, lv, fi.name, d, fi.feature)
		}
	}
}

// asProbe is a type no driver's As knows.
type asProbe struct{ _ int }

// checkAs: As, the escape hatch every driver has, fills each target the
// harness lists (Harness.As) and refuses, without panicking, a type it
// does not know, a non-pointer and nil.
func checkAs(c *C) {
	q := c.open()
	refused := []struct {
		what   string
		target any
	}{
		{"a pointer to a type no driver knows", new(asProbe)},
		{"a value that is not a pointer", asProbe{}},
		{"nil", nil},
	}
	for _, r := range refused {
		ok, p := callAs(q, r.target)
		switch {
		case p != nil:
			c.Errorf("As(%s) panicked: %v; return false for a target it does not support", r.what, p)
		case ok:
			c.Errorf("As(%s) returned true; it must return false for a target it does not support", r.what)
		}
	}
	if len(c.h.As) == 0 {
		c.Logf("Harness.As lists no types; list the types the driver's As documents (such as new(*sql.DB)) to check that they are filled")
	}
	for _, target := range c.h.As {
		v := reflect.ValueOf(target)
		if v.Kind() != reflect.Pointer || v.IsNil() {
			c.Errorf("Harness.As holds %T; list non-nil pointers to the types As fills, such as new(*sql.DB)", target)
			continue
		}
		ok, p := callAs(q, target)
		switch {
		case p != nil:
			c.Errorf("As(%T) panicked: %v", target, p)
		case !ok:
			c.Errorf("As(%T) returned false; the harness lists it as a type the driver supports", target)
		case v.Elem().IsZero():
			c.Errorf("As(%T) returned true but left the target zero", target)
		default:
			c.Logf("As(%T) filled %s", target, fmt.Sprintf("%T", v.Elem().Interface()))
		}
	}
}

// callAs calls q.As(target), recovering a panic.
func callAs(q *handle, target any) (ok bool, panicked any) {
	defer func() { panicked = recover() }()
	return q.As(target), nil
}
