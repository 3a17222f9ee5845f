/*
 * face.c - the engine's data-plane face: the struct zs_target callbacks the
 * listener calls (HELLO, an encrypted connection's key, a gather served or held until its step exists, a
 * push landing in its rank's staging slot, reduced as it lands when it can
 * be) and the hand-off to the step once every rank is in.
 */
#include "engine/jobs.h"
#include "engine/repl.h"
#include "engine/store.h"
#include "engine/face.h"

#include "net/dtls.h"

/* ------------------------------------------------------------- lookups */

/* The shard of j holding [x->offset, x->offset + x->length) of x->unit (a
 * seed: the shard starting at x->offset; its length is the arrays'). */
static struct eshard *shard_for(struct ejob *j, const struct zs_xfer *x)
{
	for (uint32_t i = 0; x->seed && i < j->n_shards; i++)
		if (j->shards[i]->sh.unit == x->unit && j->shards[i]->sh.offset == x->offset)
			return j->shards[i];
	if (x->seed)
		return NULL;
	for (uint32_t i = 0; i < j->n_shards; i++) {
		struct eshard *s = j->shards[i];
		if (s->sh.unit == x->unit && x->offset >= s->sh.offset &&
		    x->offset - s->sh.offset < s->sh.length &&
		    x->length <= s->sh.length - (x->offset - s->sh.offset))
			return s;
	}
	return NULL;
}

/* -------------------------------------------------------------- target */

/* Whether h proves j's reader token (then it says so: *h->reader). */
static bool proves_reader(const struct ejob *j, const struct zs_hello *h)
{
	if (!j->reader_token[0] || !h->reader || !zs_hello_proves(h, j->reader_token))
		return false;
	*h->reader = true;
	return true;
}

enum zs_status eng_t_hello(void *ctx, const struct zs_hello *h, uint32_t *handle,
			   struct zs_error *err)
{
	struct engine *e = ctx;
	struct ejob *j;
	enum zs_status st = ZS_OK;
	const char *job = h->job;
	uint64_t incarnation = h->incarnation, epoch = h->epoch;
	uint32_t rank = h->rank;

	pthread_mutex_lock(&e->mu);
	for (j = e->jobs; j && strcmp(j->name, job); j = j->next)
		;
	if (!j)
		st = zs_fail(err, ZS_EAGAIN, "this server holds no shard of job '%s' yet", job);
	else if (incarnation && j->incarnation != incarnation)
		/* the job was deleted and created again; the new one arrives
		 * with this server's next assignments */
		st = zs_fail(err, ZS_EAGAIN,
			     "this server holds no shard of job '%s' (incarnation %016llx) yet: it holds an earlier job of that name (%016llx)",
			     job, (unsigned long long)incarnation, (unsigned long long)j->incarnation);
	else if (epoch && j->epoch != epoch)
		/* re-placed: the trainer's placement and this server's differ
		 * until the server's next assignments (or the trainer's next
		 * join) bring them together */
		st = zs_fail(err, ZS_EAGAIN,
			     "this server holds no shard of job '%s' at placement epoch %llu yet (it holds epoch %llu)",
			     job, (unsigned long long)epoch, (unsigned long long)j->epoch);
	else if (!zs_hello_proves(h, j->token) && !proves_reader(j, h))
		/* the HELLO's proof over this connection's nonce: a token
		 * that is not the job's (nor its reader token, which opens a
		 * connection for gathers alone), or a HELLO replayed from
		 * another connection (net/hello.h) */
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s': the HELLO does not prove the job's data-plane token (a trainer takes it from its join; one from an earlier job of that name does not work, nor a HELLO replayed from another connection)",
			     job);
	else if (j->spec.data_tls && !h->covered)
		/* its bytes would cross the network in the clear */
		st = zs_fail(err, ZS_EPERM,
			     "job '%s' encrypts its data plane (data_tls): this tcp connection is not encrypted (a client older than data_tls, or one not told: it takes data_tls from its join)",
			     job);
	else if (rank >= (j->spec.collective ? j->spec.world_size : ZS_MAX_WORLD) &&
		 rank != ZS_RANK_OBSERVER && rank != ZS_RANK_PEER)
		/* a resized job's: each push is checked against its step's */
		st = zs_fail(err, ZS_EINVAL, "rank %u is out of range: job '%s' has world size %u",
			     rank, job, j->spec.world_size);
	else if (h->reader && *h->reader && rank != ZS_RANK_OBSERVER)
		/* counted as a rank's, its connection would keep that rank
		 * "connected" past the rank's own loss */
		st = zs_fail(err, ZS_EPERM,
			     "job '%s': a connection proving the reader token is an observer's, not rank %u's",
			     job, rank);
	else {
		*handle = j->hdl.cur;
		eng_rank_in(e, j, rank, h->reconnects, h->session);
	}
	pthread_mutex_unlock(&e->mu);
	return st;
}

