/* ckpt_arm.c - a pending checkpoint armed on the servers (see ckpt_arm.h). */
#include "ctrl/ckpt_arm.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"

static bool holds(const struct zs_job *j, uint64_t server)
{
	for (uint32_t q = 0; q < j->placement.n_shards; q++)
		if (j->placement.shards[q].server_id == server)
			return true;
	return false;
}

enum zs_status zs_ckpt_arm(struct zs_coord_client *c, const struct zs_job *j, uint64_t id,
			   uint64_t step, int timeout_ms, struct zs_error *err)
{
	struct zs_task task = {.kind = ZS_TASK_SNAPSHOT, .id = id, .step = step};
	const bool repl = j->spec.replicas > 1;
	struct zs_server_info *s = NULL;
	uint32_t n = 0;
	enum zs_status st;

	snprintf(task.job, sizeof task.job, "%s", j->spec.name);
	if ((st = zs_coord_servers(c, &s, &n, err)))
		return st;
	for (uint32_t i = 0; !st && i < n; i++) {
		const bool holder = holds(j, s[i].id);
		if (!holder && !(repl && s[i].up))
			continue;
		if (repl && !s[i].up) {
			zs_warn("checkpoint %llu: server %llu (%s) is down (the job's replicas take over; the checkpoint will not commit)",
				(unsigned long long)id, (unsigned long long)s[i].id, s[i].addr);
			continue;
		}
		st = zs_server_snapshot(s[i].addr, timeout_ms, &task, err);
		if (st && !holder) /* holds none of it, or cannot say */
			st = ZS_OK;
		if (repl && (st == ZS_EUNAVAIL || st == ZS_ETIMEDOUT)) {
			/* lost or stopped: its failover fails this checkpoint;
			 * training goes on and the next one is taken */
			zs_warn("checkpoint %llu: %s (the job's replicas take over; the checkpoint will not commit)",
				(unsigned long long)id, err->msg);
			st = ZS_OK;
		}
	}
	free(s);
	return st;
}
