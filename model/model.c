/* model.c - validation, defaults, copies and accounting for model.h. */
#include "model/model.h"
#include "model/hparams.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *zs_optim_name(enum zs_optim_kind k)
{
	switch (k) {
	case ZS_SGD: return "sgd";
	case ZS_ADAMW: return "adamw";
	case ZS_ADAM: return "adam";
	case ZS_ADAGRAD: return "adagrad";
	case ZS_OPTIM_UNSET: return "unset";
	default: return "invalid";
	}
}

enum zs_status zs_optim_parse(const char *s, enum zs_optim_kind *out,
			      struct zs_error *err)
{
	if (s && !strcasecmp(s, "sgd"))
		*out = ZS_SGD;
	else if (s && !strcasecmp(s, "adamw"))
		*out = ZS_ADAMW;
	else if (s && !strcasecmp(s, "adam"))
		*out = ZS_ADAM;
	else if (s && !strcasecmp(s, "adagrad"))
		*out = ZS_ADAGRAD;
	else
		return zs_fail(err, ZS_EINVAL,
			       "unknown optimizer '%s' (sgd, adamw, adam, adagrad)", s ? s : "");
	return ZS_OK;
}

const char *zs_transports_fmt(uint32_t mask, char *buf, unsigned len)
{
	static const char *const names[] = {"tcp", "shm", "rdma", "nccl"};
	unsigned n = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < 4; i++)
		if (mask & (1u << i))
			n += (unsigned)snprintf(buf + n, n < len ? len - n : 0,
						"%s%s", n ? "," : "", names[i]);
	if (!mask)
		snprintf(buf, len, "none");
	return buf;
}

