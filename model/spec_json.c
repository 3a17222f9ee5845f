/* spec_json.c - job spec from JSON through jansson (see spec_json.h). */
#include "model/spec_json.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fails on any key of obj not in the NULL-terminated list. */
static enum zs_status only_keys(json_t *obj, const char *where,
				const char *const *keys, struct zs_error *err)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v) {
		int ok = 0;
		for (const char *const *p = keys; *p && !ok; p++)
			ok = !strcmp(*p, k);
		if (!ok)
			return zs_fail(err, ZS_EINVAL, "%s: unknown key '%s'", where, k);
	}
	return ZS_OK;
}

static enum zs_status get_str(json_t *obj, const char *key, const char *where,
			      char *dst, size_t cap, int required,
			      struct zs_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v) {
		if (required)
			return zs_fail(err, ZS_EINVAL, "%s: '%s' is missing", where, key);
		return ZS_OK;
	}
	if (!json_is_string(v))
		return zs_fail(err, ZS_EINVAL, "%s: '%s' must be a string", where, key);
	if (json_string_length(v) >= cap)
		return zs_fail(err, ZS_EINVAL, "%s: '%s' is too long (max %zu)",
			       where, key, cap - 1);
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return ZS_OK;
}

/* obj's key, when there, as an integer in [min, max] (the range said
 * when it is not: the range the spec takes, not a wider one) */
static enum zs_status get_uint_in(json_t *obj, const char *key, const char *where, uint64_t min,
				  uint64_t max, uint64_t *out, struct zs_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return ZS_OK;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) < min || (uint64_t)json_integer_value(v) > max)
		return zs_fail(err, ZS_EINVAL,
			       "%s: '%s' must be an integer in [%llu, %llu]", where, key,
			       (unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return ZS_OK;
}

static enum zs_status get_uint(json_t *obj, const char *key, const char *where,
			       uint64_t max, uint64_t *out, struct zs_error *err)
{
	return get_uint_in(obj, key, where, 0, max, out, err);
}

static enum zs_status get_num(json_t *obj, const char *key, const char *where,
			      double *out, struct zs_error *err)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return ZS_OK;
	if (!json_is_number(v))
		return zs_fail(err, ZS_EINVAL, "%s: '%s' must be a number", where, key);
	*out = json_number_value(v);
	return ZS_OK;
}

static enum zs_status get_dtype(json_t *obj, const char *where, enum zs_dtype *d,
				struct zs_error *err)
{
	char s[32] = "";
	enum zs_status st = get_str(obj, "dtype", where, s, sizeof s, 0, err);

	if (st || !s[0])
		return st;
	st = zs_dtype_parse(s, d, err);
	if (st)
		zs_error_prefix(err, "%s", where);
	return st;
}

/* "groups": [{"lr": ..., "weight_decay": 0}, ...]: group g's values, each
 * key missing taking the optimizer's top-level one. */
static enum zs_status parse_groups(json_t *gs, struct zs_optim *opt, struct zs_error *err)
{
	static const char *const keys[] = {"lr", "weight_decay", "beta1", "beta2", "eps",
					   "momentum", NULL};
	json_t *g;
	size_t i;

	if (!gs)
		return ZS_OK;
	if (!json_is_array(gs) || json_array_size(gs) == 0 ||
	    json_array_size(gs) > ZS_MAX_GROUPS)
		return zs_fail(err, ZS_EINVAL,
			       "optimizer: 'groups' must be an array of 1 to %d objects",
			       ZS_MAX_GROUPS);
	opt->n_groups = (uint32_t)json_array_size(gs);
	json_array_foreach(gs, i, g) {
		struct zs_hp *h = &opt->groups[i];
		char where[40];
		enum zs_status st;
		snprintf(where, sizeof where, "optimizer group %zu", i);
		if (!json_is_object(g))
			return zs_fail(err, ZS_EINVAL, "%s: must be an object", where);
		*h = (struct zs_hp){opt->lr, opt->weight_decay, opt->beta1, opt->beta2, opt->eps,
				    opt->momentum};
		if ((st = only_keys(g, where, keys, err)) ||
		    (st = get_num(g, "lr", where, &h->lr, err)) ||
		    (st = get_num(g, "weight_decay", where, &h->weight_decay, err)) ||
		    (st = get_num(g, "beta1", where, &h->beta1, err)) ||
		    (st = get_num(g, "beta2", where, &h->beta2, err)) ||
		    (st = get_num(g, "eps", where, &h->eps, err)) ||
		    (st = get_num(g, "momentum", where, &h->momentum, err)))
			return st;
	}
	return ZS_OK;
}

