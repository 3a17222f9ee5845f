/*
 * shard.c - a shard's memory: its arrays and state made for a placement
 * entry (in host memory, the NVMe tier or on the device), the reduction's
 * buffers and its layout by optimizer group, and their release.
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"

enum zs_status eng_shard_init(struct engine *e, struct ejob *j, struct eshard *s,
				 const struct zs_shard *sh, struct zs_error *err)
{
	const struct zs_unit *u = &j->spec.layout.units[sh->unit];
	size_t pad = sh->padded;
	uint32_t R = j->spec.world_size;

	pthread_mutex_lock(&j->wd.mu);
	R = j->wd.cap > R ? j->wd.cap : R;
	pthread_mutex_unlock(&j->wd.mu);
	bool marks = zs_shard_marks(&j->spec, sh);
	/* a frozen shard: its master alone (no optimizer state), a mark's
	 * reduction, in host memory */
	unsigned arrays = marks ? 1 : 1 + zs_optim_state_arrays(&j->spec.optim);
	uint64_t state = pad * 4 * arrays;
	size_t gpad = marks ? ZS_MARK_LEN : pad;
	bool in_mem = false; /* master and optimizer state in host memory */

	pthread_mutex_init(&s->mu, NULL);
	s->sh = *sh;
	/* the run its state is of: the job's timeline as it came here (a
	 * restore, or a seed it takes, moves it on) */
	s->repl.run = atomic_load(&j->timeline);
	s->dt = u->dtype;
	s->dsz = zs_dtype_size(u->dtype);
	s->tier.fd = -1;
	s->n_arrays = arrays;
	s->lay.marks = marks;
	s->lay.glen = marks ? ZS_MARK_LEN : sh->length;
	if (e->gpu.dev && !marks && (!e->gpu.budget || e->gpu.resident + state <= e->gpu.budget)) {
		/* on the device: see devshard.c */
		enum zs_status st = eng_dev_shard_init(e, s, pad, arrays, err);
		if (st)
			return st;
	} else if (e->tier.dir[0] && e->tier.resident + state > e->tier.budget) {
		/* past the budget: master and optimizer state live in a file */
		s->tier.arr_bytes = (pad * 4 + 4095) & ~(uint64_t)4095;
		snprintf(s->tier.path, sizeof s->tier.path, "%s/%s-%llu-%u-%u.state", e->tier.dir, j->name,
			 (unsigned long long)j->epoch, sh->unit, sh->index);
		s->tier.fd = open(s->tier.path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
		if (s->tier.fd < 0 && errno == EINVAL) {
			/* a filesystem without O_DIRECT (tmpfs): buffered, and say so */
			zs_warn("%s: no O_DIRECT on this filesystem; the tier goes through the page cache",
				e->tier.dir);
			s->tier.fd = open(s->tier.path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		}
		if (s->tier.fd < 0 || ftruncate(s->tier.fd, (off_t)(s->tier.arr_bytes * arrays)))
			return zs_fail(err, zs_status_from_errno(errno), "cannot create %s: %s",
				       s->tier.path, strerror(errno));
		s->copy = zs_listener_alloc(e->l, pad * s->dsz);
		s->master = NULL;
	} else {
		in_mem = true;
		e->tier.resident += state;
		s->master = zs_listener_alloc(e->l, pad * 4);
		s->copy = s->dt == ZS_F32 ? (void *)s->master : zs_listener_alloc(e->l, pad * s->dsz);
	}
	s->acc = calloc(gpad, 4);
	if (!s->dev.on) /* on the device: devshard.c's dev.bacc */
		s->bacc = calloc(gpad, sizeof *s->bacc);
	bool counts = !eng_in_init(&s->in, R);
	if (in_mem && arrays > 1)
		s->s0 = calloc(pad, 4);
	if (in_mem && arrays > 2)
		s->s1 = calloc(pad, 4);
	eng_prev_init(e, s, pad);
	if (eng_shard_segments(j, s))
		return zs_fail(err, ZS_ENOMEM, "out of memory for unit '%s'", u->name);
	if ((in_mem && !s->master) || !s->copy)
		return zs_fail(err, ZS_ENOSPC,
			       "the shard arena is full: unit '%s' shard %u needs %zu bytes more",
			       u->name, sh->index, pad * (4 + s->dsz));
	if (s->dev.on)
		eng_dev_pin(e, s);
	if (!s->acc || (!s->dev.on && !s->bacc) || !counts ||
	    (!marks && !s->prev.p) ||
	    (in_mem && arrays > 1 && !s->s0) || (in_mem && arrays > 2 && !s->s1))
		return zs_fail(err, ZS_ENOMEM, "out of memory for unit '%s'", u->name);
	s->counted = zs_shard_state_bytes(&j->spec, sh);
	atomic_fetch_add(&e->ctr.bytes, s->counted);
	return ZS_OK;
}

void eng_shard_release(struct engine *e, struct eshard *s)
{
	for (size_t i = 0; i < s->hold.n; i++)
		zs_sop_fail(s->hold.q[i].op, ZS_ECANCELED, "the shard was dropped from this server");
	free(s->hold.q);
	eng_acks_fail(s, ZS_ECANCELED, "the shard was dropped from this server");
	free(s->repl.acks);
	if (e->l) {
		if (s->copy && s->copy != s->master)
			zs_listener_release(e->l, s->copy);
		if (s->master)
			zs_listener_release(e->l, s->master);
		if (s->landing)
			zs_listener_release(e->l, s->landing);
	}
	eng_prev_release(e, s);
	eng_dev_shard_release(e, s);
	atomic_fetch_sub(&e->ctr.bytes, s->counted);
	s->counted = 0;
	if (s->tier.fd >= 0) {
		close(s->tier.fd);
		unlink(s->tier.path);
	} else if (s->master) {
		e->tier.resident -= s->sh.padded * 4 * s->n_arrays;
	}
	free(s->s0);
	free(s->s1);
	free(s->lay.segs);
	free(s->acc);
	free(s->bacc);
	eng_in_free(&s->in);
	free(s->repl.err);
	free(s->repl.seed);
	pthread_mutex_destroy(&s->mu);
}
