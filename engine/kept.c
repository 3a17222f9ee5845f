/*
 * kept.c - which of a shard's versions a server can serve (engine/kept.h).
 */
#include "engine/kept.h"

#include "base/mutant.h"

enum eng_kept eng_kept_at(bool frozen, uint64_t version, uint64_t t, bool have_prev,
			  uint64_t prev_of, bool piped)
{
	if (frozen)
		return EK_NOW;
	if (version < t)
		return EK_LATER;
	if (version == t + 1 && have_prev && prev_of == t + 1)
		return EK_PREV;
	if (version != t || (piped && !have_prev))
		return EK_GONE;
	return EK_NOW;
}

bool eng_kept_seed_prev(bool have_prev, uint64_t prev_of, uint64_t version)
{
	return have_prev && version && prev_of == version && !ZS_MUTANT(ZS_MUT_SEED_WITHOUT_PREV);
}
