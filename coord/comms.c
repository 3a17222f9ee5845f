/*
 * comms.c - the trainers' collective communicator ids (NCCL's unique id),
 * handed out through the job rather than a side channel: rank 0 makes one
 * for the job's timeline and offers it (CommId with an id); the other ranks
 * ask (CommId without) until it is there. Kept in memory by job and
 * timeline: a rollback starts a new timeline and so a new communicator; a
 * coordinator restart forgets them, and trainers that form one again offer
 * again.
 */
#include "coord/rpc.h"
#include "coord/lookup.h"
#include "coord/session.h"

#include <stdlib.h>
#include <string.h>

#include "ctrl/codec.h"

struct comm {
	char job[ZS_JOB_NAME_MAX];
	uint64_t timeline;
	uint8_t id[ZS_COMM_ID_BYTES];
	struct comm *next;
};

static struct comm *find(struct coord *c, const char *job)
{
	for (struct comm *m = c->comms; m; m = m->next)
		if (!strcmp(m->job, job))
			return m;
	return NULL;
}

void coord_drop_comm(struct coord *c, const char *job)
{
	for (struct comm **p = &c->comms; *p; p = &(*p)->next)
		if (!strcmp((*p)->job, job)) {
			struct comm *m = *p;
			*p = m->next;
			free(m);
			return;
		}
}

void coord_drop_comms(struct coord *c)
{
	while (c->comms) {
		struct comm *m = c->comms;
		c->comms = m->next;
		free(m);
	}
}

void coord_h_comm_id(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	uint8_t id[ZS_COMM_ID_BYTES];
	struct zs_error e = {0};
	struct zs_buf b;
	struct zs_job *j;
	struct comm *m;
	uint64_t timeline;
	uint32_t rank;
	bool offered;

	if (zs_dec_comm_id_req(p, n, name, &timeline, &rank, id, &offered, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, name);
	if (!j)
		goto out;
	if (timeline != j->timeline) {
		zs_rpc_fail(call, ZS_ESTATE,
			    "job '%s' is on timeline %llu, not %llu: it rolled back (resume)", name,
			    (unsigned long long)j->timeline, (unsigned long long)timeline);
		goto out;
	}
	if (offered && rank != 0) {
		zs_rpc_fail(call, ZS_EINVAL, "rank %u offered a communicator id: rank 0 makes it",
			    rank);
		goto out;
	}
	m = find(c, name);
	if (m && m->timeline != timeline) { /* an earlier timeline's */
		coord_drop_comm(c, name);
		m = NULL;
	}
	if (!m && !offered) {
		zs_rpc_fail(call, ZS_EAGAIN,
			    "rank 0 of job '%s' has not offered its communicator id yet", name);
		goto out;
	}
	if (m && offered && memcmp(m->id, id, sizeof id)) {
		zs_rpc_fail(call, ZS_EEXIST,
			    "job '%s' has another communicator id for timeline %llu", name,
			    (unsigned long long)timeline);
		goto out;
	}
	if (!m) {
		m = calloc(1, sizeof *m);
		if (!m) {
			zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
			goto out;
		}
		snprintf(m->job, sizeof m->job, "%s", name);
		m->timeline = timeline;
		memcpy(m->id, id, sizeof id);
		m->next = c->comms;
		c->comms = m;
	}
	if (zs_enc_comm_id(m->id, &b)) {
		zs_rpc_fail(call, ZS_ENOMEM, "cannot encode the reply");
		goto out;
	}
	zs_rpc_reply(call, b.data, b.len);
	zs_buf_release(&b);
out:
	pthread_mutex_unlock(&c->mu);
}
