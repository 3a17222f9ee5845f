/*
 * quant_codes.c - a helper for tests/python/test_quant.py: reads fp32
 * values (raw, little-endian) from stdin and writes their FP8 E4M3 codes
 * (math/quant.h's zs_e4m3_from_f32, one byte each) to stdout, so that the
 * encoder can be held against torch's float8_e4m3fn, an independent one.
 */
#include <stdio.h>

#include "math/quant.h"

int main(void)
{
	float v[4096];
	unsigned char q[4096];
	size_t n;

	while ((n = fread(v, sizeof *v, sizeof v / sizeof *v, stdin)) > 0) {
		for (size_t i = 0; i < n; i++)
			q[i] = zs_e4m3_from_f32(v[i]);
		if (fwrite(q, 1, n, stdout) != n)
			return 1;
	}
	return ferror(stdin) ? 1 : 0;
}