enum zs_status eng_t_tls_key(void *ctx, const char *job, bool reader, uint8_t key[32],
			     struct zs_error *err)
{
	struct engine *e = ctx;
	struct ejob *j;
	enum zs_status st = ZS_OK;

	pthread_mutex_lock(&e->mu);
	for (j = e->jobs; j && strcmp(j->name, job); j = j->next)
		;
	if (!j)
		st = zs_fail(err, ZS_EAGAIN, "this server holds no shard of job '%s' yet", job);
	else if (!j->token[0])
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s' has no data-plane token to key an encrypted connection", job);
	else if (zs_dtls_psk(reader ? j->reader_token : j->token, job, reader, key))
		st = zs_fail(err, ZS_ENOMEM, "cannot derive the handshake's key (OpenSSL)");
	pthread_mutex_unlock(&e->mu);
	return st;
}

void eng_t_bye(void *ctx, uint32_t job, uint32_t rank, uint64_t reconnects, uint64_t session)
{
	struct engine *e = ctx;
	bool stale;
	struct ejob *j = eng_job_by_handle(e, job, &stale);

	if (!j)
		return; /* the job left this server */
	pthread_mutex_lock(&e->mu);
	eng_rank_out(e, j, rank, reconnects, session);
	pthread_mutex_unlock(&e->mu);
	eng_job_unref(e, j);
}

void eng_t_read(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
		   const struct zs_xfer *x)
{
	struct engine *e = ctx;
	struct zs_error err = {0};
	struct ejob *j = eng_job_or_fail(e, job, &err);
	struct eshard *s;

	if (!j) {
		zs_sop_fail(op, err.code, "%s", err.msg);
		return;
	}
	if (x->pinned) { /* a reader's pinned version */
		eng_pin_read(e, j, op, x);
		eng_job_unref(e, j);
		return;
	}
	s = shard_for(j, x);
	if (!s) {
		zs_sop_fail(op, ZS_EINVAL,
			    "unit %u [%llu, +%llu) of job '%s' is not within a shard this server owns",
			    x->unit, (unsigned long long)x->offset,
			    (unsigned long long)x->length, j->name);
	} else if (x->state_read) {
		/* an exporter: fp32 state as it is now, its version with it */
		const float *a = x->state == 0 ? s->master : x->state == 1 ? s->s0 : s->s1;
		float *tmp = NULL;
		pthread_mutex_lock(&s->mu);
		if (s->lay.marks && x->state > 0 &&
		    x->state <= (int)zs_optim_state_arrays(&j->spec.optim)) {
			/* a frozen shard has no optimizer state: zeros, as a
			 * fresh optimizer's (nothing ever reads them) */
			tmp = calloc(x->length ? x->length : 1, 4);
			a = tmp ? tmp - (x->offset - s->sh.offset) : NULL;
		} else if (!s->master && (unsigned)x->state < s->n_arrays && eng_ready(s)) {
			/* in the tier or on the device: a copy of the range */
			size_t a0 = x->offset - s->sh.offset;
			tmp = malloc(x->length * 4);
			if (tmp && eng_array_read(e, s, (unsigned)x->state, a0, a0 + x->length, tmp)) {
				free(tmp);
				tmp = NULL;
			}
			/* served from tmp: offset it back for the common path */
			a = tmp ? tmp - a0 : NULL;
		}
		if (!a || !eng_ready(s)) {
			pthread_mutex_unlock(&s->mu);
			zs_sop_fail(op, ZS_EINVAL, "unit '%s' has no %s", eng_unit_name(j, x->unit),
				    !eng_ready(s) ? "parameters yet" : "such optimizer state");
		} else {
			zs_sop_set_step(op, s->version);
			atomic_fetch_add(&e->ctr.bytes_out, x->length * 4);
			/* sent under the lock: no update can change it meanwhile */
			zs_sop_read_ready(op, a + (x->offset - s->sh.offset));
			pthread_mutex_unlock(&s->mu);
		}
		free(tmp);
	} else if (x->dtype != s->dt) {
		zs_sop_fail(op, ZS_EINVAL, "unit '%s' is %s, the gather asked for %s",
			    eng_unit_name(j, x->unit), zs_dtype_name(s->dt), zs_dtype_name(x->dtype));
	} else {
		pthread_mutex_lock(&s->mu);
		if (s->version == x->step && eng_ready(s) && !s->repl.wait) {
			pthread_mutex_unlock(&s->mu);
			atomic_fetch_add(&e->ctr.bytes_out, x->length * s->dsz);
			zs_sop_read_ready(op, eng_served(s, x));
		} else if (s->version > x->step) {
			/* a lost rank's replacement redoes the step before */
			const void *src = NULL;
			enum zs_status st = eng_ready(s) && !s->repl.wait
						    ? eng_prev_served(s, x, zs_sop_reads_arena(op), &src, &err)
						    : zs_fail(&err, ZS_ESTATE, "its update is not on every copy yet");
			pthread_mutex_unlock(&s->mu);
			if (st) {
				zs_sop_fail(op, st, "unit '%s': %s", eng_unit_name(j, x->unit), err.msg);
			} else {
				/* not overwritten before the replacement pushes this
				 * step, which the update of prev's next one waits for */
				atomic_fetch_add(&e->ctr.bytes_out, x->length * s->dsz);
				zs_sop_read_ready(op, src);
			}
		} else {
			/* asked early (or before the parameters exist): hold it until
			 * the update that makes step t, or the initial upload */
			if (s->hold.n == s->hold.cap) {
				size_t nc = s->hold.cap ? s->hold.cap * 2 : 8;
				struct held *g = realloc(s->hold.q, nc * sizeof *g);
				if (!g) {
					pthread_mutex_unlock(&s->mu);
					zs_sop_fail(op, ZS_ENOMEM, "out of memory");
					eng_job_unref(e, j);
					return;
				}
				s->hold.q = g;
				s->hold.cap = nc;
			}
			s->hold.q[s->hold.n++] = (struct held){op, *x, zs_now_ms(), rank};
			pthread_mutex_unlock(&s->mu);
		}
	}
	eng_job_unref(e, j);
}

