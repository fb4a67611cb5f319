package redis

import (
	"context"

	goredis "github.com/redis/go-redis/v9"
)

// askGuard is a hook on the node clients of a cluster client the URL
// opener builds. While a queue's slot moves to another master, the keys
// migrated so far answer ASK, and go-redis resends the command to the
// importing node after ASKING. A script has to see every key of the queue,
// but most declare only the counter (scripts.go): run on the importing node it
// would read the keys still on the migrating one as empty (a claim finding
// no task) and create keys there that the move cannot migrate afterwards
// (BUSYKEY, the slot stuck half moved). The guard does not send a script
// after ASKING; the call fails with errSlotMoving, which is Unavailable,
// until the slot has moved and its node answers MOVED.
type askGuard struct{}

// DialHook implements goredis.Hook; it adds nothing.
func (askGuard) DialHook(next goredis.DialHook) goredis.DialHook { return next }

// ProcessHook implements goredis.Hook; it adds nothing: go-redis sends
// ASKING and the redirected command as a pipeline.
func (askGuard) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook { return next }

// ProcessPipelineHook implements goredis.Hook: it takes every script that
// follows an ASKING, and that ASKING, out of the pipeline, failing them
// with errSlotMoving, and sends the rest.
func (askGuard) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if !askedScript(cmds) {
			return next(ctx, cmds)
		}
		kept := make([]goredis.Cmder, 0, len(cmds))
		for i := 0; i < len(cmds); i++ {
			if cmds[i].Name() == "asking" && i+1 < len(cmds) && isScript(cmds[i+1]) {
				cmds[i].SetErr(errSlotMoving)
				cmds[i+1].SetErr(errSlotMoving)
				i++
				continue
			}
			kept = append(kept, cmds[i])
		}
		if len(kept) == 0 {
			return errSlotMoving
		}
		if err := next(ctx, kept); err != nil {
			return err
		}
		return errSlotMoving
	}
}

// askedScript tells whether cmds holds a script after an ASKING.
func askedScript(cmds []goredis.Cmder) bool {
	for i := 0; i+1 < len(cmds); i++ {
		if cmds[i].Name() == "asking" && isScript(cmds[i+1]) {
			return true
		}
	}
	return false
}

// isScript tells whether cmd runs a Lua script.
func isScript(cmd goredis.Cmder) bool {
	switch cmd.Name() {
	case "evalsha", "eval", "evalsha_ro", "eval_ro":
		return true
	}
	return false
}

// slotMovingError is the error of a script askGuard did not send.
type slotMovingError struct{}

func (slotMovingError) Error() string {
	return "TRYAGAIN the queue's hash slot is being moved to another cluster node, which has only part of its keys yet; jobq runs no script there until the move is done"
}

// RedisError marks it as a server's answer (goredis.Error), which the
// classification reads by its TRYAGAIN prefix.
func (slotMovingError) RedisError() {}

var errSlotMoving goredis.Error = slotMovingError{}
