/* safetensors.c - writing and checking safetensors files (see safetensors.h). */
#include "storage/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/le.h"

static const char *st_dtype(enum zs_dtype d)
{
	return d == ZS_F32 ? "F32" : d == ZS_BF16 ? "BF16" : d == ZS_F16 ? "F16" : NULL;
}

/* The dtypes beyond zshard's a buffer may have, and their sizes. */
static unsigned x_size(const char *s)
{
	static const struct { const char *n; unsigned size; } x[] = {
		{"F64", 8}, {"I64", 8}, {"U64", 8}, {"I32", 4}, {"U32", 4},
		{"I16", 2}, {"U16", 2}, {"I8", 1}, {"U8", 1}, {"BOOL", 1}};
	for (size_t i = 0; i < sizeof x / sizeof x[0]; i++)
		if (!strcmp(s, x[i].n))
			return x[i].size;
	return 0;
}

static enum zs_dtype st_dtype_parse(const char *s)
{
	if (!strcmp(s, "F32"))
		return ZS_F32;
	if (!strcmp(s, "BF16"))
		return ZS_BF16;
	if (!strcmp(s, "F16"))
		return ZS_F16;
	return ZS_DTYPE_UNSET;
}

static enum zs_status write_all(int fd, const void *p, size_t n, const char *path,
				struct zs_error *err)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return zs_fail(err, zs_status_from_errno(errno), "cannot write %s: %s", path,
				       strerror(errno));
		c += w;
		n -= (size_t)w;
	}
	return ZS_OK;
}