/* Whether push x's bytes stay where they are until write_done: a device
 * push to a shard on the device reads them from the trainer's memory. */
static bool mapped(const struct eshard *s, const struct zs_xfer *x)
{
	return x->device && s->dev.on;
}

/* A landing buffer for push x (a device push to a shard on the device
 * needs none; one to a shard elsewhere lands by a copy from the device),
 * or ZS_EAGAIN naming the budget. */
static enum zs_status land(struct engine *e, struct ejob *j, struct eshard *s,
			   const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	if (mapped(s, x)) {
		*dst = (void *)x->dsrc;
		return ZS_OK;
	}
	if ((*dst = eng_land_get(e, s->lay.glen * zs_dtype_size(x->dtype), x->over_budget))) {
		if (x->device && eng_dev_take(e, x, *dst, err)) {
			eng_land_put(e, *dst);
			return err->code;
		}
		return ZS_OK;
	}
	return zs_fail(err, ZS_EAGAIN,
		       "no landing room for unit '%s': the pushes landing on this server fill its landing budget (%llu bytes)",
		       eng_unit_name(j, x->unit), (unsigned long long)e->land.budget);
}

/* Whether push x is one of s, a primary here (or a replica promoted
 * since): exactly the shard (or its step mark), not a partial upload. */
static enum zs_status push_fits(struct engine *e, struct ejob *j, struct eshard *s,
				const struct zs_xfer *x, struct zs_error *err)
{
	enum zs_status st;

	if (!s || x->offset != s->sh.offset ||
	    x->length != (x->init || !s->lay.marks ? s->sh.length : s->lay.glen)) {
		if (s && s->lay.marks && x->offset == s->sh.offset)
			st = zs_fail(err, ZS_EINVAL,
				     "unit '%s' shard %u holds frozen tensors only: a push of it is a step mark of %d element%s, not %llu",
				     eng_unit_name(j, x->unit), s->sh.index, ZS_MARK_LEN,
				     ZS_MARK_LEN == 1 ? "" : "s", (unsigned long long)x->length);
		else
			st = zs_fail(err, ZS_EINVAL,
				     "a push must cover exactly one shard: unit %u [%llu, +%llu) is not a shard of job '%s' here",
				     x->unit, (unsigned long long)x->offset,
				     (unsigned long long)x->length, j->name);
		return st;
	}
	if (x->partial && x->init)
		return zs_fail(err, ZS_EINVAL, "an initial upload cannot be partial");
	if (s->sh.copy && !eng_promoted_since(e, j, s))
		return zs_fail(err, ZS_EINVAL,
			       "unit '%s' shard %u is a replica here (copy %u): its primary takes %s",
			       eng_unit_name(j, x->unit), s->sh.index, s->sh.copy,
			       x->init ? "the initial upload" : "pushes");
	return ZS_OK;
}

