/*
 * bsum.c - the reduction's host kernels (math/optim.h; the arithmetic is
 * math/bsum.h's). A deposit goes block by block: a block whose terms are
 * all normal or zero takes a branch-free loop the compiler vectorizes (the
 * same integer operations as zs_bsum_add, bin moves included, so the same
 * state); a block with a subnormal or non-finite term takes zs_bsum_add
 * term by term.
 */
#include "math/optim.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define ZS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
/* the int64 to fp32 conversion vectorizes with AVX-512DQ (x86-64-v4) */
#define ZS_CLONES_DQ __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define ZS_CLONES
#define ZS_CLONES_DQ
#endif

_Static_assert(sizeof(struct zs_bacc) == ZS_REDUCE_BYTES,
	       "the planner's reduction bytes are the accumulator's");

#define BLOCK 256

/* Whether every term of the block may take the fast loop: normal (exponent
 * 1..254) or a zero. */
ZS_CLONES
static bool block_fast(const uint32_t *u, size_t n)
{
	unsigned bad = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t e = (u[i] >> 23) & 0xffu;
		bad |= (e == 0xffu) | ((e == 0) & ((u[i] & 0x7fffffu) != 0));
	}
	return !bad;
}

/* zs_bsum_add for normal or zero terms, without branches */
ZS_CLONES
static void block_add(struct zs_bacc *restrict acc, const uint32_t *restrict u, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t e = (u[i] >> 23) & 0xffu;
		uint64_t m = (uint64_t)((u[i] & 0x7fffffu) | 0x800000u) & -(uint64_t)(e != 0);
		uint64_t lo = (uint64_t)acc[i].lo, hi = (uint64_t)acc[i].hi;
		uint32_t t = (uint32_t)(lo & ZS_BSUM_TOP), b = (e + 22) / ZS_BSUM_W;
		uint32_t nt = b > t && m ? b : t; /* a larger term moves the bins up */
		uint64_t keep = -(uint64_t)(nt == t), one = -(uint64_t)(nt == t + 1);
		/* moved: bin t - 1 goes (one bin up) or both do */
		lo = (lo & keep) | (~keep & ((hi << 8 & one) | (lo & 0xf0u) | nt));
		hi &= keep;
		int sh = (int)e - 1 - ((int)nt - 1) * ZS_BSUM_W;
		int rs = -sh < 63 ? -sh : 63;
		uint64_t v = sh >= 0 ? m << (sh & 63) : m >> (rs & 63);
		uint64_t s = -(uint64_t)(u[i] >> 31); /* all ones for a negative term */
		uint64_t dh = v >> ZS_BSUM_W, dl = (v & ((1ull << ZS_BSUM_W) - 1)) << 8;
		acc[i].hi = (int64_t)(hi + ((dh ^ s) - s));
		acc[i].lo = (int64_t)(lo + ((dl ^ s) - s));
	}
}

static void to_bits(uint32_t *u, const void *x, enum zs_dtype dt, size_t n)
{
	if (dt == ZS_F32) {
		memcpy(u, x, n * 4);
	} else if (dt == ZS_BF16) {
		const uint16_t *h = x;
		for (size_t i = 0; i < n; i++)
			u[i] = (uint32_t)h[i] << 16;
	} else {
		const uint16_t *h = x;
		for (size_t i = 0; i < n; i++)
			u[i] = zs_f32_bits(zs_f16_to_f32(h[i]));
	}
}

void zs_bsum_deposit(struct zs_bacc *restrict acc, const void *x, enum zs_dtype dt, size_t n)
{
	const size_t dsz = zs_dtype_size(dt);
	uint32_t u[BLOCK];

	for (size_t a = 0; a < n; a += BLOCK) {
		size_t k = n - a < BLOCK ? n - a : BLOCK;
		to_bits(u, (const uint8_t *)x + a * dsz, dt, k);
		if (block_fast(u, k)) {
			block_add(acc + a, u, k);
		} else {
			for (size_t i = 0; i < k; i++)
				zs_bsum_add(&acc[a + i], zs_f32_from_bits(u[i]));
		}
	}
}

/*
 * zs_bsum_value for a block, without branches, where the sum fits in 64
 * bits and rounds to a normal fp32 (every element of a gradient but the
 * rare one): the integer sum converted once (the conversion rounds to
 * nearest, ties to even: zs_bsum_value's one rounding) and scaled by the
 * bin's power of two (exact for a normal result), then divided by c.
 * slow[i]: element i is left to zs_bsum_value (a flag, a sum past 64 bits,
 * a result near or past either end of the normal range). Whether any is.
 */
ZS_CLONES_DQ
static unsigned block_finish(float *restrict out, const struct zs_bacc *restrict acc, float c,
			     uint8_t *restrict slow, size_t n)
{
	unsigned any = 0;
	for (size_t i = 0; i < n; i++) {
		const int64_t hi = acc[i].hi, lo = acc[i].lo;
		const int64_t T = (int64_t)(((uint64_t)hi << ZS_BSUM_W) + (uint64_t)(lo >> 8));
		const uint32_t b = zs_f32_bits((float)T);
		const int32_t e = (int32_t)((b >> 23) & 0xffu) +
				  ((int32_t)((uint64_t)lo & ZS_BSUM_TOP) - 1) * ZS_BSUM_W - 149;
		const unsigned wide = (uint64_t)hi + (1ull << 32) >= (1ull << 33);
		const unsigned bad = (((uint64_t)lo & 0x70u) != 0) | wide |
				     ((T != 0) & ((e < 2) | (e > 253)));
		const uint32_t r = T ? (b & 0x807fffffu) | ((uint32_t)e << 23) : 0u;
		out[i] = zs_f32_canon(zs_f32_from_bits(r) / c);
		slow[i] = (uint8_t)bad;
		any |= bad;
	}
	return any;
}

void zs_bsum_finish(float *restrict out, struct zs_bacc *restrict acc, uint32_t count, size_t n)
{
	const float c = count > 1 ? (float)count : 1.0f; /* v / 1 is v */
	uint8_t slow[BLOCK];

	for (size_t a = 0; a < n; a += BLOCK) {
		size_t k = n - a < BLOCK ? n - a : BLOCK;
		if (block_finish(out + a, acc + a, c, slow, k))
			for (size_t i = 0; i < k; i++)
				if (slow[i])
					out[a + i] = zs_f32_canon(zs_bsum_value(&acc[a + i]) / c);
		memset(acc + a, 0, k * sizeof *acc);
	}
}
