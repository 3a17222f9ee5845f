/*
 * zshard_reader.h - libzshard's weight readers: an inference or rollout
 * worker reads a job's parameters of one step straight from its shard
 * servers while training goes on, with no trainer involved.
 *
 * A reader opens the job with its own credential (the job's reader token,
 * which the coordinator hands a reader's certificate; a connection that
 * proves it may read and pin, never push), pins a version (a step) on
 * every server of the job, reads tensors of it by name in the dtype it
 * wants, and releases it. A pinned version is consistent: each server
 * copied every shard of it as the shard reached that step, so a read never
 * mixes two steps, whatever training does meanwhile. The job's spec says
 * how many versions readers may pin at once ("readers": {"pins": N}; 0:
 * none) and how long a pin nobody touches is kept ("idle_ms").
 *
 * Every range a server sends carries the CRC32C it took of the bytes; the
 * library checks it (ZS_EIO on a mismatch) and gives each tensor's
 * CRC32C, over its bytes in the unit's dtype, to compare with another
 * reader's or an export's.
 *
 * Same conventions as zshard.h: int status codes, messages in
 * zs_reader_error, one thread at a time per handle.
 */
#ifndef ZSHARD_READER_H
#define ZSHARD_READER_H

#include <stddef.h>

#include "zshard_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#pragma GCC visibility push(default)

typedef struct zs_reader zs_reader;

/* The step zs_reader_pin takes for "the latest finished step". */
#define ZS_READER_LATEST (~0ULL)

/*
 * Opens job read-only: its layout and placement from the coordinator
 * (NULL: found as zs_trainer_join finds it), tcp connections to every
 * server holding a copy of a shard of it, proving the job's reader token
 * (derived from the token where the coordinator hands that). timeout_ms
 * bounds each call and each wait for a version. On failure *out is NULL
 * and err (errlen bytes, may be NULL) says why: ZS_ENOTFOUND (no such
 * job), ZS_EPERM (the caller's certificate may not read it), ZS_EUNAVAIL.
 */
int zs_reader_open(const char *coordinator, const char *job, int timeout_ms, zs_reader **out,
		   char *err, size_t errlen);
/* Releases the pinned version and frees the handle. NULL is fine. */
void zs_reader_close(zs_reader *r);
/* The last failed call's message, valid until the next call. */
const char *zs_reader_error(const zs_reader *r);

/* The latest step every shard of the job has finished (the lowest version
 * over its servers). ZS_ESTATE: the job has no parameters yet. */
int zs_reader_latest(zs_reader *r, unsigned long long *step);
/* Waits (up to timeout_ms; < 0: the handle's) until a step after `after`
 * is finished: *step, the latest. ZS_ETIMEDOUT. */
int zs_reader_wait(zs_reader *r, unsigned long long after, int timeout_ms,
		   unsigned long long *step);
/*
 * Pins step (ZS_READER_LATEST: the latest finished one) on every server
 * of the job, then releases the version pinned before (if another). *pinned
 * (may be NULL): the step. ZS_EPERM: the job lets readers pin no version,
 * or the connection is not a reader's; ZS_ENOSPC: its servers hold as many
 * pinned versions as its spec allows; ZS_EAGAIN: the step is gone (a server
 * keeps a shard's version and the one before), or the job has no
 * parameters yet. A step not reached yet is pinned, and reads wait for it
 * (up to the handle's timeout; then ZS_ESTATE).
 */
int zs_reader_pin(zs_reader *r, unsigned long long step, unsigned long long *pinned);
/*
 * Versions that are committed checkpoints of the job: its own (this
 * incarnation's), oldest first. A checkpoint is read from the records its
 * servers wrote of it (their LMDB: it costs the servers no memory), from
 * wherever they are now, whatever the placement since; its tensors are its
 * f32 masters rounded to each unit's dtype as the servers round them for
 * trainers, so its bits and CRC32Cs are a live pin's of its step.
 *
 * zs_reader_checkpoints: up to cap ids and steps (either may be NULL), *n
 * how many there are (may be more than cap).
 */
int zs_reader_checkpoints(zs_reader *r, unsigned long long *ids, unsigned long long *steps,
			  unsigned cap, unsigned *n);