static enum zs_status parse_optim(json_t *o, struct zs_optim *opt,
				  struct zs_error *err)
{
	static const char *const keys[] = {"kind", "lr", "beta1", "beta2", "eps",
					   "weight_decay", "momentum",
					   "clip_norm", "steps_taken", "groups", NULL};
	char kind[32];
	enum zs_status st;

	if (!json_is_object(o))
		return zs_fail(err, ZS_EINVAL, "'optimizer' must be an object");
	if ((st = only_keys(o, "optimizer", keys, err)) ||
	    (st = get_str(o, "kind", "optimizer", kind, sizeof kind, 1, err)))
		return st;
	if ((st = zs_optim_parse(kind, &opt->kind, err)))
		return st;
	if (ZS_OPTIM_ADAM_FAMILY(opt->kind)) { /* torch's defaults, each key on its own */
		opt->beta1 = 0.9;
		opt->beta2 = 0.999;
		opt->eps = 1e-8;
	} else if (opt->kind == ZS_ADAGRAD) {
		opt->eps = 1e-10;
	}
	if ((st = get_num(o, "lr", "optimizer", &opt->lr, err)) ||
	    (st = get_num(o, "beta1", "optimizer", &opt->beta1, err)) ||
	    (st = get_num(o, "beta2", "optimizer", &opt->beta2, err)) ||
	    (st = get_num(o, "eps", "optimizer", &opt->eps, err)) ||
	    (st = get_num(o, "weight_decay", "optimizer", &opt->weight_decay, err)) ||
	    (st = get_num(o, "momentum", "optimizer", &opt->momentum, err)) ||
	    (st = get_num(o, "clip_norm", "optimizer", &opt->clip_norm, err)) ||
	    (st = get_uint(o, "steps_taken", "optimizer", ZS_MAX_STEPS_TAKEN, &opt->steps_taken,
			   err)))
		return st;
	return parse_groups(json_object_get(o, "groups"), opt, err);
}

static enum zs_status parse_tensor(json_t *t, const char *unit, struct zs_tensor *te,
				   struct zs_error *err)
{
	static const char *const keys[] = {"name", "shape", "group", "frozen", "aliases", NULL};
	char where[ZS_NAME_MAX + 16];
	json_t *shape, *d;
	enum zs_status st;
	size_t i;

	snprintf(where, sizeof where, "unit '%s' tensor", unit);
	if (!json_is_object(t))
		return zs_fail(err, ZS_EINVAL, "%s: must be an object", where);
	if ((st = only_keys(t, where, keys, err)) ||
	    (st = get_str(t, "name", where, te->name, sizeof te->name, 1, err)))
		return st;
	shape = json_object_get(t, "shape");
	if (!json_is_array(shape))
		return zs_fail(err, ZS_EINVAL, "tensor '%s': 'shape' must be an array",
			       te->name);
	if (json_array_size(shape) > ZS_MAX_DIMS)
		return zs_fail(err, ZS_EINVAL, "tensor '%s': more than %d dimensions",
			       te->name, ZS_MAX_DIMS);
	d = json_object_get(t, "group");
	if (d && (!json_is_integer(d) || json_integer_value(d) < 0 ||
		  json_integer_value(d) >= ZS_MAX_GROUPS))
		return zs_fail(err, ZS_EINVAL, "tensor '%s': 'group' must be an integer in 0..%d",
			       te->name, ZS_MAX_GROUPS - 1);
	te->group = d ? (uint32_t)json_integer_value(d) : 0;
	d = json_object_get(t, "frozen");
	if (d && !json_is_boolean(d))
		return zs_fail(err, ZS_EINVAL, "tensor '%s': 'frozen' must be true or false",
			       te->name);
	te->frozen = d && json_is_true(d);
	te->ndim = (uint32_t)json_array_size(shape);
	json_array_foreach(shape, i, d) {
		if (!json_is_integer(d) || json_integer_value(d) < 0)
			return zs_fail(err, ZS_EINVAL,
				       "tensor '%s': shape entries must be integers >= 0",
				       te->name);
		te->shape[i] = (uint64_t)json_integer_value(d);
	}
	return ZS_OK;
}

