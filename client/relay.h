/*
 * relay.h - a weight reader's relay (docs/DESIGN.md, "Weight readers"):
 * the tensors a reader read of its pinned version, kept to serve its
 * children in the job's relay tree, and a child's connection to its
 * parent.
 *
 * A relay is a small data-plane server (net/listener.h): its children
 * connect as readers connect to the shard servers (a HELLO proving the
 * reader token; TLS 1.3 records keyed by it where the job has data_tls)
 * and read a tensor of the pinned version with a pinned GATHER of its
 * unit's range (net/wire.h). Its copies live in the listener's arena, so
 * that where both ends have an RDMA device a child reads them by RDMA
 * READ over the one-sided path (rdma/), else over tcp. A parent holding
 * another version answers ZS_ENOTFOUND; one whose reads stall answers
 * ZS_ETIMEDOUT (the child reads from the servers).
 */
#ifndef ZS_CLIENT_RELAY_H
#define ZS_CLIENT_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "model/model.h"
#include "net/transport.h"

struct relay;

/* A tensor as the relay serves it: its unit's range and dtype. */
struct relay_tensor {
	uint32_t unit;
	uint64_t offset, numel;
	enum zs_dtype dt;
};

/* Starts serving at listen_addr (HOST:PORT; port 0: a free one) for job,
 * proving token (the reader token), the n tensors ts of a version (copied);
 * offers the one-sided path where this host has an RDMA device. *addr
 * (ZS_ADDR_MAX bytes) the address to advertise. */
enum zs_status relay_start(const char *listen_addr, const char *job, const char *token,
			   bool tls, const struct relay_tensor *ts, uint32_t n, int timeout_ms,
			   struct relay **out, char *addr, struct zs_error *err);
/* Stops serving (every connection closed) and frees it. NULL is fine. */
void relay_stop(struct relay *rl);
/* From now on the version of a new pin of step (none: held false): what
 * was kept goes (even of the same step: after a rollback it is another
 * run's), once no child is being sent it; its run is not known yet. */
void relay_version(struct relay *rl, uint64_t step, bool held);
/* The registry labelled the pin of step with timeline: children of
 * another run's step are refused from now on (and those waiting fail). */
void relay_timeline(struct relay *rl, uint64_t step, uint64_t timeline);
/* Keeps tensor i of the version (len bytes, its CRC32C) for the children
 * (where the arena has no room, they read it from the servers). */
void relay_put(struct relay *rl, uint32_t i, const void *bytes, size_t len, uint32_t crc);
/* Bytes sent to children so far. */
uint64_t relay_served(const struct relay *rl);

/* A child's connection to its parent at addr: over rdma where this host
 * and the parent can and the job does not encrypt its data plane (tls),
 * else over tcp (with tls: encrypted); proven by the reader token.
 * zs_conn_close it when done. */
enum zs_status relay_dial(const char *addr, const char *job, const char *token, bool tls,
			  int timeout_ms, struct zs_conn **out, struct zs_error *err);
/* Tensor t at step of timeline (the run the registry labelled this
 * reader's pin with; 0: not said) from the parent into dst (its bytes in
 * its dtype), *crc the CRC32C its bytes must have (checked by the caller).
 * ZS_ENOTFOUND: the parent holds another version, or that step of another
 * run; ZS_ETIMEDOUT: it does not read the tensor; ZS_EUNAVAIL: the
 * connection broke or the parent did not answer within timeout_ms (then c
 * is closed, *c NULL). */
enum zs_status relay_fetch(struct zs_conn **c, const struct relay_tensor *t, uint64_t step,
			   uint64_t timeline, void *dst, uint32_t *crc, int timeout_ms,
			   struct zs_error *err);

#endif
