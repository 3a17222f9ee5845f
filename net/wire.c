/* wire.c - frame header encoding with explicit byte order (see wire.h). */
#include "net/wire.h"

#include <string.h>

#include "base/crc32c.h"
#include "base/le.h"

void zs_wire_encode(const struct zs_frame *f, uint8_t o[ZS_WIRE_HDR])
{
	zs_put32(o + 0, ZS_WIRE_MAGIC);
	zs_put16(o + 4, ZS_WIRE_VERSION);
	zs_put16(o + 6, f->op);
	zs_put64(o + 8, f->req_id);
	zs_put32(o + 16, f->job);
	zs_put32(o + 20, f->unit);
	zs_put64(o + 24, f->offset);
	zs_put64(o + 32, f->length);
	zs_put64(o + 40, f->step);
	zs_put64(o + 48, f->payload_len);
	zs_put32(o + 56, f->rank);
	zs_put32(o + 60, f->status);
	zs_put16(o + 64, f->dtype);
	zs_put16(o + 66, f->flags);
	zs_put32(o + 68, (uint32_t)f->aux);
	zs_put32(o + 76, (uint32_t)(f->aux >> 32));
	zs_put32(o + 72, zs_crc32c(0, o, 72));
}

enum zs_status zs_wire_decode(const uint8_t in[ZS_WIRE_HDR], struct zs_frame *f,
			      struct zs_error *err)
{
	struct zs_frame x;

	if (zs_get32(in) != ZS_WIRE_MAGIC)
		return zs_fail(err, ZS_EPROTO, "bad frame magic 0x%08x (not a zshard peer?)",
			       zs_get32(in));
	if (zs_get16(in + 4) != ZS_WIRE_VERSION)
		return zs_fail(err, ZS_EPROTO, "frame version %u, this side speaks %u",
			       zs_get16(in + 4), ZS_WIRE_VERSION);
	if (zs_get32(in + 72) != zs_crc32c(0, in, 72))
		return zs_fail(err, ZS_EPROTO, "frame header checksum mismatch");
	x.op = zs_get16(in + 6);
	if (x.op == 0 || x.op >= ZS_OP_MAX)
		return zs_fail(err, ZS_EPROTO, "unknown frame op %u", x.op);
	x.req_id = zs_get64(in + 8);
	x.job = zs_get32(in + 16);
	x.unit = zs_get32(in + 20);
	x.offset = zs_get64(in + 24);
	x.length = zs_get64(in + 32);
	x.step = zs_get64(in + 40);
	x.payload_len = zs_get64(in + 48);
	x.rank = zs_get32(in + 56);
	x.status = zs_get32(in + 60);
	x.dtype = zs_get16(in + 64);
	x.flags = zs_get16(in + 66);
	x.aux = (uint64_t)zs_get32(in + 68) | (uint64_t)zs_get32(in + 76) << 32;
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
		[ZS_OP_ERROR] = "ERROR", [ZS_OP_RDMA_QP] = "RDMA_QP",
		[ZS_OP_HPARAMS] = "HPARAMS",
		[ZS_OP_WORLD] = "WORLD",
		[ZS_OP_NONCE] = "NONCE", [ZS_OP_STARTTLS] = "STARTTLS",
		[ZS_OP_STARTTLS_OK] = "STARTTLS_OK", [ZS_OP_PIN] = "PIN", [ZS_OP_PIN_OK] = "PIN_OK",
	};
	return op < ZS_OP_MAX && n[op] ? n[op] : "?";
}
