// Package livetasks collects what a driver's lookup of live tasks (ready,
// delayed or in flight, by task ID) finds, as driver.TaskFinder and
// driver.TaskGroupFinder return it, so that a driver writes the lookup
// once for both.
package livetasks

// Lookup calls found with the ID and group ("" for none) of each live
// task it finds, once per ID.
type Lookup func(found func(id, grp string)) error

// IDs returns the IDs l finds (driver.TaskFinder.FindTasks).
func IDs(l Lookup) ([]string, error) {
	var out []string
	err := l(func(id, _ string) { out = append(out, id) })
	return out, err
}

// Groups returns the group of each task l finds in a group
// (driver.TaskGroupFinder.FindTaskGroups).
func Groups(l Lookup) (map[string]string, error) {
	out := map[string]string{}
	err := l(func(id, grp string) {
		if grp != "" {
			out[id] = grp
		}
	})
	return out, err
}
