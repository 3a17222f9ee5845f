/*
 * wire.h - the data plane's binary frame header (docs/DESIGN.md section 5).
 *
 * Every frame on a stream transport (tcp, and shm's control socket) is an
 * 80-byte header, little-endian on the wire whatever the host, followed by
 * payload_len bytes of payload read straight into the caller's buffer. The
 * payload never goes through protobuf or gRPC. The header carries a CRC32C
 * of its first 72 bytes; the payload relies on TCP's checksum (a software
 * CRC over gigabytes would cost more than the transfer).
 *
 *   off size field
 *     0    4 magic        "ZSD1" = 0x3144535a
 *     4    2 version      1
 *     6    2 op           enum zs_op
 *     8    8 req_id       chosen by the client, echoed in the reply
 *    16    4 job          job handle from HELLO_OK (0 before)
 *    20    4 unit
 *    24    8 offset       elements from the unit's start
 *    32    8 length       elements
 *    40    8 step
 *    48    8 payload_len  bytes following the header
 *    56    4 rank
 *    60    4 status       enum zs_status in replies, 0 in requests
 *    64    2 dtype        enum zs_dtype of the payload elements
 *    66    2 flags        ZS_WF_*
 *    68    4 aux          op-specific (shm: region offset low bits)
 *    72    4 crc          CRC32C of bytes 0..71
 *    76    4 aux2         op-specific (shm: region offset high bits)
 *
 * Message sequence (client -> server, server -> client):
 *   <- NONCE(payload: ZS_NONCE_LEN random bytes), as the server accepts
 *   [STARTTLS("job\0"; flags READER: the reader token's key)
 *        -> STARTTLS_OK | ERROR; a TLS 1.3 handshake (net/dtls.h); then
 *        every byte both ways in TLS records, beginning with a new NONCE]
 *   HELLO(payload: "job\0" and the ZS_PROOF_LEN-byte proof of the job's
 *         token over the nonce and this HELLO, net/hello.h; rank, step:
 *         the job's incarnation, aux: the placement epoch the trainer
 *         holds; 0 for any)           -> HELLO_OK(job) | ERROR
 *   GATHER(job, unit, offset, length, step)  -> GATHER_DATA(payload) | ERROR
 *   PUSH(job, unit, offset, length, step, payload) -> PUSH_ACK | ERROR
 *        (flags PARTIAL: aux is the rank's micro-batch index in the step)
 *   rdma: HELLO(flags ONE_SIDED) -> HELLO_OK(aux: arena length); RDMA_QP(the
 *        client's queue pair) -> RDMA_QP(the server's, with the arena's
 *        address and key); then as shm, except that the client moves the
 *        bytes by RDMA READ / WRITE instead of copying from a mapping
 *   shm: GATHER -> GATHER_DATA(aux: region offset, no payload);
 *        PUSH_BEGIN -> PUSH_SLOT(aux: region offset); client copies;
 *        PUSH(no payload) -> PUSH_ACK
 *   shm, a server with shards on a device: HELLO_OK(flags DEVICE, offset:
 *        the device's identity); a trainer on that device may push
 *        PUSH(flags DEVICE, payload: handle, number, byte offset of its
 *        device memory holding the range) -> PUSH_ACK once the server
 *        has taken the bytes (mapped through the handle; no host copy)
 *   primary -> replica (server to server, rank ZS_RANK_PEER, tcp):
 *        [HPARAMS(the table in force)] PUSH(flags REPLICA, f32: the step's
 *        reduced gradient, whole shard) -> PUSH_ACK once applied;
 *        PUSH(flags REPLICA | PARTIAL, the push's dtype: a trainer's
 *        partial push as it landed; rank: that trainer's; aux: the epoch's
 *        low 32 bits, the micro-batch index above) -> PUSH_ACK once in the
 *        copy's reduction; PUSH(flags REPLICA | SEED: the shard's whole
 *        state; aux: the epoch's low 32 bits, above them the timeline
 *        the sender's last restore began)
 *   HPARAMS(job, step, payload: the groups' values, model/hparams.h)
 *                                          -> PUSH_ACK | ERROR
 *        inline on every transport, before the first push of the step
 *        it sets values from (on that connection)
 *   WORLD(job, payload: the world size's changes, ZS_WORLDS_BYTES)
 *                                          -> PUSH_ACK | ERROR
 *        inline, after HELLO_OK when the job was ever resized and before
 *        the first push of a step a new change names (on that connection)
 *   reader (a connection proving the job's reader token, net/hello.h):
 *   PIN(step, aux: HOLD | RELEASE | QUERY) -> PIN_OK(step; offset, length:
 *        the lowest and highest version of the job's shards here; aux, a
 *        HOLD's: the pin's run, 1 + the job's timeline here) | ERROR
 *   GATHER(flags PIN, step: a pinned step; aux: its run as the reader's
 *        registry filed it, 0: not said; a relay serves its own run's
 *        alone) -> GATHER_DATA(aux: CRC32C of
 *        the payload, taken from the pinned copy) | ERROR; on a connection
 *        that addresses the arena (a reader's relay over rdma: the target
 *        keeps its pinned copies there): GATHER_DATA(aux: region offset,
 *        rank: the CRC32C of the range's bytes)
 *   ERROR carries a status and a one-line message as payload.
 */
#ifndef ZS_WIRE_H
#define ZS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define ZS_WIRE_MAGIC 0x3144535au
#define ZS_WIRE_VERSION 1
#define ZS_WIRE_HDR 80
#define ZS_WIRE_MAX_ERR 512
/* a device push's payload: the allocation's handle (64 bytes), the
 * trainer's number for it and the range's byte offset in it (8 each) */
#define ZS_WIRE_DEV_SRC 80