/* Waits (up to timeout_ms; < 0: the handle's) until a checkpoint with an
 * id above `after` is committed: the newest one's id and step. ZS_ETIMEDOUT. */
int zs_reader_wait_checkpoint(zs_reader *r, unsigned long long after, int timeout_ms,
			      unsigned long long *id, unsigned long long *step);
/*
 * Pins committed checkpoint id as the version read (the one pinned before
 * let go once it holds): the coordinator keeps it from retirement by the
 * job's keep_checkpoints until this reader lets it go (or is not heard
 * from within its lease); an operator's delete still deletes it (reads
 * then fail ZS_ENOTFOUND). *step (may be NULL): its step. ZS_ENOTFOUND: the
 * job has no such checkpoint (retired, deleted, another job's); ZS_ESTATE:
 * it is not committed, or was taken on another layout.
 */
int zs_reader_pin_checkpoint(zs_reader *r, unsigned long long id, unsigned long long *step);
/* Releases the pinned version. ZS_ESTATE: none is pinned. */
int zs_reader_release(zs_reader *r);

/* The job's tensors: how many, and tensor i's name (the library's, valid
 * while r is: its state_dict name, UNIT.NAME where two units share one),
 * the dtype its unit is held in (1 f32, 2 bf16, 3 f16), its dimensions
 * (up to cap into shape, *ndim its own count) and elements. ZS_EINVAL: i
 * out of range. */
unsigned zs_reader_tensors(const zs_reader *r);
int zs_reader_tensor(const zs_reader *r, unsigned i, const char **name, int *dtype,
		     unsigned *ndim, unsigned long long *shape, unsigned cap,
		     unsigned long long *numel);
/* The index (for zs_reader_tensor) of the tensor name names: a name
 * zs_reader_tensor gives, UNIT.NAME, or a tied parameter's other name.
 * ZS_ENOTFOUND: none. */
int zs_reader_find(const zs_reader *r, const char *name, unsigned *i);
/*
 * Reads tensor name (a name zs_reader_tensor gives, UNIT.NAME, or a tied
 * parameter's other name) of the pinned version into dst, numel elements
 * of dtype (1 f32, 2 bf16, 3 f16; converted from the unit's, rounding to
 * nearest even where it narrows), dst_bytes its room. *crc (may be NULL):
 * the CRC32C of the tensor's bytes in its unit's dtype. ZS_EINVAL: an
 * unknown name or dtype, dst too small; ZS_ESTATE: nothing pinned;
 * ZS_ENOTFOUND: the version is no longer pinned (released, idle past the
 * job's bound, or dropped by a rollback); ZS_EIO: bytes that do not match
 * their server's CRC32C.
 */
int zs_reader_read(zs_reader *r, const char *name, int dtype, void *dst, size_t dst_bytes,
		   unsigned *crc);

/*
 * Relays what this reader reads to other readers of the same version
 * (docs/DESIGN.md, "Weight readers"): serves at listen_addr (HOST:PORT,
 * port 0: a free one; NULL: 0.0.0.0:0) and takes its place in the job's
 * relay tree, each reader with up to fanout children (0: 2): a version's
 * first reader reads from the servers, the others from their parents, so
 * that the servers send each byte of a version once whatever the number
 * of readers. It keeps a copy of every tensor it read of its pinned version
 * (host memory: the model in its units' dtypes) for its children. A parent
 * that fails is reported and routed around; one that does not read a
 * tensor (or holds another version) leaves it to the servers.
 * ZS_ESTATE: it relays already.
 */
int zs_reader_relay(zs_reader *r, const char *listen_addr, unsigned fanout);
/* The address this reader relays at ("" when it does not). */
const char *zs_reader_relay_addr(const zs_reader *r);

struct zs_reader_stats {
	unsigned long long id;     /* the coordinator's number for it */
	unsigned long long parent; /* the reader it reads from; 0: the servers */
	unsigned long long bytes_from_servers, bytes_from_relay, bytes_served;
	unsigned long long bytes_from_relay_rdma; /* of bytes_from_relay, over rdma */
	/* of bytes_from_servers, those taken from their arenas (shm on their
	 * host, rdma): the servers' CPU sent none of them */
	unsigned long long bytes_from_servers_one_sided;
};
void zs_reader_stats(const zs_reader *r, struct zs_reader_stats *s);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
