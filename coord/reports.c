/*
 * reports.c - per-rank step reports (in memory only): each trainer's latest
 * one, kept per job for zshardctl stats.
 */
#include "coord/rpc.h"
#include "coord/lookup.h"
#include "coord/recovery.h"
#include "coord/session.h"

void coord_drop_reports(struct coord *c, const char *job)
{
	for (struct sreports **pp = &c->reports; *pp; pp = &(*pp)->next)
		if (!strcmp((*pp)->job, job)) {
			struct sreports *x = *pp;
			*pp = x->next;
			free(x->r);
			free(x);
			return;
		}
}
/* ------------------------------------------------------- step reports */

void coord_h_report_step(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char job[ZS_JOB_NAME_MAX];
	struct zs_step_report r;
	struct zs_error e = {0};
	struct sreports *sr;
	struct zs_buf b;
	struct zs_job *j;
	uint32_t rank, wmax;
	struct zs_step_answer an;
	bool has, has_begun, redo;
	struct zs_step_state begun, rd;
	enum zs_status st;

	if (zs_dec_report_step(p, n, job, &rank, &r, &has, &begun, &has_begun, &e))
		return coord_reply_err(call, &e);
	pthread_mutex_lock(&c->mu);
	j = coord_job_or_fail(c, call, job);
	if (!j) {
		pthread_mutex_unlock(&c->mu);
		free(begun.data);
		return;
	}
	wmax = zs_world_max(&j->spec, &j->worlds);
	if (rank >= wmax) {
		pthread_mutex_unlock(&c->mu);
		free(begun.data);
		return zs_rpc_fail(call, ZS_EINVAL, "rank %u is out of range for job '%s' (world size %u)",
				   rank, job, zs_world_last(&j->spec, &j->worlds));
	}
	an = (struct zs_step_answer){.stage = j->spec.stage,
				     .checkpoint_every = j->spec.checkpoint_every,
				     .stop_before = j->stop_before,
				     .worlds = j->worlds};
	for (sr = c->reports; sr && strcmp(sr->job, job); sr = sr->next)
		;
	if (has && !sr && (sr = calloc(1, sizeof *sr))) {
		snprintf(sr->job, sizeof sr->job, "%s", job);
		sr->next = c->reports;
		c->reports = sr;
	}
	if (has && sr && sr->n < wmax) { /* a resize's new ranks */
		struct zs_step_report *g = realloc(sr->r, wmax * sizeof *g);
		if (g) {
			memset(g + sr->n, 0, (wmax - sr->n) * sizeof *g);
			sr->r = g;
			sr->n = wmax;
		}
	}
	if (has && sr) /* what a stop is set past (model/boundary.h) */
		zs_btop_heard(&sr->top, j->timeline, r.step);
	if (has && sr && rank < sr->n) { /* a report that cannot be kept is dropped: stats only */
		r.rank = rank;
		r.reported_ms = zs_now_ms();
		sr->r[rank] = r;
	}
	/* the step the rank begins, from a rank that holds it (not a lost
	 * process's report still on its way), on the job's timeline (not a
	 * report sent before a rollback) */
	if (has_begun && begun.timeline == j->timeline)
		for (uint32_t i = 0; i < j->n_trainers; i++)
			if (j->trainers[i].rank == rank && j->trainers[i].session) {
				coord_step_begun(c, j, rank, &begun);
				break;
			}
	free(begun.data);
	redo = coord_redo_of(c, j, rank, &rd);
	st = zs_enc_report_step_reply(&an, redo ? &rd : NULL, &b);
	pthread_mutex_unlock(&c->mu);
	coord_reply_buf(call, st, &b);
}

void coord_h_step_reports(void *ctx, struct zs_rpc_call *call, const uint8_t *p, size_t n)
{
	struct coord *c = ctx;
	char name[ZS_JOB_NAME_MAX];
	struct zs_step_report *out = NULL;
	uint32_t n_out = 0;
	struct sreports *sr;
	struct zs_buf b;

	pthread_mutex_lock(&c->mu);
	if (!coord_lookup(c, call, p, n, name)) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	for (sr = c->reports; sr && strcmp(sr->job, name); sr = sr->next)
		;
	if (sr && !(out = malloc(sr->n * sizeof *out))) {
		pthread_mutex_unlock(&c->mu);
		return zs_rpc_fail(call, ZS_ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; sr && i < sr->n; i++)
		if (sr->r[i].reported_ms)
			out[n_out++] = sr->r[i];
	pthread_mutex_unlock(&c->mu);
	coord_reply_buf(call, zs_enc_step_reports(out, n_out, &b), &b);
	free(out);
}
