package driver

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/jobq/jobq/errcode"
)

// queueNameRule is what every backend accepts in a queue name; engines
// with stricter rules (Azure's) say so in their own messages.
const queueNameRule = "a queue name is UTF-8 text without NUL or other control characters (letters, digits, spaces and punctuation are allowed)"

// queueNameProblem says what is wrong with name, a non-empty queue name,
// or returns "" when nothing is.
func queueNameProblem(name string) string {
	if !utf8.ValidString(name) {
		return "is not valid UTF-8"
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return fmt.Sprintf("contains the control character %U", r)
		}
	}
	return ""
}

// CheckQueueName returns an InvalidArgument error unless name can name a
// queue on every backend: non-empty UTF-8 text without NUL or other
// control characters, which no engine stores faithfully (Postgres text
// refuses NUL; Redis keys and SQLite text would keep bytes that no log,
// listing or other client shows as they are). field names the setting
// the name came from, such as "Options.Queue". Backends whose engine has
// stricter rules apply them as well.
func CheckQueueName(field, name string) error {
	if name == "" {
		return Errorf(errcode.InvalidArgument, "%s is empty: name the queue", field)
	}
	if p := queueNameProblem(name); p != "" {
		return Errorf(errcode.InvalidArgument, "%s %q %s: %s", field, name, p, queueNameRule)
	}
	return nil
}

// Queue returns the queue= parameter, or def when it is absent, and
// records for Done a value that CheckQueueName refuses.
func (p *Params) Queue(def string) string {
	name := p.String("queue", def)
	if name == "" {
		p.Fail("query parameter queue is empty: name the queue, for example queue=default")
	} else if problem := queueNameProblem(name); problem != "" {
		p.Fail("query parameter queue=%q %s: %s (percent-encode only characters that belong in the name)", name, problem, queueNameRule)
	}
	return name
}