/* A tensor's "aliases" (its other state_dict names), onto the layout's. */
static enum zs_status parse_aliases(json_t *al, struct zs_layout *l, uint32_t u, uint32_t t,
				    struct zs_error *err)
{
	const char *name = l->units[u].tensors[t].name;
	struct zs_alias *grown;
	json_t *a;
	size_t i;

	if (!al)
		return ZS_OK;
	if (!json_is_array(al))
		return zs_fail(err, ZS_EINVAL, "tensor '%s': 'aliases' must be an array of names",
			       name);
	if (l->n_aliases + json_array_size(al) > ZS_MAX_ALIASES)
		return zs_fail(err, ZS_EINVAL, "more than %d tensor aliases", ZS_MAX_ALIASES);
	grown = realloc(l->aliases, (l->n_aliases + json_array_size(al) + 1) * sizeof *grown);
	if (!grown)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	l->aliases = grown;
	json_array_foreach(al, i, a) {
		struct zs_alias *x = &l->aliases[l->n_aliases];
		if (!json_is_string(a) || strlen(json_string_value(a)) >= sizeof x->name)
			return zs_fail(err, ZS_EINVAL,
				       "tensor '%s': each alias must be a name of at most %d bytes",
				       name, ZS_NAME_MAX - 1);
		x->unit = u;
		x->tensor = t;
		snprintf(x->name, sizeof x->name, "%s", json_string_value(a));
		l->n_aliases++;
	}
	return ZS_OK;
}

static enum zs_status parse_units(json_t *units, struct zs_layout *l,
				  struct zs_error *err)
{
	static const char *const keys[] = {"name", "dtype", "tensors", NULL};
	json_t *u;
	size_t i;

	if (!json_is_array(units) || json_array_size(units) == 0)
		return zs_fail(err, ZS_EINVAL, "'units' must be a non-empty array");
	if (json_array_size(units) > ZS_MAX_UNITS)
		return zs_fail(err, ZS_EINVAL, "more than %d units", ZS_MAX_UNITS);
	l->units = calloc(json_array_size(units), sizeof *l->units);
	if (!l->units)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	l->n_units = (uint32_t)json_array_size(units);
	json_array_foreach(units, i, u) {
		struct zs_unit *un = &l->units[i];
		json_t *ts, *t;
		enum zs_status st;
		size_t k;

		if (!json_is_object(u))
			return zs_fail(err, ZS_EINVAL, "unit %zu: must be an object", i);
		if ((st = only_keys(u, "unit", keys, err)) ||
		    (st = get_str(u, "name", "unit", un->name, sizeof un->name, 1, err)) ||
		    (st = get_dtype(u, un->name, &un->dtype, err)))
			return st;
		ts = json_object_get(u, "tensors");
		if (!json_is_array(ts) || json_array_size(ts) == 0)
			return zs_fail(err, ZS_EINVAL,
				       "unit '%s': 'tensors' must be a non-empty array",
				       un->name);
		if (json_array_size(ts) > ZS_MAX_TENSORS)
			return zs_fail(err, ZS_EINVAL, "unit '%s': more than %d tensors",
				       un->name, ZS_MAX_TENSORS);
		un->tensors = calloc(json_array_size(ts), sizeof *un->tensors);
		if (!un->tensors)
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		un->n_tensors = (uint32_t)json_array_size(ts);
		json_array_foreach(ts, k, t) {
			st = parse_tensor(t, un->name, &un->tensors[k], err);
			if (!st)
				st = parse_aliases(json_object_get(t, "aliases"), l, (uint32_t)i,
						   (uint32_t)k, err);
			if (st)
				return st;
		}
	}
	return ZS_OK;
}

