package jobq

import "github.com/jobq/jobq/internal/hooks"

// init lends the entry points that are not public API to the packages of
// this module that need them; see package internal/hooks.
func init() {
	hooks.MarshalTask = func(t any) ([]byte, error) { return encodeTask(t.(*Task)) }
	hooks.UnmarshalTask = func(body []byte) (any, error) {
		t, err := unmarshalTask(body)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	hooks.TaskID = func(t any) (string, error) { return taskID(t.(*Task)) }
}