/* Push x of rank lands (ZS_EAGAIN: no room yet; the listener retries it
 * when some is given back) where engine/intake.c says: into the open
 * step's reduction, or (its term in already) only landed, to be dropped
 * at its end (caller holds s->mu). */
static enum zs_status land_push(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
				const struct zs_xfer *x, void **dst, struct zs_error *err)
{
	const struct eng_push p = eng_push_of(x, rank);
	const struct eng_at at = eng_at_of(j, s, x);
	enum eng_take take;
	enum zs_status st;

	if ((st = eng_in_begin(&s->in, &at, &p, &take, err)) || (st = land(e, j, s, x, dst, err)))
		return st;
	eng_in_began(&s->in, &p, take);
	return ZS_OK;
}

enum zs_status eng_t_write_begin(void *ctx, uint32_t job, uint32_t rank,
				    const struct zs_xfer *x, void **dst,
				    struct zs_error *err)
{
	struct engine *e = ctx;
	struct ejob *j = eng_job_or_fail(e, job, err);
	struct eshard *s;
	enum zs_status st = ZS_OK;

	if (!j)
		return err->code;
	if (rank == ZS_RANK_PEER || x->replica) { /* a primary's forward */
		st = eng_repl_begin(e, j, shard_for(j, x), rank, x, dst, err);
		eng_job_unref(e, j);
		return st;
	}
	if ((rank == ZS_RANK_OBSERVER || rank >= ZS_MAX_WORLD) && !x->init) {
		eng_job_unref(e, j);
		return zs_fail(err, ZS_EINVAL, "an observer reads and uploads; it cannot push");
	}
	if (x->device && (x->init || j->spec.replicas > 1 || !e->gpu.dev)) {
		eng_job_unref(e, j);
		return zs_fail(err, ZS_EINVAL,
			       "job '%s': pushes from device memory are for unreplicated jobs' gradients on a server with a device",
			       j->name);
	}
	s = shard_for(j, x);
	if ((st = push_fits(e, j, s, x, err)))
		goto out;
	pthread_mutex_lock(&s->mu);
	if (x->init) {
		st = eng_init_begin(e, j, s, x, dst, err);
	} else if (j->spec.collective && (x->dtype != ZS_F32 || x->partial)) {
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s' is collective: a push is its slice's f32 sum over the ranks, whole",
			     j->name);
	} else if (j->spec.collective && rank != s->sh.index) {
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s' is collective: slice %u of unit '%s' is rank %u's to push, not rank %u's",
			     j->name, s->sh.index, eng_unit_name(j, x->unit), s->sh.index, rank);
	} else if (!j->spec.collective && x->dtype != s->dt) {
		st = zs_fail(err, ZS_EINVAL, "unit '%s' takes %s gradients, not %s",
			     eng_unit_name(j, x->unit), zs_dtype_name(s->dt), zs_dtype_name(x->dtype));
	} else if (!eng_ready(s)) {
		st = zs_fail(err, ZS_ESTATE,
			     "unit '%s' has no parameters yet: rank 0 uploads them before step 0",
			     eng_unit_name(j, x->unit));
	} else if (!s->version && j->spec.optim.steps_taken && !eng_state_whole(s)) {
		/* its first update would be step steps_taken + 1 on zeros */
		st = zs_fail(err, ZS_ESTATE,
			     "unit '%s' shard %u has not all of its optimizer state: job '%s' was created with %llu steps taken, and its state is uploaded before step 0 (zshardctl import --optimizer, zs_init_unit_state)",
			     eng_unit_name(j, x->unit), s->sh.index, j->name,
			     (unsigned long long)j->spec.optim.steps_taken);
	} else if (!x->init && (rank >= eng_contributors(j, x->step) || rank >= s->in.nr) &&
		   !j->spec.collective) {
		st = zs_fail(err, ZS_EINVAL,
			     "job '%s': rank %u is not in step %llu's world of %u ranks (zshardctl job resize)",
			     j->name, rank, (unsigned long long)x->step, eng_world_at(j, x->step));
	} else {
		st = land_push(e, j, s, rank, x, dst, err);
	}
	pthread_mutex_unlock(&s->mu);