/* "readers": {"pins": N, "idle_ms": M}: live versions readers may pin */
static enum zs_status parse_readers(json_t *r, struct zs_job_spec *s, struct zs_error *err)
{
	static const char *const keys[] = {"pins", "idle_ms", NULL};
	uint64_t v = 0;
	enum zs_status st;

	if (!r)
		return ZS_OK;
	if (!json_is_object(r))
		return zs_fail(err, ZS_EINVAL, "job spec: readers is an object (pins, idle_ms)");
	if ((st = only_keys(r, "job spec readers", keys, err)) ||
	    (st = get_uint(r, "pins", "job spec readers", ZS_MAX_READER_PINS, &v, err)))
		return st;
	s->reader_pins = (uint32_t)v;
	v = 0;
	if ((st = get_uint(r, "idle_ms", "job spec readers", 86400000, &v, err)))
		return st;
	s->reader_idle_ms = (uint32_t)v;
	return ZS_OK;
}

static enum zs_status parse_root(json_t *root, struct zs_job_spec *s,
				 struct zs_error *err)
{
	static const char *const keys[] = {"name", "stage", "world_size",
					   "compute_dtype", "align_bytes",
					   "optimizer", "units", "keep_checkpoints",
					   "checkpoint_every", "collective", "rank_hosts", "replicas",
					   "rank_lost", "rank_wait_ms", "data_tls", "readers", "buffers",
					   NULL};
	char dt[32] = "";
	uint64_t v;
	enum zs_status st;

