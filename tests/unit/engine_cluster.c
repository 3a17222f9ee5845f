/*
 * engine_cluster.c - the engine tests' fixture: S in-process shard
 * engines behind real tcp and shm listeners, the norm exchange the
 * coordinator would run, and trainer threads that train the oracle's
 * synthetic gradient over them (engine_cluster.h).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/engine_cluster.h"
#include "tests/oracle.h"
#include "base/util.h"
#include "math/optim.h"
#include "model/placement.h"

int with_groups;

void make_job(struct zs_job *j, int S, uint32_t R, enum zs_optim_kind kind,
	      enum zs_dtype dt)
{
	struct place_server sv[MAXS];

	memset(j, 0, sizeof *j);
	oracle_spec(&j->spec, "t", R, kind, dt);
	if (with_groups == 2)
		oracle_spec_frozen(&j->spec);
	else if (with_groups)
		oracle_spec_groups(&j->spec);
	for (int s = 0; s < S; s++)
		sv[s] = (struct place_server){.id = (uint64_t)s + 1,
					      .free_bytes = UINT64_MAX};
	assert_int_equal(place_job(&j->spec, sv, (size_t)S, NULL, &j->placement, NULL),
			 ZS_OK);
	snprintf(j->token, sizeof j->token, "%s", job_token);
	snprintf(j->reader_token, sizeof j->reader_token, "%s", job_reader_token);
	j->spec.reader_pins = job_reader_pins;
	j->spec.reader_idle_ms = job_reader_idle_ms;
}

uint64_t tier_budget;
uint64_t land_budget;
const char *job_token = "", *job_reader_token = "";
uint32_t job_reader_pins, job_reader_idle_ms;
char tier_dir[64];

static enum zs_status exchange(void *ctx, const char *job, uint64_t timeline, uint64_t step,
			       const struct zs_shard_norm *norms, uint32_t n,
			       double *total, struct zs_error *err)
{
	struct exchange *x = ctx;
	(void)job;
	(void)timeline;
	(void)err;
	pthread_mutex_lock(&x->mu);
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t k = 0; k < x->p->n_shards; k++)
			if (x->p->shards[k].unit == norms[i].unit &&
			    x->p->shards[k].index == norms[i].index && !x->have[k]) {
				x->sumsq[k] = norms[i].sumsq;
				x->have[k] = true;
				x->n_have++;
			}
	if (x->n_have == x->p->n_shards) {
		x->total = 0.0;
		for (uint32_t k = 0; k < x->p->n_shards; k++)
			x->total += x->sumsq[k];
		memset(x->have, 0, x->p->n_shards * sizeof *x->have);
		x->n_have = 0;
		x->done_step = step + 1;
		pthread_cond_broadcast(&x->cv);
	}
	while (x->done_step <= step)
		pthread_cond_wait(&x->cv, &x->mu);
	*total = x->total;
	pthread_mutex_unlock(&x->mu);
	return ZS_OK;
}

void start(struct cluster *c, int S, uint32_t R, enum zs_optim_kind kind,
	   enum zs_dtype dt, const struct zs_transport_ops *t)
{
	start_clip(c, S, R, kind, dt, t, 0.0);
}

void start_clip(struct cluster *c, int S, uint32_t R, enum zs_optim_kind kind,
		enum zs_dtype dt, const struct zs_transport_ops *t, double clip)
{
	struct zs_error err = {0};

	memset(c, 0, sizeof *c);
	c->S = S;
	c->t = t;
	make_job(&c->job, S, R, kind, dt);
	c->job.spec.optim.clip_norm = clip;
	pthread_mutex_init(&c->ex.mu, NULL);
	pthread_cond_init(&c->ex.cv, NULL);
	c->ex.p = &c->job.placement;
	c->ex.sumsq = calloc(c->job.placement.n_shards, sizeof(double));
	c->ex.have = calloc(c->job.placement.n_shards, sizeof(bool));
	for (int s = 0; s < S; s++) {
		struct zs_listener_opts o = {
		    .at = {{&zs_tcp_endpoint, "127.0.0.1:0", c->tcp[s]},
			   {&zs_shm_endpoint, NULL, c->shm[s]}},
		    .arena_bytes = 16u << 20};
		assert_int_equal(engine_create(2, 0, &c->e[s], NULL), ZS_OK);
		engine_set_norm_exchange(c->e[s], exchange, &c->ex);
		if (land_budget)
			engine_set_landing(c->e[s], land_budget);
		if (tier_budget) {
			char d[128];
			snprintf(d, sizeof d, "%s/s%d", tier_dir, s);
			assert_int_equal(engine_set_tier(c->e[s], d, tier_budget, NULL),
					 ZS_OK);
		}
		if (zs_listener_start(&o, engine_target(c->e[s]), &c->l[s], &err))
			fail_msg("%s", err.msg);
		engine_set_listener(c->e[s], c->l[s]);
		if (engine_add_job(c->e[s], &c->job, (uint64_t)s + 1, &err))
			fail_msg("%s", err.msg);
	}
}

void stop(struct cluster *c)
{
	for (int s = 0; s < c->S; s++) {
		zs_listener_stop(c->l[s]); /* no more calls into the engine */
		engine_free(c->e[s]);
		zs_listener_free(c->l[s]);
	}
	zs_job_release(&c->job);
	free(c->ex.sumsq);
	free(c->ex.have);
	pthread_cond_destroy(&c->ex.cv);
	pthread_mutex_destroy(&c->ex.mu);
}

