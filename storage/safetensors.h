/*
 * safetensors.h - the safetensors file format (huggingface/safetensors):
 * an 8-byte little-endian header length N, N bytes of JSON header
 * ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 * "__metadata__": {"key": "value"}}), then the raw little-endian tensors.
 * Written by zshard's own code; the JSON goes through jansson.
 *
 * Reading checks everything before returning: the header length against
 * the file, the JSON, each entry's dtype, shape and offsets (inside the
 * data, size = numel * dtype size), and unique names. A file that fails is
 * refused with ZS_EINVAL and a message naming the problem.
 */
#ifndef ZS_SAFETENSORS_H
#define ZS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "base/status.h"

struct st_tensor {
	char name[2 * ZS_NAME_MAX + 32];
	enum zs_dtype dtype; /* F32, BF16, F16; UNSET: xdtype's */
	/* a dtype beyond zshard's (F64, I64, I32, I16, I8, U8, BOOL: a
	 * module's buffers), read by st_parse_mem and written as named */
	char xdtype[8];
	uint32_t ndim;
	uint64_t shape[ZS_MAX_DIMS];
	const void *data; /* writing: the caller's; reading: into the file's map */
	uint64_t bytes;
};

/* Writes tensors and metadata (n_meta key/value pairs) to path atomically
 * (a temporary file, fsync, rename). progress, if not NULL, is called with
 * bytes written so far and the total. */
enum zs_status st_write(const char *path, const struct st_tensor *t, uint32_t n,
			const char *const *meta_kv, uint32_t n_meta,
			void (*progress)(uint64_t done, uint64_t total), struct zs_error *err);

struct st_file {
	void *map; /* st_open's (NULL: st_parse_mem's, the caller's bytes) */
	size_t len;
	uint32_t n;
	struct st_tensor *t;
	uint32_t n_meta;
	char **meta_kv; /* "__metadata__"'s string values: key, value, ... */
};

/* Maps and checks path (F32, BF16, F16 tensors only); release with
 * st_close. */
enum zs_status st_open(const char *path, struct st_file *f, struct zs_error *err);
/* Checks len bytes at buf as a safetensors file named what in messages,
 * any dtype of xdtype's too; the tensors point into buf, which must
 * outlive f. Release with st_close. */
enum zs_status st_parse_mem(const void *buf, size_t len, const char *what, struct st_file *f,
			    struct zs_error *err);
void st_close(struct st_file *f);
const struct st_tensor *st_find(const struct st_file *f, const char *name);
/* The metadata's value for key (a string), or NULL. */
const char *st_meta(const struct st_file *f, const char *key);

#endif
