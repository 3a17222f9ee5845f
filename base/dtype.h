/*
 * dtype.h - the element types zshard moves and stores (f32, bf16, f16),
 * their sizes and names, and the conversions between them: round to
 * nearest even, NaN stays NaN. A leaf: the servers' kernels, the CLI's
 * import and the tests all convert with these, and the scalar conversions
 * are inline so that the reduction loops keep them in their vector code.
 */
#ifndef ZS_DTYPE_H
#define ZS_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"

enum zs_dtype { ZS_DTYPE_UNSET = 0, ZS_F32 = 1, ZS_BF16 = 2, ZS_F16 = 3 };

/* Size in bytes of one element; 0 for UNSET or an unknown value. */
unsigned zs_dtype_size(enum zs_dtype d);
/* "f32", "bf16", "f16", or "unset"/"invalid". */
const char *zs_dtype_name(enum zs_dtype d);
/* Parses "f32"/"fp32"/"float32", "bf16"/"bfloat16", "f16"/"fp16"/"float16". */
enum zs_status zs_dtype_parse(const char *s, enum zs_dtype *out,
			      struct zs_error *err);

/* Converts n fp32 values to dtype (F32: a copy). */
void zs_convert_from_f32(void *dst, enum zs_dtype dt, const float *src, size_t n);
/* Converts n dtype values to fp32. */
void zs_convert_to_f32(float *dst, const void *src, enum zs_dtype dt, size_t n);

/* fp32 <-> bf16 / fp16, one value; nvcc compiles the same functions for
 * the CUDA kernels (gpu/), so host and device convert alike. */
#ifdef __CUDACC__
#define ZS_DT_INLINE static inline __host__ __device__
#else
#define ZS_DT_INLINE static inline
#endif

ZS_DT_INLINE uint32_t zs_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

ZS_DT_INLINE float zs_f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* A NaN as every kernel writes it: 0x7fc00000. IEEE leaves a NaN result's
 * sign and payload to the hardware (x86 passes an operand's on, CUDA writes
 * 0x7fffffff), so the kernels pass each value they compute through this
 * and host and device agree bit for bit on a NaN too. */
ZS_DT_INLINE float zs_f32_canon(float f)
{
#ifdef __CUDA_ARCH__
	return f != f ? zs_f32_from_bits(0x7fc00000u) : f;
#else
	return f != f ? __builtin_nanf("") : f; /* a constant: the loops stay vector code */
#endif
}

ZS_DT_INLINE uint16_t zs_f32_to_bf16(float f)
{
	uint32_t u = zs_f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and a NaN */
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

ZS_DT_INLINE float zs_bf16_to_f32(uint16_t h) { return zs_f32_from_bits((uint32_t)h << 16); }

ZS_DT_INLINE uint16_t zs_f32_to_f16(float f)
{
	uint32_t u = zs_f32_bits(f), sign = (u >> 16) & 0x8000u;
	uint32_t a = u & 0x7fffffffu;

	if (a > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u);
	if (a >= 0x477ff000u) /* rounds to >= 65520: infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (a < 0x38800000u) { /* below 2^-14: subnormal or zero */
		/* scale into the subnormal grid: x * 2^24, round to even */
		float sub = zs_f32_from_bits(a) * 16777216.0f;
		uint32_t m = (uint32_t)sub, rem;
		float frac = sub - (float)m;
		rem = frac > 0.5f || (frac == 0.5f && (m & 1u));
		return (uint16_t)(sign | (m + rem));
	}
	{
		uint32_t e = ((a >> 23) - 112) << 10, m = a & 0x7fffffu;
		uint32_t h = e | (m >> 13), r = m & 0x1fffu;
		h += r > 0x1000u || (r == 0x1000u && (h & 1u));
		return (uint16_t)(sign | h);
	}
}

ZS_DT_INLINE float zs_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
		 m = h & 0x3ffu;
	if (e == 0) /* zero or subnormal: m * 2^-24, exact in fp32 */
		return zs_f32_from_bits(sign) + (sign ? -1.0f : 1.0f) * (float)m * 5.9604644775390625e-8f;
	if (e == 31)
		return zs_f32_from_bits(sign | 0x7f800000u | (m << 13));
	return zs_f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
}

#endif
