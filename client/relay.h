/*
 * relay.h - a weight reader's relay (docs/DESIGN.md, "Weight readers"):
 * the tensors a reader read of its pinned version, kept to serve its
 * children in the job's relay tree, and the wire between a child and its
 * parent.
 *
 * The wire (little-endian; TLS 1.3 records keyed by the reader token
 * where the job has data_tls, net/dtls.h): the parent sends a nonce
 * (ZS_NONCE_LEN bytes); the child "ZSR1", the job's name (u32 length,
 * bytes) and the proof of the reader token over the nonce (net/hello.h);
 * the parent answers a u32 status. Then requests: u32 tensor, u64 step ->
 * u32 status, u32 CRC32C, u64 length, the tensor's bytes in its unit's
 * dtype. A parent holding another version answers ZS_ENOTFOUND; one whose
 * reads stall answers ZS_ETIMEDOUT (the child reads from the servers).
 */
#ifndef ZS_CLIENT_RELAY_H
#define ZS_CLIENT_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "net/records.h"

struct relay;

/* Starts serving at listen_addr (HOST:PORT; port 0: a free one) for job,
 * proving token (the reader token), n tensors a version; *addr (ZS_ADDR_MAX
 * bytes) the address to advertise. */
enum zs_status relay_start(const char *listen_addr, const char *job, const char *token,
			   bool tls, uint32_t n, int timeout_ms, struct relay **out, char *addr,
			   struct zs_error *err);
/* Stops serving (every connection closed) and frees it. NULL is fine. */
void relay_stop(struct relay *rl);
/* From now on the version of step (none: held false): what was kept of
 * another goes, once no child is being sent it. */
void relay_version(struct relay *rl, uint64_t step, bool held);
/* Keeps tensor i of the version (len bytes, its CRC32C) for the children. */
void relay_put(struct relay *rl, uint32_t i, const void *bytes, size_t len, uint32_t crc);
/* Bytes sent to children so far. */
uint64_t relay_served(const struct relay *rl);

/* A child's connection to its parent at addr: *io, proven and (with tls)
 * encrypted; close io->fd (and free io->rec) when done. */
enum zs_status relay_dial(const char *addr, const char *job, const char *token, bool tls,
			  int timeout_ms, struct zs_io *io, struct zs_error *err);
/* Tensor i at step from the parent into dst (len bytes exactly), *crc the
 * CRC32C its bytes must have (checked by the caller). ZS_ENOTFOUND: the
 * parent holds another version; ZS_ETIMEDOUT: it does not read the
 * tensor; ZS_EUNAVAIL: the connection broke. */
enum zs_status relay_fetch(struct zs_io *io, uint32_t i, uint64_t step, void *dst, size_t len,
			   uint32_t *crc, struct zs_error *err);

#endif
