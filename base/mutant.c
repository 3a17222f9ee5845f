/*
 * mutant.c - the planted bugs' names (base/mutant.h), and the choice a
 * mutant build reads.
 */
#include "base/mutant.h"

#include <stddef.h>

#ifdef ZS_MUTANTS
int zs_mutant;
#endif

static const char *const names[ZS_MUT_COUNT] = {
	[ZS_MUT_NONE] = "none",
	[ZS_MUT_BACK_IGNORED] = "back-ignored",
	[ZS_MUT_RECONNECTING_GONE] = "reconnecting-gone",
	[ZS_MUT_OLDER_COUNT] = "older-count",
	[ZS_MUT_RENEWAL_CLEARS_AT_ONCE] = "renewal-clears-at-once",
	[ZS_MUT_UNHEARD_RECONNECT] = "unheard-reconnect",
	[ZS_MUT_OTHER_PROCESS] = "other-process",
	[ZS_MUT_UNSENT_LOST] = "unsent-lost",
	[ZS_MUT_PAIR_CANCELLED] = "pair-cancelled",
	[ZS_MUT_DROP_UNLISTED] = "drop-unlisted",
	[ZS_MUT_OLDEST_COUNT] = "oldest-count",
	[ZS_MUT_ODD_NOT_AWAITED] = "odd-not-awaited",
	[ZS_MUT_REDO_COUNTED_TWICE] = "redo-counted-twice",
	[ZS_MUT_PARTIAL_EMPTIES_FULL] = "partial-empties-full",
	[ZS_MUT_RESENT_COUNTED] = "resent-counted",
	[ZS_MUT_ABORT_KEEPS_SLOT] = "abort-keeps-slot",
	[ZS_MUT_FORWARD_TWICE] = "forward-twice",
	[ZS_MUT_ACK_BEFORE_COPIES] = "ack-before-copies",
	[ZS_MUT_LANDING_DECIDES] = "landing-decides",
	[ZS_MUT_AHEAD_REFUSES] = "ahead-refuses",
	[ZS_MUT_FRONTIER_AT_VERSION] = "frontier-at-version",
	[ZS_MUT_PROMOTED_SENDS_NOTHING] = "promoted-sends-nothing",
	[ZS_MUT_OLDER_FORWARD_SETTLES] = "older-forward-settles",
	[ZS_MUT_SEED_GAP_IGNORED] = "seed-gap-ignored",
	[ZS_MUT_SETTLED_AT_SEED] = "settled-at-seed",
	[ZS_MUT_LANDING_NOT_HELD] = "landing-not-held",
	[ZS_MUT_STALE_SEEDED] = "stale-seeded",
	[ZS_MUT_DOWN_ROLLS_BACK] = "down-rolls-back",
	[ZS_MUT_PUSH_BEFORE_KNOWN] = "push-before-known",
	[ZS_MUT_SENDING_NOT_RESENT] = "sending-not-resent",
	[ZS_MUT_SEEDED_SENDS_NOTHING] = "seeded-sends-nothing",
	[ZS_MUT_SEED_WITHOUT_PREV] = "seed-without-prev",
	[ZS_MUT_COMMIT_BEFORE_LAST] = "commit-before-last",
	[ZS_MUT_DURABLE_TWICE] = "durable-twice",
	[ZS_MUT_ANY_INCARNATION] = "any-incarnation",
	[ZS_MUT_BAD_NOT_FALLEN_BACK] = "bad-not-fallen-back",
	[ZS_MUT_SETTLED_UNCHECKED] = "settled-unchecked",
	[ZS_MUT_NORM_COUNTED_TWICE] = "norm-counted-twice",
	[ZS_MUT_KEPT_ANY_TIMELINE] = "kept-any-timeline",
	[ZS_MUT_OLD_TIMELINE_COUNTED] = "old-timeline-counted",
	[ZS_MUT_TREE_ANY_TIMELINE] = "tree-any-timeline",
	[ZS_MUT_TREE_NON_RELAY] = "tree-non-relay",
	[ZS_MUT_PIN_UNSTAMPED] = "pin-unstamped",
	[ZS_MUT_READER_IDS_RESTART] = "reader-ids-restart",
	[ZS_MUT_RELAY_ANY_TIMELINE] = "relay-any-timeline",
	[ZS_MUT_STALE_ANSWER] = "stale-answer",
	[ZS_MUT_LATEST_NOT_HIGHEST] = "latest-not-highest",
	[ZS_MUT_FAILOVER_RESUME_LOST] = "failover-resume-lost",
	[ZS_MUT_GIVEN_UP_UNASKED] = "given-up-unasked",
	[ZS_MUT_BACK_AWAITED] = "back-awaited",
	[ZS_MUT_SEED_OF_LOST_TAKEN] = "seed-of-lost-taken",
	[ZS_MUT_PLACED_ANEW_KEPT] = "placed-anew-kept",
	[ZS_MUT_UNHEARD_NEVER_JUDGED] = "unheard-never-judged",
	[ZS_MUT_DOWN_NOT_RETRIED] = "down-not-retried",
	[ZS_MUT_STOP_BEFORE_GROW] = "stop-before-grow",
	[ZS_MUT_RESIZE_AT_THREE] = "resize-at-three",
};

const char *zs_mutant_name(int k)
{
	return k >= 0 && k < ZS_MUT_COUNT ? names[k] : NULL;
}