struct zs_conn *conn_to(struct cluster *c, int s, uint32_t rank)
{
	struct zs_conn_opts o = {.addr =
				     c->t == &zs_shm_transport ? c->shm[s] : c->tcp[s],
				 .job = "t",
				 .token = job_token,
				 .rank = rank,
				 .timeout_ms = 5000};
	struct zs_conn *conn;
	struct zs_error err = {0};
	if (zs_connect(c->t, &o, &conn, &err))
		fail_msg("connect: %s", err.msg);
	return conn;
}

static int srv_index(uint64_t id)
{
	return (int)id - 1;
}

/* Reads unit u at step t into dst, or writes src to it, one transfer per
 * shard; a failed post stops posting but still waits for what was posted. */
static int xfer_unit(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t,
		     void *dst, const void *src, enum zs_dtype dt, bool init,
		     bool partial, char *why)
{
	unsigned dsz = zs_dtype_size(dt);
	const char *what = src ? "push" : "gather";
	struct zs_req *r[64];
	uint32_t n = 0;
	struct zs_error err = {0};
	int rc = 0;

	for (uint32_t i = 0; i < c->job.placement.n_shards; i++) {
		static const uint8_t mark[8];
		const struct zs_shard *sh = &c->job.placement.shards[i];
		/* a frozen shard's push is a step mark (model.h) */
		bool is_mark = src && !init && zs_shard_marks(&c->job.spec, sh);
		struct zs_xfer x = {.unit = u,
				    .offset = sh->offset,
				    .length = is_mark ? ZS_MARK_LEN : sh->length,
				    .step = t,
				    .dtype = dt,
				    .init = init,
				    .partial = partial};
		struct zs_conn *cn = conn[srv_index(sh->server_id)];
		if (sh->unit != u)
			continue;
		if (n == sizeof r / sizeof r[0]) {
			zs_fmt(why, 512, "post %s: more than %u shards", what, n);
			rc = -1;
			break;
		}
		if (src ? zs_post_write(cn, &x,
					is_mark ? mark : (const uint8_t *)src + sh->offset * dsz,
					&r[n], &err)
			: zs_post_read(cn, &x, (uint8_t *)dst + sh->offset * dsz, &r[n],
				       &err)) {
			zs_fmt(why, 512, "post %s: %s", what, err.msg);
			rc = -1;
			break;
		}
		n++;
	}
	for (uint32_t i = 0; i < n; i++)
		if (zs_req_wait(r[i], 20000, &err)) {
			zs_fmt(why, 512, "%s: %s", what, err.msg);
			rc = -1;
		}
	return rc;
}

/* Gathers unit u at step t into out (f32), over all shards. */
int gather_unit(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t,
		float *out, char *why)
{
	const struct zs_unit *un = &c->job.spec.layout.units[u];
	uint8_t *raw = malloc(un->numel * zs_dtype_size(un->dtype));
	int rc = xfer_unit(c, conn, u, t, raw, NULL, un->dtype, false, false, why);

	zs_convert_to_f32(out, raw, un->dtype, un->numel);
	free(raw);
	return rc;
}

int push_unit_p(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t,
		const void *data, enum zs_dtype dt, bool init, bool partial, char *why)
{
	return xfer_unit(c, conn, u, t, NULL, data, dt, init, partial, why);
}

int push_unit(struct cluster *c, struct zs_conn **conn, uint32_t u, uint64_t t,
	      const void *data, enum zs_dtype dt, bool init, char *why)
{
	return push_unit_p(c, conn, u, t, data, dt, init, false, why);
}

int upload_init(struct cluster *c, struct zs_conn **conn, char *why)
{
	const struct zs_layout *l = &c->job.spec.layout;
	int rc = 0;

	for (uint32_t u = 0; u < l->n_units && !rc; u++) {
		float *p = malloc(l->units[u].numel * 4);
		if (!p) {
			zs_fmt(why, 512, "out of memory");
			return -1;
		}
		for (uint64_t i = 0; i < l->units[u].numel; i++)
			p[i] = oracle_init(u, i);
		rc = push_unit(c, conn, u, 0, p, ZS_F32, true, why);
		free(p);
	}
	return rc;
}