	if (!json_is_object(root))
		return zs_fail(err, ZS_EINVAL, "a job spec must be a JSON object");
	if ((st = only_keys(root, "job spec", keys, err)) ||
	    (st = get_str(root, "name", "job spec", s->name, sizeof s->name, 1, err)))
		return st;
	/* (a stage left out is zshardctl's configuration's, or missing) */
	if (!json_object_get(root, "world_size"))
		return zs_fail(err, ZS_EINVAL,
			       "job spec: 'world_size' is missing (the number of trainer ranks)");
	v = 0;
	if ((st = get_uint_in(root, "stage", "job spec", 1, 3, &v, err)))
		return st;
	s->stage = (uint32_t)v;
	v = 0;
	if ((st = get_uint_in(root, "world_size", "job spec", 1, ZS_MAX_WORLD, &v, err)))
		return st;
	s->world_size = (uint32_t)v;
	v = 0;
	if ((st = get_uint(root, "align_bytes", "job spec", 1u << 20, &v, err)))
		return st;
	s->align_bytes = (uint32_t)v;
	v = 0;
	v = 0;
	if ((st = get_uint(root, "buffers", "job spec", 1u << 20, &v, err)))
		return st;
	s->buffers = (uint32_t)v;
	v = 0;
	if ((st = get_uint(root, "keep_checkpoints", "job spec", 1000, &v, err)))
		return st;
	s->keep_checkpoints = (uint32_t)v;
	v = 0;
	if ((st = get_uint(root, "checkpoint_every", "job spec", UINT32_MAX, &v, err)))
		return st;
	s->checkpoint_every = (uint32_t)v;
	v = 0;
	if ((st = get_uint(root, "replicas", "job spec", ZS_MAX_REPLICAS, &v, err)))
		return st;
	s->replicas = (uint32_t)v;
	v = 0;
	if ((st = get_uint(root, "rank_wait_ms", "job spec", 86400000, &v, err)))
		return st;
	s->rank_wait_ms = (uint32_t)v;
	{
		char lost[16] = "";
		if ((st = get_str(root, "rank_lost", "job spec", lost, sizeof lost, 0, err)))
			return st;
		if (!strcmp(lost, "shrink"))
			s->rank_lost = ZS_LOST_SHRINK;
		else if (!strcmp(lost, "rollback"))
			s->rank_lost = ZS_LOST_ROLLBACK;
		else if (lost[0] && strcmp(lost, "wait"))
			return zs_fail(err, ZS_EINVAL,
				       "job spec: rank_lost '%s' is not wait, shrink or rollback", lost);
	}
	{ /* true or "on": the tcp data plane encrypted (net/dtls.h) */
		json_t *d = json_object_get(root, "data_tls");
		if (d && !json_is_boolean(d) &&
		    !(json_is_string(d) && (!strcmp(json_string_value(d), "on") ||
					    !strcmp(json_string_value(d), "off"))))
			return zs_fail(err, ZS_EINVAL, "job spec: data_tls is true or false (on or off)");
		s->data_tls = d && (json_is_true(d) ||
				    (json_is_string(d) && !strcmp(json_string_value(d), "on")));
	}
	if ((st = parse_readers(json_object_get(root, "readers"), s, err)))
		return st;
	{
		char coll[16] = "";
		if ((st = get_str(root, "collective", "job spec", coll, sizeof coll, 0, err)))
			return st;
		if (coll[0] && strcmp(coll, "nccl") && strcmp(coll, "none"))
			return zs_fail(err, ZS_EINVAL,
				       "job spec: collective '%s' is not nccl or none", coll);
		s->collective = !strcmp(coll, "nccl");
	}
	{
		json_t *hs = json_object_get(root, "rank_hosts"), *h;
		size_t i;
		if (hs && (!json_is_array(hs) || json_array_size(hs) > ZS_MAX_WORLD))
			return zs_fail(err, ZS_EINVAL, "job spec: rank_hosts is a list of host names");
		if (hs && json_array_size(hs)) {
			s->rank_hosts = calloc(json_array_size(hs), sizeof *s->rank_hosts);
			if (!s->rank_hosts)
				return zs_fail(err, ZS_ENOMEM, "out of memory");
			s->n_rank_hosts = (uint32_t)json_array_size(hs);
			json_array_foreach(hs, i, h) {
				if (!json_is_string(h) || json_string_length(h) >= ZS_HOST_NAME)
					return zs_fail(err, ZS_EINVAL,
						       "job spec: rank_hosts[%zu] is not a host name (a string under %d bytes)",
						       i, ZS_HOST_NAME);
				snprintf(s->rank_hosts[i], ZS_HOST_NAME, "%s", json_string_value(h));
			}
		}
	}
	if ((st = get_str(root, "compute_dtype", "job spec", dt, sizeof dt, 0, err)))
		return st;
	if (dt[0] && (st = zs_dtype_parse(dt, &s->compute_dtype, err)))
		return st;
	if (!json_object_get(root, "optimizer"))
		return zs_fail(err, ZS_EINVAL, "job spec: 'optimizer' is missing");
	if ((st = parse_optim(json_object_get(root, "optimizer"), &s->optim, err)))
		return st;
	return parse_units(json_object_get(root, "units"), &s->layout, err);
}

static enum zs_status from_json(json_t *root, const json_error_t *jerr,
				const char *what, struct zs_job_spec *spec,
				struct zs_error *err)
{
	enum zs_status st;

	memset(spec, 0, sizeof *spec);
	if (!root)
		return zs_fail(err, ZS_EINVAL, "%s: line %d column %d: %s", what,
			       jerr->line, jerr->column, jerr->text);
	st = parse_root(root, spec, err);
	json_decref(root);
	if (st)
		zs_job_spec_release(spec);
	return st;
}

enum zs_status zs_spec_from_json(const char *text, struct zs_job_spec *spec,
				 struct zs_error *err)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	return from_json(root, &jerr, "job spec", spec, err);
}

enum zs_status zs_spec_load(const char *path, struct zs_job_spec *spec,
			    struct zs_error *err)
{
	json_error_t jerr;
	json_t *root;

	if (!strcmp(path, "-")) {
		root = json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr);
	} else {
		FILE *f = fopen(path, "r");
		if (!f) /* (jansson's "line -1 column -1: unable to open") */
			return zs_fail(err, ZS_EINVAL, "job spec %s: cannot read it: %s", path,
				       strerror(errno));
		root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
		fclose(f);
	}
	return from_json(root, &jerr, path, spec, err);
}
