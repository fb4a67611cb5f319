// Package all registers every jobq backend. Import it for its side effect:
//
//	import _ "github.com/jobq/jobq/backends/all"
//
// after which jobq.Open understands every scheme: sqlite, postgres, redis,
// azqueue, sb (Service Bus) and mem. Programs that need only one backend
// import that backend's package instead, to keep the others' dependencies
// out of the binary.
package all

import (
	_ "github.com/jobq/jobq/backends/azqueue"    // azqueue://
	_ "github.com/jobq/jobq/backends/mem"        // mem://
	_ "github.com/jobq/jobq/backends/postgres"   // postgres://
	_ "github.com/jobq/jobq/backends/redis"      // redis://
	_ "github.com/jobq/jobq/backends/servicebus" // sb://
	_ "github.com/jobq/jobq/backends/sqlite"     // sqlite://
)
