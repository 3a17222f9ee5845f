/*
 * rdma.h - the ibverbs transport (rdma/client.c, server.c, device.c, built
 * where libibverbs is present; rdma/none.c otherwise, whose every entry
 * point says why there is no rdma). Reliable-connected queue pairs;
 * one-sided data movement:
 *
 *   - the shard server registers its whole shard arena (every buffer
 *     gathers read from and pushes land in) once, at start, and hands its
 *     address and key to each trainer when the queue pair is set up, over
 *     the tcp control connection of the same data address;
 *   - a gather asks the server, over that control connection, where step
 *     t's range is (the server answers once step t exists, as for shm),
 *     then the trainer RDMA READs it straight into its buffer: no server
 *     CPU touches the bytes;
 *   - a push asks for its staging slot the same way and RDMA WRITEs the
 *     gradient into it; the last piece goes WITH_IMM (the request's id),
 *     which completes on the server's receive queue: that notification
 *     lets the server reduce, and it acknowledges over the control
 *     connection. The server polls its completion queue for a short while,
 *     then sleeps on the completion channel: an idle server burns no core.
 *
 * Trainer buffers registered with zs_mem_register() are used as they are;
 * any other buffer is registered for the one transfer and released after.
 * Completions are polled for a short while, then waited for on the
 * completion channel, so an idle connection costs no CPU. A queue pair
 * that fails (a remote access error, a peer gone) fails the transfers on
 * it with the work completion's reason and is replaced before the next.
 *
 * Environment: ZSHARD_RDMA_DEV (device; default the first), ZSHARD_RDMA_GID
 * (GID index; default the first IPv4-mapped RoCE v2 GID, else 0),
 * ZSHARD_RDMA_DEPTH (work requests in flight per queue pair, default 128),
 * ZSHARD_RDMA_CHUNK (bytes per work request, default 1 MiB).
 */
#ifndef ZS_RDMA_H
#define ZS_RDMA_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "net/listener.h"
#include "net/transport.h"

/* What one side tells the other about its queue pair (and, from the
 * server, its arena), ZS_RDMA_INFO bytes on the wire, little-endian. */
#define ZS_RDMA_INFO 64
struct zs_rdma_info {
	uint32_t qpn, psn, rkey;
	uint16_t lid;
	uint8_t mtu; /* enum ibv_mtu */
	uint8_t gid[16];
	uint64_t addr, len; /* the server's arena */
};
void zs_rdma_info_pack(const struct zs_rdma_info *i, uint8_t out[ZS_RDMA_INFO]);
void zs_rdma_info_unpack(const uint8_t in[ZS_RDMA_INFO], struct zs_rdma_info *i);

/*
 * Whether RDMA can work on this host for lock_bytes of registered memory:
 * ZS_OK, or ZS_EUNAVAIL with a plain reason in note (no device, the port is
 * down, the memlock limit is below lock_bytes, or this build has no RDMA).
 * note (len bytes) also names the device and port when it works.
 */
enum zs_status zs_rdma_probe(uint64_t lock_bytes, char *note, size_t len);

/*
 * The server side: the listener's one-sided path (net/listener.h). Its
 * open() registers the listener's whole arena with the device, once; each
 * trainer's RDMA_QP control frame gets a queue pair whose notifications
 * (a push's last piece, WRITE_WITH_IMM with the request id) a thread takes
 * off the completion queue, polling then sleeping on the channel, and
 * hands to the listener. Without libibverbs its open() says so.
 */
extern const struct zs_listener_path zs_rdma_path;

/* The client side. Addresses are the server's tcp data address. */
extern const struct zs_transport_ops zs_rdma_transport;

/*
 * For tests of the failure paths: the next read on c goes to the arena
 * offset plus bad_offset and with the arena key plus bad_key, as a trainer
 * with a stale key or a wrong address would.
 */
void zs_rdma_debug_corrupt_next(struct zs_conn *c, uint64_t bad_offset, uint32_t bad_key);

#endif
