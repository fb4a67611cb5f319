package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// maxIDLen bounds a task ID read from the command line or standard input;
// jobq's own IDs are 32 hex digits.
const maxIDLen = 1024

// taskIDs returns the task IDs of a command's arguments: each argument is
// an ID, and "-" reads more from r, one per line. A line of standard input
// may also be a JSON object with an "id" member, as `push --print-ids
// --json` prints. Each ID is kept once, in first-seen order.
func taskIDs(args []string, r io.Reader) ([]string, error) {
	var ids []string
	seen := map[string]bool{}
	add := func(id, where string) error {
		if err := checkTaskID(id); err != nil {
			return usageError("%s: %v", where, err)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
		return nil
	}
	stdinRead := false
	for i, arg := range args {
		if arg != "-" {
			if err := add(arg, fmt.Sprintf("argument %d", i+1)); err != nil {
				return nil, err
			}
			continue
		}
		if stdinRead {
			return nil, usageError("'-' (read IDs from standard input) is given twice; give it once")
		}
		stdinRead = true
		if err := readTaskIDs(r, add); err != nil {
			return nil, err
		}
	}
	if len(ids) == 0 {
		return nil, usageError("no task IDs: give them as arguments, or '-' to read them from standard input, one per line (as push --print-ids prints them)")
	}
	return ids, nil
}

// readTaskIDs calls add for each ID on r: one per line, blank lines
// skipped, or a JSON object with an "id" member.
func readTaskIDs(r io.Reader, add func(id, where string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		where := fmt.Sprintf("standard input line %d", n)
		if strings.HasPrefix(line, "{") {
			var obj struct {
				ID *string `json:"id"`
			}
			if err := json.Unmarshal([]byte(line), &obj); err != nil || obj.ID == nil {
				return usageError("%s: a line starting with '{' must be a JSON object with an \"id\" member, as push --print-ids --json prints", where)
			}
			line = *obj.ID
		}
		if err := add(line, where); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return failure(fmt.Errorf("reading task IDs from standard input: %w", err))
	}
	return nil
}

// checkTaskID rejects what cannot be a task ID.
func checkTaskID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("an empty task ID")
	case len(id) > maxIDLen:
		return fmt.Errorf("task ID %q... is longer than %d bytes", id[:40], maxIDLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("task ID %q is not valid UTF-8 text", id)
	case strings.ContainsAny(id, " \t\r\n"):
		return fmt.Errorf("task ID %q contains white space; give one ID per argument or line", id)
	}
	return nil
}
