/*
 * hparams.c - hyperparameters per step (include/zshard.h): the trainer
 * sends the table it sets to every server it is connected to, as a HPARAMS
 * frame ahead of its pushes, and waits for each to take it.
 */
#include "client/trainer.h"

#include <math.h>

#include "model/hptables.h"

unsigned zs_trainer_groups(const zs_trainer *t) { return t->job.spec.optim.n_groups; }

int zs_trainer_hparams(const zs_trainer *t, unsigned group, struct zs_hparams *h,
		       double *clip_norm)
{
	const struct zs_optim *o = &t->job.spec.optim;
	const struct zs_hp *g;

	if (group >= o->n_groups || !h)
		return ZS_EINVAL;
	g = t->hps.set ? &t->hps.now.g[group] : &o->groups[group];
	*h = (struct zs_hparams){g->lr, g->weight_decay, g->beta1, g->beta2, g->eps, g->momentum};
	if (clip_norm)
		*clip_norm = t->hps.set ? t->hps.now.clip_norm : o->clip_norm;
	return ZS_OK;
}

/* Posts tab to every connection, as one op, and waits for all of them. */
static int send_table(zs_trainer *t, const struct zs_hp_table *tab, struct zs_error *err)
{
	uint8_t payload[ZS_HP_MAX_BYTES];
	size_t len = zs_hp_encode(tab, payload);
	uint32_t n = t->n_srv ? t->n_srv : 1;
	zs_op *op = calloc(1, sizeof *op + n * (sizeof op->req[0] + sizeof *op->rq));
	int rc;

	if (!op)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	op->t = t;
	op->step = tab->step;
	if (tr_loss(t)->resends) /* a lost server needs its table no more */
		op->rq = (struct tr_rq *)&op->req[n];
	for (uint32_t i = 0; i < t->n_srv; i++) {
		if (op->rq)
			op->rq[op->n] = (struct tr_rq){.server = t->srv_id[i], .hparams = true};
		enum zs_status st = zs_post_hparams(t->conn[i], tab->step, payload, len,
						    &op->req[op->n], err);
		if ((st == ZS_EUNAVAIL || st == ZS_ECANCELED) && op->rq) {
			op->req[op->n++] = NULL; /* a lost server: see tr_failover_req */
			continue;
		}
		if (st) { /* what was posted completes on its own; this is the answer */
			op->status = st == ZS_EAGAIN ? ZS_EAGAIN : st;
			zs_fmt(op->msg, sizeof op->msg, "%s",
			       st == ZS_EAGAIN ? "too many transfers in flight" : err->msg);
			break;
		}
		op->n++;
	}
	if (op->rq)
		tr_live_add(t, op);
	rc = tr_wait_or_park(t, op, tr_op_timeout(t));
	if (rc)
		zs_fail(err, (enum zs_status)rc, "%s", t->err);
	return rc;
}

int zs_set_hparams(zs_trainer *t, unsigned long long step, const struct zs_hparams *groups,
		   unsigned n_groups, double clip_norm)
{
	struct zs_hp_table tab = {.step = step, .n_groups = n_groups, .clip_norm = clip_norm};
	struct zs_error err = {0};
	enum zs_status st;

	if (!groups || n_groups == 0 || n_groups > ZS_MAX_GROUPS)
		return tr_fail(t, ZS_EINVAL, "%u optimizer groups given; job '%s' has %u",
			       n_groups, t->job.spec.name, t->job.spec.optim.n_groups);
	if (t->hps.set && step < t->hps.now.step)
		return tr_fail(t, ZS_EINVAL,
			       "hyperparameters for step %llu come after those for step %llu: "
			       "steps only go forward",
			       step, (unsigned long long)t->hps.now.step);
	for (unsigned g = 0; g < n_groups; g++)
		tab.g[g] = (struct zs_hp){groups[g].lr, groups[g].weight_decay, groups[g].beta1,
					  groups[g].beta2, groups[g].eps, groups[g].momentum};
	if ((st = zs_hp_table_check(&t->job.spec, &tab, &err)))
		return tr_fail(t, st, "%s", err.msg);
	t->hps.sending = &tab;
	st = send_table(t, &tab, &err);
	t->hps.sending = NULL;
	if (st)
		return tr_fail(t, st, "setting the hyperparameters of step %llu: %s", step, err.msg);
	t->hps.now = tab;
	t->hps.set = true;
	if (t->hps.n_hist == TR_HP_KEEP)
		memmove(t->hps.hist, t->hps.hist + 1, (TR_HP_KEEP - 1) * sizeof *t->hps.hist);
	else
		t->hps.n_hist++;
	t->hps.hist[t->hps.n_hist - 1] = tab;
	return ZS_OK;
}

