/*
 * quant.c - block quantization of fp32 values (see quant.h).
 */
#include "math/quant.h"

#include <stdbool.h>
#include <string.h>

size_t zs_q_bytes(enum zs_qfmt f, size_t n, uint32_t block)
{
	if (f == ZS_Q_NONE || !block)
		return 0;
	return (n + block - 1) / block * 4 + n;
}

static bool is_finite(float v)
{
	uint32_t u;

	memcpy(&u, &v, sizeof u);
	return (u & 0x7f800000u) != 0x7f800000u;
}

/* One block: its scale, and its codes. */
static void block_encode(enum zs_qfmt f, const float *x, size_t n, float amax, float *scale,
			 uint8_t *q)
{
	const float top = f == ZS_Q_INT8 ? 127.0f : ZS_E4M3_MAX;
	const float inv = amax > 0.0f ? top / amax : 0.0f;

	*scale = amax / top;
	for (size_t i = 0; i < n; i++) {
		const float v = x[i] * inv;
		if (f == ZS_Q_E4M3) {
			q[i] = zs_e4m3_from_f32(v);
			continue;
		}
		float r = zs_rne_small(v);
		r = r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
		q[i] = (uint8_t)(int8_t)r;
	}
}

static float dequant(enum zs_qfmt f, uint8_t q, float scale)
{
	return (f == ZS_Q_INT8 ? (float)(int8_t)q : zs_e4m3_to_f32(q)) * scale;
}

int zs_q_encode(enum zs_qfmt f, const float *x, size_t n, uint32_t block, void *out)
{
	const size_t nb = (n + block - 1) / block;
	uint8_t *q = (uint8_t *)out + nb * 4;

	for (size_t b = 0; b < nb; b++) {
		const size_t a = b * block, len = n - a < block ? n - a : block;
		float amax = 0.0f, scale;
		for (size_t i = 0; i < len; i++) {
			const float m = x[a + i] < 0.0f ? -x[a + i] : x[a + i];
			if (!is_finite(x[a + i]))
				return -1;
			amax = m > amax ? m : amax;
		}
		block_encode(f, x + a, len, amax, &scale, q + a);
		memcpy((uint8_t *)out + b * 4, &scale, 4);
	}
	return 0;
}

void zs_q_decode(enum zs_qfmt f, const void *in, size_t n, uint32_t block, float *y)
{
	const size_t nb = (n + block - 1) / block;
	const uint8_t *q = (const uint8_t *)in + nb * 4;

	for (size_t b = 0; b < nb; b++) {
		const size_t a = b * block, len = n - a < block ? n - a : block;
		float scale;
		memcpy(&scale, (const uint8_t *)in + b * 4, 4);
		for (size_t i = 0; i < len; i++)
			y[a + i] = dequant(f, q[a + i], scale);
	}
}

int zs_q_encode_ef(enum zs_qfmt f, const float *x, float *r, size_t n, uint32_t block, void *out,
		   float *scratch)
{
	for (size_t i = 0; i < n; i++)
		scratch[i] = x[i] + r[i];
	if (zs_q_encode(f, scratch, n, block, out))
		return -1;
	zs_q_decode(f, out, n, block, r);
	for (size_t i = 0; i < n; i++)
		r[i] = scratch[i] - r[i]; /* what this push leaves out */
	return 0;
}

const char *zs_qfmt_name(enum zs_qfmt f)
{
	return f == ZS_Q_INT8 ? "int8" : f == ZS_Q_E4M3 ? "e4m3" : "none";
}

int zs_qfmt_parse(const char *s)
{
	if (!strcmp(s, "none") || !strcmp(s, ""))
		return ZS_Q_NONE;
	if (!strcmp(s, "int8"))
		return ZS_Q_INT8;
	if (!strcmp(s, "e4m3") || !strcmp(s, "fp8"))
		return ZS_Q_E4M3;
	return -1;
}
