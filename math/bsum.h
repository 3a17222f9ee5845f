/*
 * bsum.h - the gradient reduction: an exact, order-independent "binned"
 * sum of fp32 values with 16 bytes of state per element, whatever the
 * number of terms (docs/DESIGN.md, "The reduction").
 *
 * Definition. Cut the fp32 bit positions 2^-149 .. 2^127 into fixed bins of
 * W = 30 bits (bin b: 2^(bW - 149) .. 2^((b+1)W - 149)). Let t be the bin
 * of the highest set bit over all the terms' magnitudes, and g = 2^((t-1)W
 * - 149) the last bit of bin t - 1. The sum is
 *
 *     round_to_nearest_even_f32( sum_i trunc(x_i / g) * g )
 *
 * (trunc toward zero, the sum exact): each term keeps its bits in the top
 * two bins, at least 30 bits below the largest term's top bit (any single
 * fp32 term is kept whole); NaN if any term is NaN or both infinities
 * occur, else the infinity that occurs; +0 for a zero sum. It depends on
 * the set of terms only, so any arrival order, any interleaving of
 * elements, and any split of the work give the same bits.
 *
 * State: bins t and t - 1 kept as separate integer sums of each term's
 * digits in that bin (never carried into each other, so that dropping the
 * lower bin when a larger term arrives leaves exactly the sum of the
 * terms truncated to the coarser grid), t and the non-finite flags packed
 * into the low byte of the lower bin. |bin sum| < terms * 2^30, so up to
 * ZS_BSUM_MAX_TERMS terms fit between resets.
 *
 * The functions are inline for every compiler: the host kernels
 * (math/optim.c) and nvcc's (gpu/reduce.cu) run the same integer code, so
 * a device gives the host's bits.
 */
#ifndef ZS_BSUM_H
#define ZS_BSUM_H

#include <stdint.h>

#include "base/dtype.h"
#include "math/elem.h"

#define ZS_BSUM_W 30
/* Terms one accumulator takes between resets (|bin| stays below 2^55). */
#define ZS_BSUM_MAX_TERMS (1u << 24)

struct zs_bacc {
	int64_t hi; /* digit sum of bin t */
	int64_t lo; /* digit sum of bin t - 1, shifted left 8; low byte: flags */
};

#define ZS_BSUM_TOP 0x0fu  /* t, 0..9 */
#define ZS_BSUM_PINF 0x10u
#define ZS_BSUM_NINF 0x20u
#define ZS_BSUM_NAN 0x40u

ZS_ELEM unsigned zs_bsum_clz64(uint64_t x)
{
#ifdef __CUDA_ARCH__
	return (unsigned)__clzll((long long)x);
#else
	return (unsigned)__builtin_clzll(x);
#endif
}

/* Adds the term x (all arithmetic in integers: exact). */
ZS_ELEM void zs_bsum_add(struct zs_bacc *a, float x)
{
	const uint32_t u = zs_f32_bits(x), e = (u >> 23) & 0xffu, f = u & 0x7fffffu;
	uint64_t lo = (uint64_t)a->lo, hi = (uint64_t)a->hi, v;
	unsigned t = (unsigned)(lo & ZS_BSUM_TOP), b;
	uint32_t m;
	int q0, sh;

	if (e == 0xffu) {
		a->lo = (int64_t)(lo | (f ? ZS_BSUM_NAN : (u >> 31) ? ZS_BSUM_NINF : ZS_BSUM_PINF));
		return;
	}
	if (!e && !f)
		return; /* a zero adds nothing */
	m = e ? (f | 0x800000u) : f;
	q0 = e ? (int)e - 1 : 0; /* x = m * 2^(q0 - 149) */
	b = (unsigned)(q0 + 63 - (int)zs_bsum_clz64(m)) / ZS_BSUM_W;
	if (b > t) {
		/* a larger term: bin t - 1 goes (t + 1 == b) or both do */
		lo = (b == t + 1 ? hi << 8 : 0) | (lo & 0xf0u) | b;
		hi = 0;
		t = b;
	}
	/* |x| truncated to the grid of bin t - 1: below 2^(2W) */
	sh = q0 - ((int)t - 1) * ZS_BSUM_W;
	v = sh >= 0 ? (uint64_t)m << sh : (-sh < 32 ? (uint64_t)(m >> -sh) : 0);
	if (u >> 31) {
		hi -= v >> ZS_BSUM_W;
		lo -= (v & ((1ull << ZS_BSUM_W) - 1)) << 8;
	} else {
		hi += v >> ZS_BSUM_W;
		lo += (v & ((1ull << ZS_BSUM_W) - 1)) << 8;
	}
	a->hi = (int64_t)hi;
	a->lo = (int64_t)lo;
}

/* The sum, rounded once to the nearest fp32 (ties to even). */
ZS_ELEM float zs_bsum_value(const struct zs_bacc *a)
{
	const uint64_t lo = (uint64_t)a->lo;
	const unsigned fl = (unsigned)(lo & 0x70u), t = (unsigned)(lo & ZS_BSUM_TOP);
	__int128 T;
	unsigned __int128 mag;
	uint32_t neg, mm, n;
	int e0, sh, k;

	if ((fl & ZS_BSUM_NAN) || (fl & (ZS_BSUM_PINF | ZS_BSUM_NINF)) == (ZS_BSUM_PINF | ZS_BSUM_NINF))
		return zs_f32_from_bits(0x7fc00000u);
	if (fl)
		return zs_f32_from_bits(fl & ZS_BSUM_PINF ? 0x7f800000u : 0xff800000u);
	T = (__int128)a->hi * ((__int128)1 << ZS_BSUM_W) + (__int128)(a->lo >> 8);
	if (!T)
		return 0.0f;
	neg = T < 0;
	mag = neg ? (unsigned __int128)(-T) : (unsigned __int128)T;
	n = (mag >> 64) ? 128 - zs_bsum_clz64((uint64_t)(mag >> 64))
			: 64 - zs_bsum_clz64((uint64_t)mag);
	e0 = ((int)t - 1) * ZS_BSUM_W - 149; /* T counts units of 2^e0 */
	sh = (int)n - 24;
	if (sh < -149 - e0)
		sh = -149 - e0; /* below the normal range: subnormal's last bit */
	if (sh <= 0) {
		mm = (uint32_t)(mag << -sh);
	} else {
		unsigned __int128 rem = mag & (((unsigned __int128)1 << sh) - 1);
		unsigned __int128 half = (unsigned __int128)1 << (sh - 1);
		mm = (uint32_t)(mag >> sh);
		if (rem > half || (rem == half && (mm & 1)))
			mm++;
	}
	k = e0 + sh; /* the value is mm * 2^k, mm <= 2^24 */
	if (mm == 0x1000000u) {
		mm >>= 1;
		k++;
	}
	if (mm < 0x800000u) /* subnormal (k == -149) */
		return zs_f32_from_bits((neg << 31) | mm);
	if (k + 150 >= 255)
		return zs_f32_from_bits((neg << 31) | 0x7f800000u);
	return zs_f32_from_bits((neg << 31) | ((uint32_t)(k + 150) << 23) | (mm & 0x7fffffu));
}

#endif
