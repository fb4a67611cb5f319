package postgres

// wakeOthersFunction is schema step 28: wake_others, which is wake (step
// 14's wakeOnceFunction) passing over one handle, self. A push and a
// trailing wake-up give their own process's handle: the process wakes its
// own receivers itself once its statement has committed (Driver.wake), so
// a wake-up of its handle through the server only made its LISTEN
// connection read a notification, the handle register again, and, with its
// receivers already woken, be passed on. A wake-up passed on gives it too:
// it is for another process. A push in the application's transaction
// (PushTx) gives no handle, since only the commit, which the driver does
// not see, may wake anyone. Processes of earlier releases call wake, which
// this step leaves as it is.
var wakeOthersFunction = mustReplace(wakeOnceFunction,
	"FUNCTION {{s}}.wake(q text, n integer, prefix text)",
	"FUNCTION {{s}}.wake_others(q text, n integer, prefix text, self text)",
	"WHERE queue = q ORDER BY since",
	"WHERE queue = q AND handle <> self ORDER BY since")
