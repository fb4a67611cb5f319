package jobq

import (
	"context"
	"os"
	"os/user"
	"time"

	"github.com/jobq/jobq/driver"
)

// PauseOptions say which tasks Admin.Pause stops and Admin.Resume lets go
// again. The zero value is the whole queue.
type PauseOptions struct {
	// Kind, when set, limits the pause to tasks of that kind (Task.Kind).
	Kind string
	// Key, when set, limits the pause to tasks whose concurrency or
	// rate-limit key it is.
	Key string
	// By names who pauses, for stats and workers. Defaults to user@host of
	// this process. Resume ignores it.
	By string
}

func (o PauseOptions) state() (driver.PauseState, error) {
	s := driver.PauseState{TaskKind: o.Kind, Key: o.Key, By: o.By}
	return s, s.Validate()
}

// Pause stops workers taking the tasks o names: within a couple of seconds
// every worker of the queue stops claiming them (see the Pause capability
// for how long on each backend) and finishes the tasks it holds. Pushes
// still go in. Pausing what is already paused records the new author and
// time. It returns the pause as stored.
func (p *Admin) Pause(ctx context.Context, o PauseOptions) (driver.PauseState, error) {
	const op = "pause"
	s, err := o.state()
	if err != nil {
		return s, policyErr(op, err)
	}
	if s.By == "" {
		s.By = whoAmI()
	}
	s.Since = time.Now().Truncate(time.Millisecond)
	ps, err := p.pauseStore(op)
	if err != nil {
		return s, err
	}
	// The new pause first, then the older ones of its scope: the other
	// way round, a worker reading the policies in between would find the
	// queue not paused and take tasks.
	pol := s.Policy()
	if err := ps.SetPolicy(ctx, pol); err != nil {
		return s, p.q.wrapWrite(op, err)
	}
	if _, err := p.resume(ctx, ps, s, pol.Key); err != nil {
		return s, p.q.wrapWrite(op, err)
	}
	return s, nil
}

// Resume lifts the pause of the tasks o names (the same Kind and Key as
// the Pause) and reports whether there was one. Workers take those tasks
// again within a couple of seconds.
func (p *Admin) Resume(ctx context.Context, o PauseOptions) (bool, error) {
	const op = "resume"
	s, err := o.state()
	if err != nil {
		return false, policyErr(op, err)
	}
	ps, err := p.pauseStore(op)
	if err != nil {
		return false, err
	}
	had, err := p.resume(ctx, ps, s, "")
	return had, p.q.wrapWrite(op, err)
}

// resume removes every stored pause with the scope of s but the one
// stored under the key keep.
func (p *Admin) resume(ctx context.Context, ps driver.PolicyStore, s driver.PauseState, keep string) (bool, error) {
	pols, err := ps.ListPolicies(ctx)
	if err != nil {
		return false, err
	}
	had := false
	for _, pol := range pols {
		if pol.Kind != driver.PausePolicy || keep != "" && pol.Key == keep {
			continue
		}
		if old, err := driver.ParsePause(pol); err == nil && !old.SameScope(s) {
			continue
		}
		// A pause that does not decode cannot be resumed any other way.
		ok, err := ps.UnsetPolicy(ctx, driver.PausePolicy, pol.Key)
		if err != nil {
			return had, err
		}
		had = had || ok
	}
	return had, nil
}

// pauseStore is the policy store, once the backend is known to keep
// pauses.
func (p *Admin) pauseStore(op string) (driver.PolicyStore, error) {
	ps, err := p.policyStore(op)
	if err != nil {
		return nil, err
	}
	if err := p.q.degrade(op, driver.Pause); err != nil {
		return nil, err
	}
	return ps, nil
}

// whoAmI is user@host of this process, as far as it is known.
func whoAmI() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name == "" && host == "":
		return "unknown"
	case host == "":
		return name
	case name == "":
		return "unknown@" + host
	}
	return name + "@" + host
}