out:
	eng_job_unref(e, j);
	return st;
}

/*
 * The last rank's push is landing: reduce and apply what has landed, so the
 * update overlaps the reception. Only when nothing else can still change
 * those elements: every other rank in, no accumulation, no clipping.
 */
void eng_t_write_progress(void *ctx, uint32_t job, uint32_t rank,
			     const struct zs_xfer *x, void *dst, uint64_t bytes)
{
	struct engine *e = ctx;
	struct ejob *j;
	struct eshard *s;
	uint64_t upto;

	bool stale;

	if (x->init || x->partial || x->replica)
		return;
	j = eng_job_by_handle(e, job, &stale);
	if (!j)
		return;
	if (stale) { /* a push of an earlier timeline: the restore discards it */
		eng_job_unref(e, j);
		return;
	}
	s = shard_for(j, x);
	if (s && j->spec.optim.clip_norm <= 0.0) {
		pthread_mutex_lock(&s->mu);
		upto = bytes / zs_dtype_size(x->dtype);
		upto -= upto % 1024; /* whole 4 KiB pieces of fp32 at least */
		/* not with replicas: a new copy's seed reads the state whole */
		if (x->step == s->version && s->in.slot[rank] == SLOT_LANDING &&
		    s->in.full + 1 == eng_contributors(j, s->version) &&
		    s->in.landing == 1 && upto > s->open.piped && upto <= s->lay.glen &&
		    j->spec.replicas < 2) {
			eng_deposit(e, s, dst, x->dtype, s->open.piped, upto);
			eng_finish_range(j, s, s->open.piped, upto);
			eng_apply_range(e, j, s, 1.0f, s->open.piped, upto);
			atomic_fetch_add(&e->ctr.piped, upto - s->open.piped);
			s->open.piped = upto;
		}
		pthread_mutex_unlock(&s->mu);
	}
	eng_job_unref(e, j);
}

/* A write that began on shard s will not land (aborted, or of a timeline
 * a restore ended): its slot and landing buffer (or the initial upload's
 * count) are free. */
static void end_landing(struct engine *e, struct ejob *j, struct eshard *s,
			const struct zs_xfer *x, uint32_t rank, void *dst)
{
	struct eng_fx fx = {0};
	bool give_back = false;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	if (x->init) {
		s->open.init_landing--;
		if (x->state_read) /* an optimizer array's own buffer */
			zs_listener_release(e->l, dst);
	} else if (x->seed) {
		s->repl.landing = false;
		free(s->repl.seed);
		s->repl.seed = NULL;
	} else if (x->replica && x->partial) {
		give_back = true; /* a forwarded partial push's landing buffer */
	} else if (x->replica) {
		if (dst == s->acc) /* the forward of its open step at its begin */
			eng_repl_unlanded(e, j, s, &fx);
	} else {
		const struct eng_push p = eng_push_of(x, rank);
		const struct eng_at at = eng_at_of(j, s, x);
		give_back = eng_in_unlanded(&s->in, &at, &p);
	}
	pthread_mutex_unlock(&s->mu);
	eng_fx_run(e, j, s, &fx);
	if (give_back && !mapped(s, x))
		eng_land_put(e, dst);
}

void eng_t_write_abort(void *ctx, uint32_t job, uint32_t rank,
			  const struct zs_xfer *x, void *dst)
{
	struct engine *e = ctx;
	bool stale;
	struct ejob *j = eng_job_by_handle(e, job, &stale);

	(void)stale; /* either timeline's landing ends here */
	if (!j)
		return;
	end_landing(e, j, shard_for(j, x), x, rank, dst);
	eng_job_unref(e, j);
}

/*
 * An initial upload landed (s->mu held; answers op): an optimizer array
 * from its own buffer into its place, in memory, in the tier or on the
 * device; the parameters into the master (from the landing buffer where
 * the shard is away), its compute copy and its replicas.
 */
