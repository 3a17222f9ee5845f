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
};

const char *zs_mutant_name(int k)
{
	return k >= 0 && k < ZS_MUT_COUNT ? names[k] : NULL;
}
