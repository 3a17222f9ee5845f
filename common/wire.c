/* wire.c - frame header encoding with explicit byte order (see wire.h). */
#include "wire.h"

#include <string.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

uint32_t zs_crc32c(uint32_t crc, const void *data, size_t len)
{
	static uint32_t table[256];
	static int ready;
	const uint8_t *p = data;

	if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
		/* idempotent: racing threads compute the same table */
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			table[i] = c;
		}
		__atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
	}
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

void zs_wire_encode(const struct zs_frame *f, uint8_t o[ZS_WIRE_HDR])
{
	put32(o + 0, ZS_WIRE_MAGIC);
	put16(o + 4, ZS_WIRE_VERSION);
	put16(o + 6, f->op);
	put64(o + 8, f->req_id);
	put32(o + 16, f->job);
	put32(o + 20, f->unit);
	put64(o + 24, f->offset);
	put64(o + 32, f->length);
	put64(o + 40, f->step);
	put64(o + 48, f->payload_len);
	put32(o + 56, f->rank);
	put32(o + 60, f->status);
	put16(o + 64, f->dtype);
	put16(o + 66, f->flags);
	put32(o + 68, (uint32_t)f->aux);
	put32(o + 76, (uint32_t)(f->aux >> 32));
	put32(o + 72, zs_crc32c(0, o, 72));
}

enum zs_status zs_wire_decode(const uint8_t in[ZS_WIRE_HDR], struct zs_frame *f,
			      struct zs_error *err)
{
	struct zs_frame x;

	if (get32(in) != ZS_WIRE_MAGIC)
		return zs_fail(err, ZS_EPROTO, "bad frame magic 0x%08x (not a zshard peer?)",
			       get32(in));
	if (get16(in + 4) != ZS_WIRE_VERSION)
		return zs_fail(err, ZS_EPROTO, "frame version %u, this side speaks %u",
			       get16(in + 4), ZS_WIRE_VERSION);
	if (get32(in + 72) != zs_crc32c(0, in, 72))
		return zs_fail(err, ZS_EPROTO, "frame header checksum mismatch");
	x.op = get16(in + 6);
	if (x.op == 0 || x.op >= ZS_OP_MAX)
		return zs_fail(err, ZS_EPROTO, "unknown frame op %u", x.op);
	x.req_id = get64(in + 8);
	x.job = get32(in + 16);
	x.unit = get32(in + 20);
	x.offset = get64(in + 24);
	x.length = get64(in + 32);
	x.step = get64(in + 40);
	x.payload_len = get64(in + 48);
	x.rank = get32(in + 56);
	x.status = get32(in + 60);
	x.dtype = get16(in + 64);
	x.flags = get16(in + 66);
	x.aux = (uint64_t)get32(in + 68) | (uint64_t)get32(in + 76) << 32;
	if (x.flags & ~ZS_WF_ALL)
		return zs_fail(err, ZS_EPROTO, "unknown frame flags 0x%x", x.flags);
	*f = x;
	return ZS_OK;
}

const char *zs_op_name(unsigned op)
{
	static const char *const n[ZS_OP_MAX] = {
		[ZS_OP_HELLO] = "HELLO", [ZS_OP_HELLO_OK] = "HELLO_OK",
		[ZS_OP_GATHER] = "GATHER", [ZS_OP_GATHER_DATA] = "GATHER_DATA",
		[ZS_OP_PUSH] = "PUSH", [ZS_OP_PUSH_ACK] = "PUSH_ACK",
		[ZS_OP_PUSH_BEGIN] = "PUSH_BEGIN", [ZS_OP_PUSH_SLOT] = "PUSH_SLOT",
		[ZS_OP_ERROR] = "ERROR",
	};
	return op < ZS_OP_MAX && n[op] ? n[op] : "?";
}
