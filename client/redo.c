/*
 * redo.c - the trainer's side of "a lost trainer costs one step": the
 * rank's state as of each step's start (zs_set_step_state), which the step
 * boundary hands to the coordinator (the lease thread sends it with the
 * boundary's report), the wait that keeps a step's first push behind the
 * coordinator's knowing the step, and, in a process that replaces a lost
 * rank, the step it computes again (zs_trainer_resume asks), whose pushes
 * carry ZS_WF_REDO so that the servers count the rank's terms once.
 *
 * Why the first push waits: a replacement redoes the step the coordinator
 * last heard the rank begin; the servers keep one step back of each shard
 * (engine/redo.c), enough only if no shard has applied a step the rank
 * pushed to that the coordinator did not hear of. The report is sent at the
 * boundary, while the step's first gathers run, so the wait costs nothing
 * unless the coordinator is away; past STATE_WAIT_MS the push goes on (a
 * coordinator that restarts forgets every rank's step anyway: a loss then
 * rolls the job back).
 */
#include "client/trainer.h"

#include "model/redo.h"

#include "base/log.h"

#define STATE_WAIT_MS 2000

int zs_set_step_state(zs_trainer *t, unsigned long long step, const void *state, unsigned len)
{
	uint8_t *d = NULL;

	if (len > ZS_BLOB_MAX)
		return tr_fail(t, ZS_EINVAL, "a step state of %u bytes (at most %u)", len, ZS_BLOB_MAX);
	if (len && !state)
		return tr_fail(t, ZS_EINVAL, "a step state of %u bytes at NULL", len);
	if (len && !(d = malloc(len)))
		return tr_fail(t, ZS_ENOMEM, "out of memory");
	if (len)
		memcpy(d, state, len);
	pthread_mutex_lock(&t->ls.down_mu);
	free(t->ls.next.data);
	t->ls.next = (struct zs_step_state){.step = step, .len = len, .data = d};
	t->ls.next1 = step + 1;
	pthread_mutex_unlock(&t->ls.down_mu);
	return ZS_OK;
}

struct zs_step_state tr_state_take(zs_trainer *t, uint64_t step)
{
	struct zs_step_state s = {.step = step};

	pthread_mutex_lock(&t->ls.down_mu);
	if (t->ls.next1 == step + 1) {
		s = t->ls.next;
		t->ls.next = (struct zs_step_state){0};
		t->ls.next1 = 0;
	}
	pthread_mutex_unlock(&t->ls.down_mu);
	s.timeline = t->timeline;
	return s;
}

void tr_state_free(zs_trainer *t)
{
	free(t->ls.next.data);
	free(t->ls.begun.data);
	t->ls.next = t->ls.begun = (struct zs_step_state){0};
	t->ls.next1 = 0;
	t->ls.bbegun = false;
}

void tr_step_known(zs_trainer *t, uint64_t step)
{
	uint64_t k = atomic_load(&t->ls.known1);

	while (k < step + 1 && !atomic_compare_exchange_weak(&t->ls.known1, &k, step + 1))
		;
}

void tr_wait_step_known(zs_trainer *t, uint64_t step)
{
	int64_t deadline = zs_now_ms() + STATE_WAIT_MS;

	if (!t->ls.running || !zs_redo_push_waits(atomic_load(&t->ls.known1), step))
		return;
	pthread_mutex_lock(&t->ls.down_mu);
	while (zs_redo_push_waits(atomic_load(&t->ls.known1), step) && t->ls.running &&
	       zs_now_ms() < deadline) {
		struct timespec ts = zs_deadline_in(20);
		pthread_cond_timedwait(&t->ls.bcv, &t->ls.down_mu, &ts);
	}
	pthread_mutex_unlock(&t->ls.down_mu);
	if (zs_redo_push_waits(atomic_load(&t->ls.known1), step))
		zs_debug("rank %u of job '%s': the coordinator has not heard it begin step %llu within %d ms; it pushes (a loss of it now rolls the job back)",
			 t->rank, t->job.spec.name, (unsigned long long)step, STATE_WAIT_MS);
}

enum zs_status tr_redo_ask(zs_trainer *t, bool *redo, uint64_t *step, void *blob, unsigned cap,
			   unsigned *len, struct zs_error *err)
{
	struct zs_step_state rd;
	struct zs_step_answer an;
	enum zs_status st;

	t->redo_step1 = 0;
	*redo = false;
	st = zs_coord_report_step_ex(t->coord, t->job.spec.name, t->rank, NULL, NULL, &an, &rd,
				     redo, err);
	if (st || !*redo)
		return st;
	*step = rd.step;
	*len = rd.len;
	if (blob && rd.len)
		memcpy(blob, rd.data, rd.len < cap ? rd.len : cap);
	free(rd.data);
	t->redo_step1 = *step + 1;
	zs_info("rank %u of job '%s' replaces a process lost in step %llu: it computes that step again (%u bytes of its state)",
		t->rank, t->job.spec.name, (unsigned long long)*step, *len);
	return ZS_OK;
}
