/*
 * coll.h - a collective communicator among a job's trainers, on their
 * devices: NCCL (libnccl.so.2, loaded when one is opened, like the CUDA
 * driver) for a CUDA device, or, on the emulated device (gpu/dev.h), an
 * in-process one whose ranks are threads: the same calls, so the host side
 * of a collective path runs in the tests without GPUs.
 *
 * Rank 0 makes the id (zs_coll_new_id) and the ranks share it (zshard
 * hands it out through the coordinator: zs_coord_comm_id); every rank then
 * opens the communicator with it. Collectives move bytes only (no
 * arithmetic), so they never change a result's bits; where a sum is
 * needed, the caller adds what an all-to-all delivered, in rank order.
 *
 * Calls are queued on stream s (emulated: done by the calling thread once
 * s's earlier work is, and complete when the call returns). ZS_OK, or a
 * status with the reason in zs_coll_error.
 */
#ifndef ZS_GPU_COLL_H
#define ZS_GPU_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/dev.h"

#define ZS_COLL_ID_BYTES 128

struct zs_coll;

/* Whether NCCL loads here (libnccl.so.2), or why not. */
bool zs_nccl_available(char *why, size_t len);

/* A new communicator id for device d's kind. */
enum zs_status zs_coll_new_id(struct zs_dev *d, uint8_t id[ZS_COLL_ID_BYTES], char *why,
			      size_t len);
/* Joins the communicator of id as rank of nranks; waits (up to timeout_ms)
 * for every rank to join. */
enum zs_status zs_coll_open(struct zs_dev *d, const uint8_t id[ZS_COLL_ID_BYTES], int nranks,
			    int rank, int timeout_ms, struct zs_coll **out, char *why, size_t len);
void zs_coll_close(struct zs_coll *c);
const char *zs_coll_error(const struct zs_coll *c);
int zs_coll_rank(const struct zs_coll *c);
int zs_coll_size(const struct zs_coll *c);

/* Waits (the host) for what is queued on s, collectives included, within
 * the open's timeout: a rank gone makes NCCL wait forever, so past the
 * bound (or on NCCL's own error) the communicator is aborted and every
 * later call fails: ZS_ETIMEDOUT / ZS_EIO with the reason. */
enum zs_status zs_coll_wait(struct zs_coll *c, zs_dev_stream s);

/* recv[r*n, (r+1)*n) = rank r's send[0, n), for every r (in place:
 * send == recv + rank*n). */
enum zs_status zs_coll_all_gather(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s);
/* recv[r*n, (r+1)*n) = rank r's send[me*n, (me+1)*n): each rank gets every
 * rank's piece for it (grouped sends and receives); send and recv must not
 * overlap. */
enum zs_status zs_coll_all_to_all(struct zs_coll *c, const void *send, void *recv, size_t n,
				  zs_dev_stream s);

#endif