enum zs_status st_write(const char *path, const struct st_tensor *t, uint32_t n,
			const char *const *meta_kv, uint32_t n_meta,
			void (*progress)(uint64_t done, uint64_t total), struct zs_error *err)
{
	json_t *h = json_object(), *meta = json_object();
	char tmp[PATH_MAX], *text = NULL;
	uint64_t off = 0, total = 0, done = 0;
	enum zs_status st = ZS_OK;
	uint8_t len8[8];
	size_t hl, padded;
	int fd = -1;

	for (uint32_t i = 0; i < n_meta; i++)
		json_object_set_new(meta, meta_kv[2 * i], json_string(meta_kv[2 * i + 1]));
	json_object_set_new(h, "__metadata__", meta);
	for (uint32_t i = 0; i < n; i++) {
		json_t *shape = json_array();
		for (uint32_t d = 0; d < t[i].ndim; d++)
			json_array_append_new(shape, json_integer((json_int_t)t[i].shape[d]));
		json_object_set_new(h, t[i].name,
				    json_pack("{s:s, s:o, s:[I, I]}", "dtype",
					      t[i].dtype ? st_dtype(t[i].dtype) : t[i].xdtype,
					      "shape", shape, "data_offsets", (json_int_t)off,
					      (json_int_t)(off + t[i].bytes)));
		off += t[i].bytes;
	}
	total = off;
	text = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(h);
	if (!text)
		return zs_fail(err, ZS_ENOMEM, "cannot build the safetensors header");
	/* pad the header with spaces so the data starts 8-byte aligned */
	hl = strlen(text);
	padded = (hl + 7) & ~(size_t)7;
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp) {
		st = zs_fail(err, ZS_EINVAL, "path too long: %s", path);
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		st = zs_fail(err, zs_status_from_errno(errno), "cannot create %s: %s", tmp,
			     strerror(errno));
		goto out;
	}
	zs_put64(len8, padded);
	if ((st = write_all(fd, len8, 8, tmp, err)) || (st = write_all(fd, text, hl, tmp, err)) ||
	    (st = write_all(fd, "        ", padded - hl, tmp, err)))
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		if ((st = write_all(fd, t[i].data, t[i].bytes, tmp, err)))
			goto out;
		done += t[i].bytes;
		if (progress)
			progress(done, total);
	}
	if (fsync(fd) || close(fd)) {
		fd = -1;
		st = zs_fail(err, ZS_EIO, "cannot flush %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path))
		st = zs_fail(err, zs_status_from_errno(errno), "cannot rename %s: %s", tmp,
			     strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	if (st)
		unlink(tmp);
	free(text);
	return st;
}

void st_close(struct st_file *f)
{
	if (f->map)
		munmap(f->map, f->len);
	free(f->t);
	for (uint32_t i = 0; i < 2 * f->n_meta; i++)
		free(f->meta_kv[i]);
	free(f->meta_kv);
	memset(f, 0, sizeof *f);
}

const char *st_meta(const struct st_file *f, const char *key)
{
	for (uint32_t i = 0; i < f->n_meta; i++)
		if (!strcmp(f->meta_kv[2 * i], key))
			return f->meta_kv[2 * i + 1];
	return NULL;
}

/* Keeps the metadata's string values (the format's; others are skipped). */
static enum zs_status keep_meta(struct st_file *f, json_t *m, struct zs_error *err)
{
	const char *k;
	json_t *v;

	if (!json_is_object(m))
		return ZS_OK;
	f->meta_kv = calloc(2 * json_object_size(m) + 1, sizeof *f->meta_kv);
	if (!f->meta_kv)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	json_object_foreach(m, k, v) {
		if (!json_is_string(v))
			continue;
		f->meta_kv[2 * f->n_meta] = strdup(k);
		f->meta_kv[2 * f->n_meta + 1] = strdup(json_string_value(v));
		if (!f->meta_kv[2 * f->n_meta] || !f->meta_kv[2 * f->n_meta + 1]) {
			free(f->meta_kv[2 * f->n_meta]);
			free(f->meta_kv[2 * f->n_meta + 1]);
			return zs_fail(err, ZS_ENOMEM, "out of memory");
		}
		f->n_meta++;
	}
	return ZS_OK;
}

const struct st_tensor *st_find(const struct st_file *f, const char *name)
{
	for (uint32_t i = 0; i < f->n; i++)
		if (!strcmp(f->t[i].name, name))
			return &f->t[i];
	return NULL;
}

/* Checks f->len bytes at base as a safetensors file (path: its name in
 * messages; any: dtypes beyond zshard's too) into f->t, f->n. */
static enum zs_status parse(struct st_file *f, const uint8_t *base, const char *path, bool any,
			    struct zs_error *err)
{
	json_error_t je;
	json_t *h = NULL, *v;
	const char *key;
	uint64_t hl;
	enum zs_status st = ZS_OK;

	if (f->len < 8)
		return zs_fail(err, ZS_EINVAL, "%s is not a safetensors file (too short)", path);
	hl = zs_get64(base);
	if (hl == 0 || hl > f->len - 8 || hl > (100u << 20))
		return zs_fail(err, ZS_EINVAL, "%s: header length %llu does not fit the file (%zu bytes)",
			       path, (unsigned long long)hl, f->len);
	h = json_loadb((const char *)base + 8, hl, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(h)) {
		st = zs_fail(err, ZS_EINVAL, "%s: the header is not a JSON object: %s", path,
			     h ? "" : je.text);
		goto out;
	}
	f->t = calloc(json_object_size(h) + 1, sizeof *f->t);
	if (!f->t) {
		st = zs_fail(err, ZS_ENOMEM, "out of memory");
		goto out;
	}
	json_object_foreach(h, key, v) {
		struct st_tensor *t = &f->t[f->n];
		json_t *dt = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
		json_t *offs = json_object_get(v, "data_offsets");
		uint64_t numel = 1, b, e;
		unsigned esize;
		size_t i;

		if (!strcmp(key, "__metadata__")) {
			if ((st = keep_meta(f, v, err)))
				goto out;
			continue;
		}
		if (strlen(key) >= sizeof t->name || !json_is_string(dt) || !json_is_array(shape) ||
		    json_array_size(shape) > ZS_MAX_DIMS || !json_is_array(offs) ||
		    json_array_size(offs) != 2) {
			st = zs_fail(err, ZS_EINVAL, "%s: tensor '%s': bad or missing dtype, shape or data_offsets",
				     path, key);
			goto out;
		}
		snprintf(t->name, sizeof t->name, "%s", key);
		t->dtype = st_dtype_parse(json_string_value(dt));
		esize = t->dtype ? zs_dtype_size(t->dtype) : any ? x_size(json_string_value(dt)) : 0;
		if (!esize) {
			st = zs_fail(err, ZS_EINVAL, "%s: tensor '%s' has dtype %s (%s are read)", path,
				     key, json_string_value(dt),
				     any ? "F32, BF16, F16, F64, integers, BOOL" : "F32, BF16, F16");
			goto out;
		}
		if (!t->dtype)
			snprintf(t->xdtype, sizeof t->xdtype, "%s", json_string_value(dt));
		t->ndim = (uint32_t)json_array_size(shape);
		for (i = 0; i < t->ndim; i++) {
			json_t *d = json_array_get(shape, i);
			if (!json_is_integer(d) || json_integer_value(d) < 0 ||
			    (uint64_t)json_integer_value(d) > ZS_MAX_NUMEL) {
				st = zs_fail(err, ZS_EINVAL, "%s: tensor '%s': bad shape", path, key);
				goto out;
			}
			t->shape[i] = (uint64_t)json_integer_value(d);
			numel *= t->shape[i];
			if (numel > ZS_MAX_NUMEL) {
				st = zs_fail(err, ZS_EINVAL, "%s: tensor '%s' is too large", path, key);
				goto out;
			}
		}
		if (!json_is_integer(json_array_get(offs, 0)) ||
		    !json_is_integer(json_array_get(offs, 1)) ||
		    json_integer_value(json_array_get(offs, 0)) < 0) {
			st = zs_fail(err, ZS_EINVAL, "%s: tensor '%s': bad data_offsets", path, key);
			goto out;
		}
		b = (uint64_t)json_integer_value(json_array_get(offs, 0));
		e = (uint64_t)json_integer_value(json_array_get(offs, 1));
		if (e < b || e > f->len - 8 - hl || e - b != numel * esize) {
			st = zs_fail(err, ZS_EINVAL,
				     "%s: tensor '%s': data_offsets [%llu, %llu) do not hold %llu elements of %s inside the file",
				     path, key, (unsigned long long)b, (unsigned long long)e,
				     (unsigned long long)numel, json_string_value(dt));
			goto out;
		}
		t->data = base + 8 + hl + b;
		t->bytes = e - b;
		f->n++;
	}
out:
	json_decref(h);
	return st;
}

enum zs_status st_open(const char *path, struct st_file *f, struct zs_error *err)
{
	struct stat sb;
	enum zs_status st;
	int fd;

	memset(f, 0, sizeof *f);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return zs_fail(err, zs_status_from_errno(errno), "cannot open %s: %s", path,
			       strerror(errno));
	if (fstat(fd, &sb) || sb.st_size < 8) {
		close(fd);
		return zs_fail(err, ZS_EINVAL, "%s is not a safetensors file (too short)", path);
	}
	f->len = (size_t)sb.st_size;
	f->map = mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (f->map == MAP_FAILED) {
		f->map = NULL;
		return zs_fail(err, ZS_EIO, "cannot map %s: %s", path, strerror(errno));
	}
	if ((st = parse(f, f->map, path, false, err)))
		st_close(f);
	return st;
}

enum zs_status st_parse_mem(const void *buf, size_t len, const char *what, struct st_file *f,
			    struct zs_error *err)
{
	enum zs_status st;

	memset(f, 0, sizeof *f);
	f->len = len;
	if ((st = parse(f, buf, what, true, err)))
		st_close(f);
	return st;
}