enum zs_op {
	ZS_OP_HELLO = 1,
	ZS_OP_HELLO_OK,
	ZS_OP_GATHER,
	ZS_OP_GATHER_DATA,
	ZS_OP_PUSH,
	ZS_OP_PUSH_ACK,
	ZS_OP_PUSH_BEGIN,
	ZS_OP_PUSH_SLOT,
	ZS_OP_ERROR,
	ZS_OP_RDMA_QP, /* rdma: queue-pair details (payload: ZS_RDMA_INFO bytes),
			* client -> server, then server -> client */
	ZS_OP_HPARAMS, /* the optimizer's hyperparameters from step on
			* (payload: model/hparams.h), answered PUSH_ACK */
	ZS_OP_WORLD,   /* the job's world size by step (payload: u32 n, then n
			* of u64 step, u32 world), answered PUSH_ACK */
	ZS_OP_NONCE,   /* server -> client, first on every connection: the
			* nonce its HELLO's proof covers (net/hello.h) */
	ZS_OP_STARTTLS,    /* client -> server after the nonce: the rest
			    * encrypted (net/dtls.h; payload "job\0", flags
			    * ZS_WF_READER for the reader token's key) */
	ZS_OP_STARTTLS_OK, /* server -> client: the TLS handshake follows */
	ZS_OP_PIN,     /* a reader's (the reader token's connection): step;
			* aux ZS_PIN_HOLD, ZS_PIN_RELEASE or ZS_PIN_QUERY
			* (net/transport.h) */
	ZS_OP_PIN_OK,  /* step: the step pinned (or released); offset and
			* length: the lowest and highest version of the job's
			* shards here with parameters; aux: a HOLD's run */
	ZS_OP_MAX
};

enum {
	ZS_WF_PARTIAL = 1 << 0, /* a gradient-accumulation push: not the last */
	ZS_WF_INIT = 1 << 1,    /* a PUSH of initial fp32 parameters, not gradients */
	ZS_WF_STATE = 1 << 2,   /* a GATHER of fp32 state (aux: 0 master, 1 and 2
				 * the optimizer's arrays) at whatever step the
				 * shard is; the reply's step says which. With
				 * INIT, a PUSH of optimizer array aux (1 or 2)
				 * before step 0: an imported state */
	ZS_WF_ONE_SIDED = 1 << 3, /* a HELLO asking for the server's one-sided
				   * path (rdma): replies give arena offsets, the
				   * path moves the bytes */
	ZS_WF_REPLICA = 1 << 4,   /* a PUSH from a shard's primary to its replica
				   * (rank ZS_RANK_PEER): the step's reduced
				   * fp32 gradient, applied there and then
				   * acknowledged (or, with INIT, the masters) */
	ZS_WF_SEED = 1 << 5,      /* with REPLICA: a new copy's whole state (master,
				   * then the optimizer's arrays) at step */
	ZS_WF_DEVICE = 1 << 6,    /* shm: a HELLO_OK whose server keeps shards on
				   * a device (offset: its zs_dev_ident); a PUSH
				   * whose bytes are in the trainer's memory on
				   * that device (payload: ZS_WIRE_DEV_SRC bytes) */
	ZS_WF_REDO = 1 << 7,      /* a PUSH from a lost rank's replacement, of
				   * the step it redoes: one of the rank's
				   * pushes that is in already is dropped, once,
				   * and acknowledged (engine/redo.c) */
	ZS_WF_READER = 1 << 8,    /* a STARTTLS keyed by the job's reader token */
	ZS_WF_PIN = 1 << 9,       /* a GATHER of a version a reader pinned (step:
				   * it), in the unit's dtype; the reply's aux is
				   * the CRC32C of its payload */
	ZS_WF_CATCHUP = 1 << 10,  /* with SEED: a promoted copy's catch-up,
				   * taken only by a copy behind step (or with
				   * no state); one at step or past it answers
				   * ZS_EEXIST and keeps its own */
	ZS_WF_PREV = 1 << 11,     /* with SEED: the step before's parameters
				   * (whole, as f32) follow the state: a lost
				   * rank's replacement may gather them there */
	ZS_WF_EMPTY = 1 << 12,    /* with SEED: a seed sent again, taken only by a
				   * copy with no state; one with state answers
				   * ZS_EEXIST and keeps it (engine/copies.h) */
	ZS_WF_ALL = ZS_WF_PARTIAL | ZS_WF_INIT | ZS_WF_STATE | ZS_WF_ONE_SIDED | ZS_WF_REPLICA |
		    ZS_WF_SEED | ZS_WF_DEVICE | ZS_WF_REDO | ZS_WF_READER | ZS_WF_PIN |
		    ZS_WF_CATCHUP | ZS_WF_PREV | ZS_WF_EMPTY,
};

struct zs_frame {
	uint16_t op;
	uint64_t req_id;
	uint32_t job;
	uint32_t unit;
	uint64_t offset;
	uint64_t length;
	uint64_t step;
	uint64_t payload_len;
	uint32_t rank;
	uint32_t status;
	uint16_t dtype;
	uint16_t flags;
	uint64_t aux; /* split over the two aux fields */
};

/* Writes f as an 80-byte header into out. */
void zs_wire_encode(const struct zs_frame *f, uint8_t out[ZS_WIRE_HDR]);

/*
 * Parses and checks a header: magic, version, CRC, op range, reserved bits.
 * Fails with ZS_EPROTO and a message naming what is wrong; f is untouched
 * then.
 */
enum zs_status zs_wire_decode(const uint8_t in[ZS_WIRE_HDR], struct zs_frame *f,
			      struct zs_error *err);

const char *zs_op_name(unsigned op);

#endif
