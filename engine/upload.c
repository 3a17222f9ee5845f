/*
 * upload.c - a job's initial state landing before step 0: its parameters
 * (into the master, or a landing buffer for the tier or the device) and an
 * imported optimizer state (into the arena, then its array), for a
 * trainer's upload and a copy's seed alike.
 */
#include "engine/jobs.h"
#include "engine/step.h"

bool eng_state_whole(const struct eshard *s)
{
	unsigned want = ((1u << s->n_arrays) - 1) & ~1u; /* arrays 1 .. n_arrays - 1 */
	return (s->state_in & want) == want;
}

enum zs_status eng_init_begin(struct engine *e, struct ejob *j, struct eshard *s,
			      const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	enum zs_status st = ZS_OK;

	const unsigned k = x->state_read ? (unsigned)x->state : 0; /* 0: the parameters */
	const uint64_t taken = j->spec.optim.steps_taken;

	if (x->dtype != ZS_F32)
		st = zs_fail(err, ZS_EINVAL, "initial parameters and optimizer state are sent as f32");
	else if (s->version != 0 || s->in.full || x->step != 0)
		st = zs_fail(err, ZS_ESTATE,
			     "unit '%s' has trained (step %llu): initial %s come before step 0",
			     eng_unit_name(j, x->unit), (unsigned long long)s->version,
			     k ? "optimizer state and parameters" : "parameters");
	else if (k && (s->lay.marks || k >= s->n_arrays))
		st = zs_fail(err, ZS_EINVAL,
			     "unit '%s' shard %u keeps no optimizer array %u (%s%s)",
			     eng_unit_name(j, x->unit), s->sh.index, k,
			     s->lay.marks ? "its tensors are frozen" : "the job's optimizer is ",
			     s->lay.marks ? "" : zs_optim_name(j->spec.optim.kind));
	else if (k && !taken)
		st = zs_fail(err, ZS_ESTATE,
			     "job '%s' was created with no optimizer steps taken: an imported optimizer state needs its step (the spec's optimizer \"steps_taken\")",
			     j->name);
	else if (k && !eng_ready(s))
		st = zs_fail(err, ZS_ESTATE,
			     "unit '%s' has no parameters yet: they are uploaded before its optimizer state",
			     eng_unit_name(j, x->unit));
	else if (k) /* a buffer of its own in the arena (what the transports
		       * reach), into the array once landed (init_landed) */
		st = (*dst = zs_listener_alloc(e->l, s->sh.padded * 4))
			     ? ZS_OK
			     : zs_fail(err, ZS_ENOSPC, "no arena room to receive unit '%s'",
				       eng_unit_name(j, x->unit));
	else if (s->master)
		*dst = s->master;
	else if (!s->landing && !(s->landing = zs_listener_alloc(e->l, s->sh.padded * 4)))
		st = zs_fail(err, ZS_ENOSPC, "no arena room to receive unit '%s'",
			     eng_unit_name(j, x->unit));
	else
		*dst = s->landing; /* to the tier file or device once landed */
	if (!st)
		s->open.init_landing++;
	return st;
}