int zs_step_grad_norm(zs_trainer *t, unsigned long long step, int timeout_ms, double *norm)
{
	struct zs_norm_report r = {.step = step, .server_id = 0};
	const int bound = timeout_ms > 0 ? timeout_ms : 60000;
	int64_t until = zs_now_ms() + bound, nap = 1;
	struct zs_error err = {0};
	double total = 0.0;
	enum zs_status st;

	if (!norm)
		return tr_fail(t, ZS_EINVAL, "no place for the norm");
	if (t->job.spec.optim.clip_norm <= 0.0)
		return tr_fail(t, ZS_ESTATE,
			       "job '%s' does not clip gradients: its servers compute no norm (a job "
			       "spec's clip_norm, zshard.torch's max_grad_norm, turns it on)",
			       t->job.spec.name);
	snprintf(r.job, sizeof r.job, "%s", t->job.spec.name);
	for (;;) {
		int64_t left = until - zs_now_ms();
		memset(&err, 0, sizeof err);
		st = zs_coord_report_norm(t->coord, &r, (int)(left > 1 ? left : 1), &total, &err);
		if (st != ZS_EAGAIN || left <= 0)
			break;
		zs_sleep_ms(nap < left ? nap : left, NULL); /* no server reported it yet */
		nap = nap < 16 ? nap * 2 : 16;
	}
	if (st == ZS_EAGAIN) /* err.msg: no server reported it */
		return tr_fail(t, ZS_ETIMEDOUT, "the gradient norm of step %llu: %s within %d ms",
			       step, err.msg, bound);
	if (st)
		return tr_fail(t, st, "the gradient norm of step %llu: %s", step, err.msg);
	*norm = sqrt(total);
	return ZS_OK;
}

/* Sends tab to c and waits for it to be taken. */
static enum zs_status table_to(zs_trainer *t, struct zs_conn *c, const struct zs_hp_table *tab,
			       struct zs_error *err)
{
	uint8_t payload[ZS_HP_MAX_BYTES];
	size_t len = zs_hp_encode(tab, payload);
	struct zs_req *r;
	enum zs_status st = zs_post_hparams(c, tab->step, payload, len, &r, err);

	if (!st)
		st = zs_req_wait(r, t->timeout_ms, err);
	if (st)
		zs_error_prefix(err, "the hyperparameters of step %llu to a server connected to now",
				(unsigned long long)tab->step);
	return st;
}

enum zs_status tr_hp_to_new(zs_trainer *t, struct zs_conn *c, struct zs_error *err)
{
	enum zs_status st = tr_world_to_new(t, c, err);
	const struct zs_hp_table *tabs[TR_HP_KEEP + 1];
	/* with the table being set when the failover came (its send waits
	 * for this connection's op to end): the step it is for is pushed here */
	uint32_t n = zs_hp_for_new(t->hps.hist, t->hps.n_hist, t->hps.sending, tabs);

	for (uint32_t i = 0; i < n && !st; i++)
		st = table_to(t, c, tabs[i], err);
	return st;
}
