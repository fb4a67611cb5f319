package postgres

import (
	"maps"
	"slices"
	"strings"
)

// planSettings are set on every connection of the driver's pool (a URL's
// options=-c name=value takes precedence). They keep the planner on the
// claim-order index whatever the table's statistics say.
//
// Why: pgx prepares each statement once per connection, and after five
// executions Postgres may keep one generic plan for it for the life of the
// connection. A worker's connections often make those first executions on
// an empty queue, where the planner estimates one row, so reading the
// whole queue and sorting it, or joining by scanning every message of the
// queue, costs no more than an index lookup; the generic plan then does
// that for every claim and completion of the millions of messages pushed
// next, until new statistics invalidate it, and a queue that meets such
// plans runs several times slower.
//
// Turning these plan types off (the planner then uses them only when there
// is no other way) leaves index scans, which is what the driver's statements
// want, and the claim joins the rows it locked by ctid, which can only be
// looked up: a claim planned on an empty queue reads only the rows it
// claims (TestGenericClaimPlanReadsOnlyWhatItClaims). Settlements planned
// that way still read the queue's in-flight rows once per message they
// settle until new statistics make Postgres plan them again: a queue
// analyzes a table without statistics after its first push or claim
// (checkStats, vacuum.go), and again as it grows. (Rewriting the
// settlements' joins was slower; see the git history of this file.)
//
// plan_cache_mode is force_generic_plan: each statement is planned once per
// connection. Left to choose, Postgres compares the generic plan's cost with
// the custom plans' and kept planning the claim at every execution (the
// statistics of a queue that was empty made the custom plans look cheaper,
// though the plan was the same): planning was 9 % of the server's CPU end
// to end (perf). The settings above keep the generic plans on the indexes.
//
// jit is off too: a statement that has to sort anyway (peek) carries the
// planner's penalty for a disabled plan type in its cost, which is far above
// jit_above_cost, so every peek would pay for compiling it. The driver's statements
// are short, and none gains from JIT.
var planSettings = map[string]string{
	"enable_seqscan":    "off",
	"enable_bitmapscan": "off",
	"enable_sort":       "off",
	"jit":               "off",
	"plan_cache_mode":   "force_generic_plan",
}

// claimPlannedFunction is schema step 27: claim_lookup (step 26's
// claimFewerFunction) carrying the driver's planSettings itself, so that
// its statements are planned as the driver's own are on any connection.
// Through PgBouncer the driver cannot set them on its connections (startup
// parameters do not pass), and a pool given to New may lack them: there
// the function's generic plans went unprotected by the enable_* settings,
// and pass 1's window scan, whose LIMIT is a parameter, was planned at
// every call. Under callgrind that planning was 7 % of a capped claim's
// instructions; the settings cost a claim on the driver's own pool 0.6 %
// (performance.md). A later step that replaces the function keeps them by
// building on this text.
var claimPlannedFunction = mustReplace(claimFewerFunction,
	"LANGUAGE plpgsql AS $fn$", "LANGUAGE plpgsql\n"+functionPlanSettings()+"\nAS $fn$")

// functionPlanSettings is planSettings as the SET clauses of a function.
func functionPlanSettings() string {
	var set []string
	for _, name := range slices.Sorted(maps.Keys(planSettings)) {
		set = append(set, "SET "+name+" = "+planSettings[name])
	}
	return strings.Join(set, " ")
}
