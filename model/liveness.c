/*
 * liveness.c - the coordinator's judgement of a trainer's life: pure
 * (model/liveness.h). Every write of a struct zs_live is here.
 */
#include "model/liveness.h"

#include "base/mutant.h"

/* Whether the trainer told of a reconnect begun after its connection of
 * reconnect count c was made (c odd: made during reconnect c, and the
 * next begins at c + 2; even: the next begins at c + 1). */
static bool reconnected_since(uint64_t told, uint64_t c)
{
	return told > c + (c & 1);
}

void zs_live_joined(struct zs_live *m, int64_t now)
{
	*m = (struct zs_live){.last_hb_ms = now};
}

void zs_live_renewed(struct zs_live *m, int64_t now, uint64_t reconnects)
{
	m->last_hb_ms = now;
	/* alive: the drop was a reconnect's (its count moved: it began or
	 * ended one); unless this renewal may have left before the drop, sent
	 * by a process that then died: one a renewal period after it did not */
	if (m->dropped_ms &&
	    (reconnected_since(reconnects, m->dropped_count) ||
	     now - m->dropped_ms >= ZS_LIVE_RENEW_MS || ZS_MUTANT(ZS_MUT_RENEWAL_CLEARS_AT_ONCE)))
		m->dropped_ms = 0;
	/* renewals travel on their own connections and may arrive out of
	 * order: the count only grows */
	if (reconnects > m->reconnects || ZS_MUTANT(ZS_MUT_OLDER_COUNT))
		m->reconnects = reconnects;
}

enum zs_live_mark zs_live_connections(struct zs_live *m, int64_t now, bool back, uint64_t count,
				      uint64_t session, uint64_t member)
{
	if (session && session != member && !ZS_MUTANT(ZS_MUT_OTHER_PROCESS))
		return ZS_LIVE_SAME; /* an earlier process's connections */
	if (back) { /* connected again: alive, whatever its lease */
		if (!m->dropped_ms || ZS_MUTANT(ZS_MUT_BACK_IGNORED))
			return ZS_LIVE_SAME;
		m->dropped_ms = 0;
		return ZS_LIVE_CLEARED;
	}
	if (reconnected_since(m->reconnects, count))
		return ZS_LIVE_SAME; /* a reconnect's */
	if (m->dropped_ms && count <= m->dropped_count)
		return ZS_LIVE_SAME;
	/* marked, or marked again for newer connections (a renewal that
	 * may have left before them must not clear it) */
	m->dropped_ms = now ? now : 1;
	m->dropped_count = count;
	return ZS_LIVE_MARKED;
}

enum zs_live_verdict zs_live_judge(struct zs_live *m, int64_t now, const struct zs_live_cfg *cfg,
				   int64_t *quiet)
{
	/* it said it is reconnecting (odd); or the connections that ended are
	 * of a reconnect the coordinator has not heard of (it restarted since
	 * the trainer said it: the count is not persisted) */
	bool reconnecting = ((m->reconnects & 1) && !ZS_MUTANT(ZS_MUT_RECONNECTING_GONE)) ||
			    (m->dropped_ms && m->dropped_count > m->reconnects &&
			     !ZS_MUTANT(ZS_MUT_UNHEARD_RECONNECT));

	if (!m->last_hb_ms)
		m->last_hb_ms = now;
	*quiet = now - m->last_hb_ms;
	if (*quiet > (int64_t)cfg->lease_ms)
		return ZS_LIVE_LAPSED;
	if (m->dropped_ms && !reconnecting && *quiet > (int64_t)cfg->gone_ms)
		return ZS_LIVE_GONE;
	return ZS_LIVE_OK;
}

const char *zs_live_verdict_name(enum zs_live_verdict v)
{
	static const char *const names[] = {"ok", "gone", "lapsed"};

	return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "?";
}
