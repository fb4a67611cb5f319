package wire_test

import (
	"fmt"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/wire"
)

// Marshal writes the body ai4s-jobq reads; Unmarshal reads it back.
func ExampleMarshal() {
	body, err := wire.Marshal(&jobq.Task{Command: "echo hi"})
	if err != nil {
		fmt.Println(err)
		return
	}
	t, err := wire.Unmarshal(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Command, len(t.ID))
	// Output: echo hi 32
}
