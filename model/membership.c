/*
 * membership.c - the coordinator's judgement of a shard server (see
 * membership.h).
 */
#include "model/membership.h"

#include "base/mutant.h"

void zs_mbr_loaded(struct zs_mbr *m) { *m = (struct zs_mbr){.state = ZS_MBR_UNHEARD}; }

/* Heard at now: up, and whether it came up with this. */
static unsigned heard(struct zs_mbr *m, int64_t now)
{
	bool was = m->state == ZS_MBR_UP;

	m->state = ZS_MBR_UP;
	m->last_hb_ms = now;
	m->unheard_since_ms = 0;
	return was ? 0 : ZS_MBR_CAME_UP;
}

unsigned zs_mbr_registered(struct zs_mbr *m, int64_t now, bool fresh)
{
	return heard(m, now) | (fresh ? ZS_MBR_RESTARTED : 0);
}

unsigned zs_mbr_heartbeat(struct zs_mbr *m, int64_t now) { return heard(m, now); }

unsigned zs_mbr_judge(struct zs_mbr *m, int64_t now, uint32_t lease_ms, int64_t *quiet)
{
	int64_t from;

	*quiet = 0;
	if (m->state == ZS_MBR_DOWN)
		return 0;
	if (m->state == ZS_MBR_UNHEARD) {
		if (ZS_MUTANT(ZS_MUT_UNHEARD_NEVER_JUDGED))
			return 0;
		if (!m->unheard_since_ms)
			m->unheard_since_ms = now; /* its lease begins */
		from = m->unheard_since_ms;
	} else {
		from = m->last_hb_ms;
	}
	*quiet = now - from;
	if (*quiet <= (int64_t)lease_ms)
		return 0;
	m->state = ZS_MBR_DOWN;
	return ZS_MBR_LOST;
}

bool zs_mbr_up(const struct zs_mbr *m) { return m->state == ZS_MBR_UP; }

bool zs_mbr_down(const struct zs_mbr *m) { return m->state == ZS_MBR_DOWN; }

int64_t zs_mbr_seen_ago(const struct zs_mbr *m, int64_t now)
{
	return m->last_hb_ms ? now - m->last_hb_ms : -1;
}