void *trainer_main(void *arg)
{
	struct trainer *tr = arg;
	struct cluster *c = tr->c;
	struct zs_conn *conn[MAXS];
	const struct zs_layout *l = &c->job.spec.layout;

	for (int s = 0; s < c->S; s++)
		conn[s] = conn_to(c, s, tr->rank);
	for (uint64_t t = tr->t0; t < STEPS && !tr->failed; t++) {
		/* backward order, as a trainer pushes */
		for (int u = (int)l->n_units - 1; u >= 0 && !tr->failed; u--) {
			const struct zs_unit *un = &l->units[u];
			float *p = malloc(un->numel * 4), *g = malloc(un->numel * 4);
			uint16_t *g16 = malloc(un->numel * 2);
			if (gather_unit(c, conn, (uint32_t)u, t, p, tr->why))
				tr->failed = 1;
			for (uint32_t mb = 0; mb < tr->K && !tr->failed; mb++) {
				for (uint64_t i = 0; i < un->numel; i++)
					g[i] = tr->K == 1
						   ? oracle_grad(p[i], (uint32_t)u, i,
								 tr->rank, t)
						   : oracle_grad_mb(p[i], (uint32_t)u, i,
								    tr->rank, t, mb);
				zs_convert_from_f32(un->dtype == ZS_F32 ? (void *)g : g16,
						    un->dtype, g, un->numel);
				/* micro-batches before the last are partial pushes */
				if (push_unit_p(c, conn, (uint32_t)u, t,
						un->dtype == ZS_F32 ? (void *)g : g16,
						un->dtype, false, mb + 1 < tr->K,
						tr->why))
					tr->failed = 1;
			}
			free(p);
			free(g);
			free(g16);
		}
	}
	for (int s = 0; s < c->S; s++)
		zs_conn_close(conn[s]);
	return NULL;
}

void run_oracle(int S, uint32_t R, enum zs_optim_kind kind, enum zs_dtype dt,
		const struct zs_transport_ops *t, uint32_t K, double clip)
{
	struct cluster c;
	struct trainer tr[MAXR];
	pthread_t th[MAXR];
	struct zs_conn *conn[MAXS];
	float *ref[4], *got;
	char why[512];

	start_clip(&c, S, R, kind, dt, t, clip);
	const struct zs_layout *l = &c.job.spec.layout;
	/* rank 0 uploads the initial parameters */
	for (int s = 0; s < S; s++)
		conn[s] = conn_to(&c, s, 0);
	if (upload_init(&c, conn, why))
		fail_msg("init: %s", why);
	for (uint32_t r = 0; r < R; r++) {
		tr[r] = (struct trainer){.c = &c, .rank = r, .K = K};
		pthread_create(&th[r], NULL, trainer_main, &tr[r]);
	}
	for (uint32_t r = 0; r < R; r++) {
		pthread_join(th[r], NULL);
		if (tr[r].failed)
			fail_msg("S=%d R=%u %s: rank %u: %s", S, R, t->name, r,
				 tr[r].why);
	}
	/* the final parameters (f32 units bitwise; bf16 through their copy) */
	for (uint32_t u = 0; u < l->n_units; u++) {
		ref[u] = malloc(l->units[u].numel * 4);
	}
	oracle_reference_full(&c.job.spec, &c.job.placement, STEPS, K, ref);
	for (uint32_t u = 0; u < l->n_units; u++) {
		const struct zs_unit *un = &l->units[u];
		got = malloc(un->numel * 4);
		if (gather_unit(&c, conn, u, STEPS, got, why))
			fail_msg("final gather: %s", why);
		for (uint32_t k = 0; k < un->n_tensors; k++) /* frozen: as uploaded */
			for (uint64_t i = un->tensors[k].offset;
			     un->tensors[k].frozen && i < un->tensors[k].offset + un->tensors[k].numel;
			     i++)
				if (got[i] != oracle_round(un->dtype, oracle_init(u, i)))
					fail_msg("frozen tensor %s changed: element %llu %.9g, was %.9g",
						 un->tensors[k].name, (unsigned long long)i, got[i],
						 oracle_init(u, i));
		for (uint64_t i = 0; i < un->numel; i++) {
			float want = ref[u][i];
			if (memcmp(&got[i], &want, 4))
				fail_msg("S=%d R=%u K=%u clip=%g %s %s %s: unit %u "
					 "element %llu: %.9g, reference %.9g",
					 S, R, K, clip, t->name, zs_optim_name(kind),
					 zs_dtype_name(dt), u, (unsigned long long)i,
					 got[i], want);
		}
		free(got);
		free(ref[u]);
	}
	if (land_budget) {
		for (int s = 0; s < S; s++) {
			struct engine_stats es;
			engine_stats(c.e[s], &es);
			assert_int_equal(es.landing_bytes,
					 0); /* every buffer given back */
			printf("S=%d R=%u %s: server %d: %llu pushes waited for landing "
			       "room\n",
			       S, R, t->name, s, (unsigned long long)es.landing_waits);
		}
	}
	if (tier_budget) {
		uint32_t tiered = 0;
		uint64_t rd = 0, wr = 0;
		for (int s = 0; s < S; s++) {
			struct engine_stats es;
			engine_stats(c.e[s], &es);
			tiered += es.tiered;
			rd += es.tier_read;
			wr += es.tier_written;
		}
		if (!tiered || !rd || !wr)
			fail_msg(
			    "the tier was not used (%u shards, %llu read, %llu written)",
			    tiered, (unsigned long long)rd, (unsigned long long)wr);
	}
	for (int s = 0; s < S; s++)
		zs_conn_close(conn[s]);
	stop(&c);
}
