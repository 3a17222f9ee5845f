/*
 * dtype.c - element type names, sizes and array conversions (dtype.h).
 * Built at -O3 with the math (the loops vectorize); every vector width
 * gives the same bits, as the conversion is elementwise.
 */
#include "base/dtype.h"

#include <strings.h>

unsigned zs_dtype_size(enum zs_dtype d)
{
	switch (d) {
	case ZS_F32: return 4;
	case ZS_BF16:
	case ZS_F16: return 2;
	default: return 0;
	}
}

const char *zs_dtype_name(enum zs_dtype d)
{
	switch (d) {
	case ZS_DTYPE_UNSET: return "unset";
	case ZS_F32: return "f32";
	case ZS_BF16: return "bf16";
	case ZS_F16: return "f16";
	default: return "invalid";
	}
}

enum zs_status zs_dtype_parse(const char *s, enum zs_dtype *out,
			      struct zs_error *err)
{
	static const struct { const char *n; enum zs_dtype d; } tab[] = {
		{"f32", ZS_F32}, {"fp32", ZS_F32}, {"float32", ZS_F32},
		{"bf16", ZS_BF16}, {"bfloat16", ZS_BF16},
		{"f16", ZS_F16}, {"fp16", ZS_F16}, {"float16", ZS_F16},
	};
	for (size_t i = 0; s && i < sizeof tab / sizeof tab[0]; i++)
		if (!strcasecmp(s, tab[i].n)) {
			*out = tab[i].d;
			return ZS_OK;
		}
	return zs_fail(err, ZS_EINVAL, "unknown dtype '%s' (f32, bf16, f16)",
		       s ? s : "");
}

void zs_convert_from_f32(void *dst, enum zs_dtype dt, const float *src, size_t n)
{
	uint16_t *h = dst;
	if (dt == ZS_F32) {
		memcpy(dst, src, n * 4);
	} else if (dt == ZS_BF16) {
		for (size_t i = 0; i < n; i++)
			h[i] = zs_f32_to_bf16(src[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			h[i] = zs_f32_to_f16(src[i]);
	}
}

void zs_convert_to_f32(float *dst, const void *src, enum zs_dtype dt, size_t n)
{
	const uint16_t *h = src;
	if (dt == ZS_F32) {
		memcpy(dst, src, n * 4);
	} else if (dt == ZS_BF16) {
		for (size_t i = 0; i < n; i++)
			dst[i] = zs_bf16_to_f32(h[i]);
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = zs_f16_to_f32(h[i]);
	}
}
