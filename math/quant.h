/*
 * quant.h - block quantization of fp32 values, for gathers and pushes in
 * fewer bytes: int8 with an fp32 scale per block, and FP8 E4M3 (the OCP
 * "E4M3FN" format: bias 7, largest 448, no infinities, S.1111.111 NaN)
 * with an fp32 scale per block.
 *
 * Deterministic: the codes and scales are a function of the input's bits
 * alone (IEEE fp32 operations in a fixed order, round to nearest even,
 * no fused multiply-add), so every rank, server and device that quantizes
 * the same values gets the same bytes, at any world size and order; and
 * dequantized values are exact functions of the bytes, so the servers'
 * binned sum of dequantized pushes (math/bsum.h) stays order-independent.
 *
 * Per block of B values (the last may be shorter), with m = max |x|:
 *   int8:  s = m / 127 (0 when m = 0); q = clamp(rne(x * (127 / m)), -127, 127);
 *          x' = q * s
 *   e4m3:  s = m / 448 (0 when m = 0); q = e4m3(x * (448 / m)) (round to
 *          nearest even, saturating at +-448); x' = f32(q) * s
 * Layout of a quantized array of n values: the ceil(n / B) scales (fp32,
 * little-endian), then the n codes (one byte each).
 *
 * The element codecs are inline so that device kernels can share them.
 */
#ifndef ZS_MATH_QUANT_H
#define ZS_MATH_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum zs_qfmt {
	ZS_Q_NONE = 0, /* full precision: the unit's dtype */
	ZS_Q_INT8 = 1,
	ZS_Q_E4M3 = 2,
};

#define ZS_E4M3_MAX 448.0f

/* f32 -> E4M3FN, round to nearest even, saturating (NaN -> 0x7f or 0xff). */
static inline uint8_t zs_e4m3_from_f32(float x)
{
	uint32_t u, a, m, q, rem, half;
	uint8_t s;
	int e, qexp, shift;

	memcpy(&u, &x, sizeof u);
	s = (uint8_t)((u >> 24) & 0x80);
	a = u & 0x7fffffffu;
	if (a > 0x7f800000u)
		return s | 0x7f;        /* NaN */
	if (a >= 0x43e00000u)           /* >= 448 (and infinities): the largest */
		return s | 0x7e;
	if (a < 0x3a800000u)            /* below 2^-10, half the least subnormal */
		return s;
	e = (int)(a >> 23) - 127;       /* a is a normal f32 here */
	m = (a & 0x7fffffu) | 0x800000u; /* a = m * 2^(e - 23) */
	qexp = e >= -6 ? e - 3 : -9;    /* the quantum: 2^(e-3) normal, 2^-9 subnormal */
	shift = qexp - (e - 23);        /* 20 .. 24 */
	q = m >> shift;
	rem = m & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	if (e < -6)                     /* subnormal: q quanta of 2^-9 (8: the least normal) */
		return s | (uint8_t)q;
	if (q == 16) {                  /* rounded up to the next binade */
		q = 8;
		e++;
	}
	return s | (uint8_t)((e + 7) << 3) | (uint8_t)(q & 7);
}

/* E4M3FN -> f32 (exact). */
static inline float zs_e4m3_to_f32(uint8_t b)
{
	const uint32_t E = (b >> 3) & 15, mant = b & 7;
	uint32_t u;
	float v;

	if (E == 15 && mant == 7) {
		u = 0x7fc00000u;
		memcpy(&v, &u, sizeof v);
	} else if (E == 0) {
		v = (float)mant * 0x1p-9f;
	} else {
		u = ((E + 120) << 23) | (mant << 20);
		memcpy(&v, &u, sizeof v);
	}
	return (b & 0x80) ? -v : v;
}

/* Round to nearest even for |v| < 2^22 (the adding of 1.5 * 2^23 rounds
 * in the default mode; the build keeps fp32 as fp32). */
static inline float zs_rne_small(float v)
{
	return (v + 12582912.0f) - 12582912.0f;
}

/* Bytes of n values quantized in blocks of block (ZS_Q_NONE: 0). */
size_t zs_q_bytes(enum zs_qfmt f, size_t n, uint32_t block);

/*
 * Quantizes x[0..n) in blocks of block (>= 1) into out (zs_q_bytes(f, n,
 * block) bytes). 0; -1 when a value is not finite (a NaN or an infinity
 * is refused, not carried: out is then not meaningful).
 */
int zs_q_encode(enum zs_qfmt f, const float *x, size_t n, uint32_t block, void *out);
/* The values a quantized array stands for, into y[0..n). */
void zs_q_decode(enum zs_qfmt f, const void *in, size_t n, uint32_t block, float *y);
/*
 * Error feedback: quantizes x + r (r: the residual a rank kept from its
 * last push of these elements, updated in place to what this one leaves
 * out) into out. 0; -1 when a value is not finite (r unchanged then).
 */
int zs_q_encode_ef(enum zs_qfmt f, const float *x, float *r, size_t n, uint32_t block, void *out,
		   float *scratch);
/* The format's name ("int8", "e4m3", "none") and back (-1: unknown). */
const char *zs_qfmt_name(enum zs_qfmt f);
int zs_qfmt_parse(const char *s);

#endif