bool zs_job_name_valid(const char *name)
{
	size_t n = strnlen(name, ZS_JOB_NAME_MAX);

	if (n == 0 || n >= ZS_JOB_NAME_MAX || name[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* A name must be printable, non-empty and NUL-terminated within its array. */
static bool name_ok(const char *s)
{
	size_t n = strnlen(s, ZS_NAME_MAX);

	if (n == 0 || n >= ZS_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Fails if two of the n names (each at stride bytes from base) are equal. */
static const char *find_duplicate(const char *base, size_t stride, uint32_t n)
{
	const char **v;
	const char *dup = NULL;

	if (n < 2)
		return NULL;
	v = malloc(n * sizeof *v);
	if (!v)
		return NULL;
	for (uint32_t i = 0; i < n; i++)
		v[i] = base + i * stride;
	qsort(v, n, sizeof *v, cmp_str);
	for (uint32_t i = 1; i < n && !dup; i++)
		if (!strcmp(v[i - 1], v[i]))
			dup = v[i];
	free(v);
	return dup;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Each alias names a tensor of the layout, once, and no tensor is called
 * so (the names an export by bare names writes are distinct). */
static enum zs_status validate_aliases(const struct zs_layout *l, struct zs_error *err)
{
	const char **names;
	enum zs_status st = ZS_OK;

	if (!l->n_aliases)
		return ZS_OK;
	if (l->n_aliases > ZS_MAX_ALIASES)
		return zs_fail(err, ZS_EINVAL, "%u tensor aliases (max %d)", l->n_aliases,
			       ZS_MAX_ALIASES);
	names = malloc(l->n_aliases * sizeof *names);
	if (!names)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < l->n_aliases && !st; i++) {
		const struct zs_alias *a = &l->aliases[i];
		names[i] = a->name;
		if (a->unit >= l->n_units || a->tensor >= l->units[a->unit].n_tensors)
			st = zs_fail(err, ZS_EINVAL, "alias '%.64s' names no tensor of the layout",
				     a->name);
		else if (!name_ok(a->name))
			st = zs_fail(err, ZS_EINVAL,
				     "an alias of tensor '%s' is empty, too long or not printable",
				     l->units[a->unit].tensors[a->tensor].name);
	}
	if (!st) {
		qsort(names, l->n_aliases, sizeof *names, cmp_name);
		for (uint32_t i = 1; i < l->n_aliases && !st; i++)
			if (!strcmp(names[i - 1], names[i]))
				st = zs_fail(err, ZS_EINVAL, "alias '%s' appears twice", names[i]);
	}
	for (uint32_t u = 0; u < l->n_units && !st; u++)
		for (uint32_t t = 0; t < l->units[u].n_tensors && !st; t++) {
			const char *n = l->units[u].tensors[t].name;
			if (bsearch(&n, names, l->n_aliases, sizeof *names, cmp_name))
				st = zs_fail(err, ZS_EINVAL,
					     "alias '%s' is the name of a tensor of unit '%s'", n,
					     l->units[u].name);
		}
	free(names);
	return st;
}

enum zs_status zs_layout_validate(struct zs_layout *l, struct zs_error *err)
{
	const char *dup;

	if (l->n_units == 0)
		return zs_fail(err, ZS_EINVAL, "layout has no units");
	if (l->n_units > ZS_MAX_UNITS)
		return zs_fail(err, ZS_EINVAL, "layout has %u units (max %d)",
			       l->n_units, ZS_MAX_UNITS);
	for (uint32_t u = 0; u < l->n_units; u++) {
		struct zs_unit *un = &l->units[u];
		uint64_t off = 0;

		if (!name_ok(un->name))
			return zs_fail(err, ZS_EINVAL,
				       "unit %u: name is empty, too long (max %d) or not printable",
				       u, ZS_NAME_MAX - 1);
		if (un->dtype != ZS_DTYPE_UNSET && !zs_dtype_size(un->dtype))
			return zs_fail(err, ZS_EINVAL, "unit '%s': unknown dtype %d",
				       un->name, (int)un->dtype);
		if (un->n_tensors == 0)
			return zs_fail(err, ZS_EINVAL, "unit '%s' has no tensors",
				       un->name);
		if (un->n_tensors > ZS_MAX_TENSORS)
			return zs_fail(err, ZS_EINVAL,
				       "unit '%s' has %u tensors (max %d)", un->name,
				       un->n_tensors, ZS_MAX_TENSORS);
		for (uint32_t t = 0; t < un->n_tensors; t++) {
			struct zs_tensor *te = &un->tensors[t];
			uint64_t numel = 1;

			if (!name_ok(te->name))
				return zs_fail(err, ZS_EINVAL,
					       "unit '%s' tensor %u: name is empty, too long or not printable",
					       un->name, t);
			if (te->ndim > ZS_MAX_DIMS)
				return zs_fail(err, ZS_EINVAL,
					       "tensor '%s': %u dimensions (max %d)",
					       te->name, te->ndim, ZS_MAX_DIMS);
			for (uint32_t d = 0; d < te->ndim; d++) {
				if (te->shape[d] == 0)
					return zs_fail(err, ZS_EINVAL,
						       "tensor '%s': dimension %u is zero",
						       te->name, d);
				if (te->shape[d] > ZS_MAX_NUMEL ||
				    numel > ZS_MAX_NUMEL / te->shape[d])
					return zs_fail(err, ZS_EINVAL,
						       "tensor '%s' is too large (max %llu elements per unit)",
						       te->name, (unsigned long long)ZS_MAX_NUMEL);
				numel *= te->shape[d];
			}
			if (off + numel > ZS_MAX_NUMEL)
				return zs_fail(err, ZS_EINVAL,
					       "unit '%s' is too large (max %llu elements)",
					       un->name, (unsigned long long)ZS_MAX_NUMEL);
			te->offset = off;
			te->numel = numel;
			off += numel;
		}
		un->numel = off;
		dup = find_duplicate(un->tensors[0].name, sizeof(struct zs_tensor),
				     un->n_tensors);
		if (dup)
			return zs_fail(err, ZS_EINVAL,
				       "unit '%s': tensor name '%s' appears twice",
				       un->name, dup);
	}
	dup = find_duplicate(l->units[0].name, sizeof(struct zs_unit), l->n_units);
	if (dup)
		return zs_fail(err, ZS_EINVAL, "unit name '%s' appears twice", dup);
	return validate_aliases(l, err);
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

void zs_layout_derive(struct zs_layout *l)
{
	for (uint32_t u = 0; u < l->n_units; u++) {
		struct zs_unit *un = &l->units[u];
		uint64_t off = 0;
		for (uint32_t t = 0; t < un->n_tensors; t++) {
			struct zs_tensor *te = &un->tensors[t];
			uint64_t numel = 1;
			for (uint32_t d = 0; d < te->ndim && d < ZS_MAX_DIMS; d++)
				numel = sat_mul(numel, te->shape[d]);
			te->offset = off;
			te->numel = numel;
			off = off > UINT64_MAX - numel ? UINT64_MAX : off + numel;
		}
		un->numel = off;
	}
}

static bool finite_nonneg(double x) { return isfinite(x) && x >= 0.0; }

/* No groups: one, of the top-level values. A group's AdamW betas and eps
 * left at 0 take the top-level ones (as the JSON does for missing keys). */
static enum zs_status normalize_groups(struct zs_optim *o, struct zs_error *err)
{
	if (o->n_groups > ZS_MAX_GROUPS)
		return zs_fail(err, ZS_EINVAL, "%u optimizer groups (at most %d)", o->n_groups,
			       ZS_MAX_GROUPS);
	if (o->n_groups == 0) {
		o->n_groups = 1;
		o->groups[0] = (struct zs_hp){o->lr, o->weight_decay, o->beta1, o->beta2, o->eps,
					      o->momentum};
	}
	for (uint32_t g = 0; g < o->n_groups; g++) {
		struct zs_hp *h = &o->groups[g];
		char what[40];
		enum zs_status st;
		if (ZS_OPTIM_ADAM_FAMILY(o->kind) && h->beta1 == 0.0 && h->beta2 == 0.0) {
			h->beta1 = o->beta1;
			h->beta2 = o->beta2;
		}
		if ((ZS_OPTIM_ADAM_FAMILY(o->kind) || o->kind == ZS_ADAGRAD) && h->eps == 0.0)
			h->eps = o->eps;
		snprintf(what, sizeof what, "optimizer group %u", g);
		if ((st = zs_hp_check(o->kind, h, what, err)))
			return st;
	}
	return ZS_OK;
}

/* The optimizer's kind and hyperparameters checked, its defaults filled
 * in (Adam's betas and eps, Adagrad's eps: torch's), its groups'. */
static enum zs_status normalize_optim(struct zs_optim *o, struct zs_error *err)
{
	enum zs_status st;

	if (o->kind != ZS_SGD && o->kind != ZS_ADAMW && o->kind != ZS_ADAM && o->kind != ZS_ADAGRAD)
		return zs_fail(err, ZS_EINVAL,
			       "optimizer kind is missing or unknown (sgd, adamw, adam, adagrad)");
	if (!isfinite(o->lr) || o->lr <= 0.0) /* a step's may be 0, the job's not */
		return zs_fail(err, ZS_EINVAL,
			       "learning rate %g is invalid (finite, > 0)", o->lr);
	if (!finite_nonneg(o->clip_norm))
		return zs_fail(err, ZS_EINVAL, "clip_norm %g is invalid (finite, >= 0)",
			       o->clip_norm);
	if (ZS_OPTIM_ADAM_FAMILY(o->kind) && o->beta1 == 0.0 && o->beta2 == 0.0) {
		o->beta1 = 0.9;
		o->beta2 = 0.999;
	}
	if (ZS_OPTIM_ADAM_FAMILY(o->kind) && o->eps == 0.0)
		o->eps = 1e-8;
	if (o->kind == ZS_ADAGRAD && o->eps == 0.0)
		o->eps = 1e-10; /* torch's */
	if ((st = zs_hp_check(o->kind,
			      &(struct zs_hp){o->lr, o->weight_decay, o->beta1, o->beta2, o->eps,
					      o->momentum},
			      "optimizer", err)) ||
	    (st = normalize_groups(o, err)))
		return st;
	return ZS_OK;
}

/* Copies and collectives: replicas (1 by default) for jobs whose servers
 * reduce and that import no optimizer state; a collective job's ranks,
 * their hosts, and its units cut into one non-empty slice per rank. */
static enum zs_status normalize_copies(struct zs_job_spec *s, struct zs_error *err)
{
	if (s->collective && s->world_size < 2)
		return zs_fail(err, ZS_EINVAL, "a collective job has 2 or more ranks");
	if (s->replicas == 0)
		s->replicas = 1;
	if (s->replicas > ZS_MAX_REPLICAS)
		return zs_fail(err, ZS_EINVAL, "replicas %u: a shard has 1 to %d copies",
			       s->replicas, ZS_MAX_REPLICAS);
	if (s->replicas > 1 && s->optim.steps_taken)
		return zs_fail(err, ZS_EINVAL,
			       "an imported optimizer state (steps_taken %llu) is for jobs of one copy: an upload of it would reach one of the %u copies",
			       (unsigned long long)s->optim.steps_taken, s->replicas);
	if (s->replicas > 1 && s->collective)
		return zs_fail(err, ZS_EINVAL,
			       "a collective job has one copy of each slice (its trainers reduce among themselves): replicas %u is for jobs whose servers reduce",
			       s->replicas);
	if (s->n_rank_hosts && (!s->collective || s->n_rank_hosts != s->world_size))
		return zs_fail(err, ZS_EINVAL,
			       s->collective ? "rank_hosts names %u hosts for %u ranks"
					     : "rank_hosts (%u of them, for %u ranks) is for collective jobs",
			       s->n_rank_hosts, s->world_size);
	for (uint32_t r = 0; r < s->n_rank_hosts; r++)
		if (!s->rank_hosts[r][0])
			return zs_fail(err, ZS_EINVAL, "rank_hosts: rank %u's host is empty", r);
	/* a collective job's slices: one per rank, none empty */
	for (uint32_t u = 0; s->collective && u < s->layout.n_units; u++) {
		uint64_t n = s->layout.units[u].numel;
		if (n <= (uint64_t)(s->world_size - 1) * zs_slice_len(n, s->world_size))
			return zs_fail(err, ZS_EINVAL,
				       "unit '%s' (%llu elements) cannot be cut into %u slices of %llu "
				       "(a collective job's units have more than (R - 1) * ceil(n / R) elements)",
				       s->layout.units[u].name, (unsigned long long)n, s->world_size,
				       (unsigned long long)zs_slice_len(n, s->world_size));
	}
	return ZS_OK;
}

enum zs_status zs_job_spec_normalize(struct zs_job_spec *s, struct zs_error *err)
{
	struct zs_optim *o = &s->optim;
	enum zs_status st;

	if (!zs_job_name_valid(s->name))
		return zs_fail(err, ZS_EINVAL,
			       "job name '%.*s' is invalid (1-63 of A-Z a-z 0-9 . _ -, not starting with '.')",
			       ZS_JOB_NAME_MAX - 1, s->name);
	if (s->stage == 0)
		return zs_fail(err, ZS_EINVAL, "the job's stage is missing (1, 2 or 3)");
	if (s->stage > 3)
		return zs_fail(err, ZS_EINVAL, "stage %u is invalid (1, 2 or 3)", s->stage);
	if (s->world_size < 1 || s->world_size > ZS_MAX_WORLD)
		return zs_fail(err, ZS_EINVAL,
			       "world size %u is invalid (1..%d)", s->world_size,
			       ZS_MAX_WORLD);
	if (s->compute_dtype == ZS_DTYPE_UNSET)
		s->compute_dtype = ZS_F32;
	if (!zs_dtype_size(s->compute_dtype))
		return zs_fail(err, ZS_EINVAL, "unknown compute dtype %d",
			       (int)s->compute_dtype);
	if (s->align_bytes == 0)
		s->align_bytes = ZS_DEFAULT_ALIGN;
	if (s->keep_checkpoints == 0)
		s->keep_checkpoints = 3;
	if (s->keep_checkpoints > 1000)
		return zs_fail(err, ZS_EINVAL, "keep_checkpoints %u is over 1000",
			       s->keep_checkpoints);
	if (s->align_bytes > (1u << 20) || (s->align_bytes & (s->align_bytes - 1)))
		return zs_fail(err, ZS_EINVAL,
			       "align_bytes %u is invalid (a power of two up to 1 MiB)",
			       s->align_bytes);

	if ((st = normalize_optim(o, err)))
		return st;

	st = zs_layout_validate(&s->layout, err);
	if (st)
		return st;
	for (uint32_t u = 0; u < s->layout.n_units; u++)
		for (uint32_t t = 0; t < s->layout.units[u].n_tensors; t++)
			if (s->layout.units[u].tensors[t].group >= o->n_groups)
				return zs_fail(err, ZS_EINVAL,
					       "tensor '%s' of unit '%s' is in optimizer group %u; "
					       "the job has %u",
					       s->layout.units[u].tensors[t].name,
					       s->layout.units[u].name,
					       s->layout.units[u].tensors[t].group, o->n_groups);
	for (uint32_t u = 0; u < s->layout.n_units; u++)
		if (s->layout.units[u].dtype == ZS_DTYPE_UNSET)
			s->layout.units[u].dtype = s->compute_dtype;
	return normalize_copies(s, err);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
	uint8_t le[8];
	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> 8 * i);
	return fnv(h, le, sizeof le);
}

uint64_t zs_layout_digest(const struct zs_layout *l)
{
	uint64_t h = fnv_u64(0xcbf29ce484222325ULL, l->n_units);

	for (uint32_t u = 0; u < l->n_units; u++) {
		const struct zs_unit *x = &l->units[u];
		h = fnv(h, x->name, strlen(x->name) + 1);
		h = fnv_u64(h, (uint64_t)x->dtype);
		h = fnv_u64(h, x->n_tensors);
		for (uint32_t t = 0; t < x->n_tensors; t++) {
			const struct zs_tensor *p = &x->tensors[t];
			h = fnv(h, p->name, strlen(p->name) + 1);
			h = fnv_u64(h, p->ndim);
			for (uint32_t d = 0; d < p->ndim && d < ZS_MAX_DIMS; d++)
				h = fnv_u64(h, p->shape[d]);
			h = fnv_u64(h, p->group);
			if (p->frozen) /* (digests of layouts without frozen tensors unchanged) */
				h = fnv_u64(h, 0x66726f7a656eULL);
		}
	}
	return h ? h : 1;
}

bool zs_layout_equal(const struct zs_layout *a, const struct zs_layout *b,
		     char *why, unsigned why_len)
{
#define DIFF(...) do { if (why) snprintf(why, why_len, __VA_ARGS__); return false; } while (0)
	if (a->n_units != b->n_units)
		DIFF("%u units, the job has %u", a->n_units, b->n_units);
	for (uint32_t u = 0; u < a->n_units; u++) {
		const struct zs_unit *x = &a->units[u], *y = &b->units[u];
		if (strcmp(x->name, y->name))
			DIFF("unit %u is '%s', the job's is '%s'", u, x->name, y->name);
		if (x->dtype != y->dtype && x->dtype != ZS_DTYPE_UNSET)
			DIFF("unit '%s' has dtype %s, the job's has %s", x->name,
			     zs_dtype_name(x->dtype), zs_dtype_name(y->dtype));
		if (x->n_tensors != y->n_tensors)
			DIFF("unit '%s' has %u tensors, the job's has %u", x->name,
			     x->n_tensors, y->n_tensors);
		for (uint32_t t = 0; t < x->n_tensors; t++) {
			const struct zs_tensor *p = &x->tensors[t], *q = &y->tensors[t];
			if (strcmp(p->name, q->name))
				DIFF("unit '%s' tensor %u is '%s', the job's is '%s'",
				     x->name, t, p->name, q->name);
			if (p->ndim != q->ndim ||
			    memcmp(p->shape, q->shape, p->ndim * sizeof p->shape[0]))
				DIFF("tensor '%s' has another shape than the job's",
				     p->name);
			if (p->group != q->group)
				DIFF("tensor '%s' is in optimizer group %u, the job's in %u",
				     p->name, p->group, q->group);
			if (p->frozen != q->frozen)
				DIFF("tensor '%s' is %s, the job's is %s", p->name,
				     p->frozen ? "frozen" : "trained", q->frozen ? "frozen" : "trained");
		}
	}
	return true;
#undef DIFF
}

uint64_t zs_layout_numel(const struct zs_layout *l)
{
	uint64_t n = 0;
	for (uint32_t u = 0; u < l->n_units; u++)
		n += l->units[u].numel;
	return n;
}

const char *zs_optim_state_suffix(enum zs_optim_kind k, unsigned a)
{
	static const char *const adam[] = {"", ".exp_avg", ".exp_avg_sq"};
	if (a == 0 || a > 2)
		return "";
	if (ZS_OPTIM_ADAM_FAMILY(k))
		return adam[a];
	if (a == 2)
		return "";
	return k == ZS_ADAGRAD ? ".sum" : ".momentum_buffer";
}

unsigned zs_optim_state_arrays(const struct zs_optim *o)
{
	if (ZS_OPTIM_ADAM_FAMILY(o->kind))
		return 2;
	if (o->kind == ZS_ADAGRAD) /* the sum of squares */
		return 1;
	if (o->momentum != 0.0)
		return 1;
	for (uint32_t g = 0; g < o->n_groups; g++)
		if (o->groups[g].momentum != 0.0)
			return 1;
	return 0;
}

uint64_t zs_server_bytes_per_elem(const struct zs_job_spec *s,
				  const struct zs_unit *u)
{
	enum zs_dtype d = u->dtype ? u->dtype : s->compute_dtype;
	uint64_t dsz = zs_dtype_size(d);
	uint64_t b = 4 + ZS_REDUCE_BYTES + 4; /* master, reduction, mean gradient */

	b += 4 * zs_optim_state_arrays(&s->optim);
	if (d != ZS_F32)
		b += dsz;
	return b + dsz; /* the previous step's copy, for a lost rank's redo */
}

bool zs_shard_marks(const struct zs_job_spec *s, const struct zs_shard *sh)
{
	const struct zs_unit *u;
	bool any = false;

	if (s->collective || sh->unit >= s->layout.n_units)
		return false;
	u = &s->layout.units[sh->unit];
	for (uint32_t i = 0; i < u->n_tensors; i++) {
		const struct zs_tensor *t = &u->tensors[i];
		if (t->offset >= sh->offset + sh->length || t->offset + t->numel <= sh->offset)
			continue;
		if (!t->frozen)
			return false;
		any = true;
	}
	return any;
}

uint64_t zs_shard_push_len(const struct zs_job_spec *s, const struct zs_shard *sh)
{
	return zs_shard_marks(s, sh) ? ZS_MARK_LEN : sh->length;
}

uint64_t zs_shard_state_bytes(const struct zs_job_spec *s, const struct zs_shard *sh)
{
	const struct zs_unit *u = &s->layout.units[sh->unit];
	enum zs_dtype d = u->dtype ? u->dtype : s->compute_dtype;

	if (!zs_shard_marks(s, sh))
		return sh->padded * zs_server_bytes_per_elem(s, u);
	return sh->padded * (4 + (d != ZS_F32 ? zs_dtype_size(d) : 0)) + ZS_REDUCE_BYTES + 4;
}

void zs_server_bytes_per_elem_gpu(const struct zs_job_spec *s, const struct zs_unit *u,
				  uint64_t *host, uint64_t *device)
{
	enum zs_dtype d = u->dtype ? u->dtype : s->compute_dtype;
	uint64_t dsz = zs_dtype_size(d);

	*device = 4 + 4 * zs_optim_state_arrays(&s->optim) + ZS_REDUCE_BYTES + 4 + 4 +
		  (d != ZS_F32 ? dsz : 0);
	*host = dsz + 4 + dsz; /* + the previous step's copy (a redo) */
}

enum zs_status zs_layout_copy(struct zs_layout *dst, const struct zs_layout *src)
{
	memset(dst, 0, sizeof *dst);
	if (!src->n_units)
		return ZS_OK;
	dst->units = calloc(src->n_units, sizeof *dst->units);
	if (!dst->units)
		return ZS_ENOMEM;
	dst->n_units = src->n_units;
	for (uint32_t u = 0; u < src->n_units; u++) {
		const struct zs_unit *s = &src->units[u];
		struct zs_unit *d = &dst->units[u];
		*d = *s;
		d->tensors = NULL;
		if (!s->n_tensors)
			continue;
		d->tensors = malloc(s->n_tensors * sizeof *d->tensors);
		if (!d->tensors) {
			d->n_tensors = 0;
			zs_layout_release(dst);
			return ZS_ENOMEM;
		}
		memcpy(d->tensors, s->tensors, s->n_tensors * sizeof *d->tensors);
	}
	if (src->n_aliases) {
		dst->aliases = malloc(src->n_aliases * sizeof *dst->aliases);
		if (!dst->aliases) {
			zs_layout_release(dst);
			return ZS_ENOMEM;
		}
		memcpy(dst->aliases, src->aliases, src->n_aliases * sizeof *dst->aliases);
		dst->n_aliases = src->n_aliases;
	}
	return ZS_OK;
}

enum zs_status zs_placement_copy(struct zs_placement *dst,
				 const struct zs_placement *src)
{
	*dst = *src;
	dst->shards = NULL;
	if (!src->n_shards)
		return ZS_OK;
	dst->shards = malloc(src->n_shards * sizeof *dst->shards);
	if (!dst->shards) {
		dst->n_shards = 0;
		return ZS_ENOMEM;
	}
	memcpy(dst->shards, src->shards, src->n_shards * sizeof *dst->shards);
	return ZS_OK;
}

uint32_t zs_placement_groups(const struct zs_placement *p)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->n_shards; i++)
		n += p->shards[i].copy == 0;
	return n;
}

enum zs_status zs_placement_primaries(struct zs_placement *dst,
				      const struct zs_placement *src)
{
	uint32_t n = 0;

	if (zs_placement_copy(dst, src))
		return ZS_ENOMEM;
	for (uint32_t i = 0; i < src->n_shards; i++)
		if (src->shards[i].copy == 0)
			dst->shards[n++] = src->shards[i];
	dst->n_shards = n;
	return ZS_OK;
}

void zs_layout_release(struct zs_layout *l)
{
	for (uint32_t u = 0; u < l->n_units; u++)
		free(l->units[u].tensors);
	free(l->units);
	free(l->aliases);
	memset(l, 0, sizeof *l);
}

void zs_job_spec_release(struct zs_job_spec *s)
{
	zs_layout_release(&s->layout);
	free(s->rank_hosts);
	memset(s, 0, sizeof *s);
}

void zs_placement_release(struct zs_placement *p)
{
	free(p->shards);
	memset(p, 0, sizeof *p);
}

void zs_job_release(struct zs_job *j)
{
	zs_job_spec_release(&j->spec);
	zs_placement_release(&j->placement);
	free(j->trainers);
	memset(j, 0, sizeof *j);
}

void zs_assignment_release(struct zs_assignment *a)
{
	free(a->shards);
	memset(a, 0, sizeof *a);
}

void zs_checkpoint_release(struct zs_checkpoint *c)
{
	free(c->durable);
	for (uint32_t i = 0; i < c->n_blobs; i++)
		free(c->blobs[i].data);
	free(c->blobs);
	zs_placement_release(&c->placement);
	memset(c, 0, sizeof *c);
}

const char *zs_ckpt_state_name(enum zs_ckpt_state s)
{
	switch (s) {
	case ZS_CKPT_PENDING: return "pending";
	case ZS_CKPT_COMMITTED: return "committed";
	case ZS_CKPT_FAILED: return "failed";
	default: return "?";
	}
}
