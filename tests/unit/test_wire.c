/* test_wire.c - the frame header: byte layout, round trip, and refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "base/crc32c.h"
#include "model/hparams.h"
#include "model/hptables.h"
#include "net/wire.h"

static void test_layout_and_roundtrip(void **st)
{
	struct zs_frame f = {.op = ZS_OP_PUSH, .req_id = 0x1122334455667788ULL,
			     .job = 7, .unit = 9, .offset = 0x0102030405ULL,
			     .length = 4096, .step = 3, .payload_len = 8192,
			     .rank = 2, .status = 0, .dtype = 2,
			     .flags = ZS_WF_PARTIAL, .aux = 0xaabbccdd00112233ULL}, g;
	uint8_t h[ZS_WIRE_HDR];

	(void)st;
	zs_wire_encode(&f, h);
	/* explicit little-endian layout, whatever the host */
	assert_int_equal(h[0], 'Z');
	assert_int_equal(h[1], 'S');
	assert_int_equal(h[2], 'D');
	assert_int_equal(h[3], '1');
	assert_int_equal(h[6], ZS_OP_PUSH);
	assert_int_equal(h[8], 0x88);
	assert_int_equal(h[15], 0x11);
	assert_int_equal(h[24], 0x05);
	assert_int_equal(h[28], 0x01);
	assert_int_equal(h[68], 0x33);
	assert_int_equal(h[79], 0xaa);
	assert_int_equal(zs_wire_decode(h, &g, NULL), ZS_OK);
	assert_int_equal(g.op, f.op);
	assert_int_equal(g.req_id, f.req_id);
	assert_int_equal(g.job, f.job);
	assert_int_equal(g.unit, f.unit);
	assert_int_equal(g.offset, f.offset);
	assert_int_equal(g.length, f.length);
	assert_int_equal(g.step, f.step);
	assert_int_equal(g.payload_len, f.payload_len);
	assert_int_equal(g.rank, f.rank);
	assert_int_equal(g.status, f.status);
	assert_int_equal(g.dtype, f.dtype);
	assert_int_equal(g.flags, f.flags);
	assert_int_equal(g.aux, f.aux);
}

static void test_refusals(void **st)
{
	struct zs_frame f = {.op = ZS_OP_GATHER, .length = 1}, g;
	struct zs_error err = {0};
	uint8_t h[ZS_WIRE_HDR], b[ZS_WIRE_HDR];

	(void)st;
	zs_wire_encode(&f, h);
	memcpy(b, h, sizeof b);
	b[0] ^= 1;
	assert_int_equal(zs_wire_decode(b, &g, &err), ZS_EPROTO);
	assert_non_null(strstr(err.msg, "magic"));
	memcpy(b, h, sizeof b);
	b[4] = 9;
	assert_int_equal(zs_wire_decode(b, &g, &err), ZS_EPROTO);
	assert_non_null(strstr(err.msg, "version 9"));
	memcpy(b, h, sizeof b);
	b[33] ^= 0x40; /* a flipped length bit */
	assert_int_equal(zs_wire_decode(b, &g, &err), ZS_EPROTO);
	assert_non_null(strstr(err.msg, "checksum"));
	f.op = ZS_OP_MAX;
	zs_wire_encode(&f, b);
	assert_int_equal(zs_wire_decode(b, &g, &err), ZS_EPROTO);
	assert_non_null(strstr(err.msg, "unknown frame op"));
	f.op = ZS_OP_GATHER;
	f.flags = ZS_WF_EMPTY << 1; /* the first flag no frame has */
	zs_wire_encode(&f, b);
	assert_int_equal(zs_wire_decode(b, &g, &err), ZS_EPROTO);
	assert_non_null(strstr(err.msg, "flags"));
}

/* The bitwise definition, to hold the fast path to. */
static uint32_t crc32c_slow(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

/* A HPARAMS payload: round trip bit for bit, and what decoding refuses. */
static void test_hparams_payload(void **st)
{
	struct zs_hp_table a = {.n_groups = 2, .clip_norm = 0.75}, b;
	uint8_t buf[ZS_HP_MAX_BYTES];
	struct zs_error err = {0};
	size_t n;

	(void)st;
	a.g[0] = (struct zs_hp){1e-3, 0.1, 0.9, 0.999, 1e-8, 0.0};
	a.g[1] = (struct zs_hp){3.0000000000000001e-4, 0.0, 0.8, 0.95, 1e-6, 0.5};
	n = zs_hp_encode(&a, buf);
	assert_int_equal(n, ZS_HP_BYTES(2));
	assert_int_equal(zs_hp_decode(buf, n, &b, &err), ZS_OK);
	assert_true(zs_hp_same(&a, &b));
	assert_int_equal(zs_hp_decode(buf, n - 1, &b, &err), ZS_EPROTO);
	assert_non_null(strstr(err.msg, "for 2 groups"));
	buf[0] = 0;
	assert_int_equal(zs_hp_decode(buf, n, &b, &err), ZS_EPROTO);
	assert_int_equal(zs_hp_decode(buf, 3, &b, &err), ZS_EPROTO);
	assert_non_null(strstr(err.msg, "too short"));
	b.g[1].lr = 1e-3;
	assert_false(zs_hp_same(&a, &b));
}

static void test_crc32c_vector(void **st)
{
	uint8_t buf[1031];
	(void)st;
	/* the standard check value of CRC-32C */
	assert_int_equal(zs_crc32c(0, "123456789", 9), 0xe3069283u);
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	/* every length and alignment against the bitwise definition, and
	 * chaining across pieces */
	for (size_t off = 0; off < 9; off++)
		for (size_t n = 0; n + off <= 64; n++)
			assert_int_equal(zs_crc32c(0, buf + off, n), crc32c_slow(0, buf + off, n));
	assert_int_equal(zs_crc32c(zs_crc32c(0, buf, 500), buf + 500, 531),
			 crc32c_slow(0, buf, 1031));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout_and_roundtrip),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_hparams_payload),
		cmocka_unit_test(test_crc32c_vector),
	};
	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