static void init_landed(struct engine *e, struct ejob *j, struct eshard *s,
			const struct zs_xfer *x, void *dst, struct zs_sop *op)
{
	bool away = !s->master; /* in the tier or on the device: landed first */
	const float *m = away ? s->landing : s->master;

	s->open.init_landing--;
	if (x->state_read) { /* optimizer array x->state */
		enum zs_status w = eng_arrays_io(e, s, true, NULL, x->state == 1 ? dst : NULL,
						 x->state == 2 ? dst : NULL);
		zs_listener_release(e->l, dst);
		if (w) {
			zs_sop_fail(op, ZS_EIO, "cannot write unit '%s' to %s: %s",
				    eng_unit_name(j, x->unit), s->tier.path, strerror(errno));
			return;
		}
		s->state_in |= (uint8_t)(1u << x->state);
		zs_sop_done(op);
		return;
	}
	if (away && eng_arrays_io(e, s, true, s->landing, NULL, NULL)) {
		zs_sop_fail(op, ZS_EIO, "cannot write unit '%s' to %s: %s",
			    eng_unit_name(j, x->unit), s->tier.path, strerror(errno));
		return;
	}
	if (s->copy != m)
		zs_convert_from_f32(s->copy, s->dt, m, s->sh.length);
	eng_phase_go(s, EV_PARAMS);
	if (s->repl.n_peers) /* its replicas take the same parameters first */
		eng_repl_queue(e, j, s, true, m);
	if (away) {
		zs_listener_release(e->l, s->landing);
		s->landing = NULL;
	}
	zs_sop_done(op);
}

/* Push x of rank landed at dst (caller holds s->mu): what
 * engine/intake.c says, carried out. In the reduction at once, whoever it
 * is from (what pipelining took is in already); a partial push of a
 * replicated job to the copies before it is acknowledged; a last push
 * acknowledged (with replicas: once its step is on every copy), and the
 * step completed when every rank's is in. */
static void push_landed(struct engine *e, struct ejob *j, struct eshard *s, uint32_t rank,
			const struct zs_xfer *x, void *dst, struct zs_sop *op, struct eng_fx *fx)
{
	const struct eng_push p = eng_push_of(x, rank);
	const struct eng_at at = eng_at_of(j, s, x);
	struct eng_in_fx in;

	eng_in_landed(&s->in, &at, &p, &in);
	if (in.deposit && mapped(s, x))
		eng_deposit_mapped(e, s, dst, x->dtype, s->open.piped, s->lay.glen);
	else if (in.deposit)
		eng_deposit(e, s, dst, x->dtype, s->open.piped, s->lay.glen);
	if (in.forward) {
		eng_repl_partial(e, j, s, rank, x, dst, op);
		return;
	}
	if (in.give_back && !mapped(s, x))
		eng_land_put(e, dst);
	if (in.ack == EI_ACK_NOW || !eng_ack_later(s, op, x->step))
		zs_sop_done(op);
	if (in.flush)
		eng_acks_flush(s);
	if (in.complete && eng_copies_hold(s->repl.wait, s->repl.landing))
		/* the last update is not on every copy yet (or this step's
		 * forward lands here): this one follows once it is */
		eng_phase_go(s, EV_BEHIND);
	else if (in.complete)
		eng_step_complete(e, j, s, fx);
	else if (!p.partial && !in.flush && !s->repl.wait)
		eng_take_released(s, &fx->rel, &fx->n_rel);
}

void eng_t_write_done(void *ctx, struct zs_sop *op, uint32_t job, uint32_t rank,
			 const struct zs_xfer *x, void *dst)
{
	struct engine *e = ctx;
	bool stale;
	struct ejob *j = eng_job_by_handle(e, job, &stale);
	struct eshard *s;
	struct eng_fx fx = {0};

	if (!j) {
		zs_sop_fail(op, ZS_ENOTFOUND, "job handle %u is gone", job);
		return;
	}
	s = shard_for(j, x);
	if (stale) {
		/* began before a restore retired its handle: the restore waits
		 * for it to end and discards it (an earlier timeline's push) */
		end_landing(e, j, s, x, rank, dst);
		zs_sop_fail(op, ZS_ERESUME, ROLLED_BACK, j->name);
		eng_job_unref(e, j);
		return;
	}
	atomic_fetch_add(&e->ctr.bytes_in, x->length * (x->init || x->replica ? 4 : s->dsz));
	if (x->replica && !x->init) {
		eng_repl_landed(e, j, s, x, dst, op);
		eng_job_unref(e, j);
		return;
	}
	pthread_mutex_lock(&s->mu);
	if (x->init) {
		init_landed(e, j, s, x, dst, op);
		if (!s->repl.wait) /* the initial upload releases the gathers of step 0 */
			eng_take_released(s, &fx.rel, &fx.n_rel);
	} else {
		push_landed(e, j, s, rank, x, dst, op, &fx);
	}
	pthread_mutex_unlock(&s->mu);
	eng_fx_run(e, j, s, &fx);
	eng_job_unref(e, j);
}

const struct zs_target *engine_target(struct engine *e) { return &e->target; }
