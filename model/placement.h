/*
 * placement.h - where each shard of a job lives. A pure function of the job
 * spec and the live servers: no I/O, no locks, deterministic.
 *
 * Striping: a unit of N elements is cut into P = min(S, max(8, ceil(its
 * bytes / 4 MiB))) shards of ceil(N/P) elements, rounded up to the job's
 * alignment: over up to 8 servers every link carries 1/S of a gather; on a
 * large cluster a unit is spread over as many servers as its size warrants
 * (at least 8), so the placement grows with the model, not with units x
 * servers. A unit smaller than P aligned chunks has fewer shards (no empty
 * shards are listed). Shard i of unit u goes to the server at position
 * (u + i) mod S of the id-sorted server list, so that units spread over
 * every server.
 *
 * Frozen tensors (not in a collective job): a unit where frozen and trained
 * tensors meet is cut there, and each run of either kind is striped on its
 * own into its share of the unit's P shards (at least one), indices going
 * on across runs: no shard mixes frozen and trained elements, and a frozen
 * shard takes step marks, not gradients (model.h, zs_shard_marks). A unit
 * with no frozen tensor (or only frozen ones) is striped as above.
 *
 * Replicas (spec.replicas = K > 1): each shard is listed K times, copy 0
 * (the primary) where striping puts it and copies 1..K-1 on the next
 * servers of the rotation that are on other hosts than the copies before
 * (where the live servers span K hosts; else on other servers), so no two
 * copies share a server. Fewer than K live servers: ZS_ENOSPC.
 *
 * Capacity: each server is charged zs_shard_state_bytes() for every shard
 * it gets; a server whose charge exceeds its free bytes refuses
 * the whole placement (ZS_ENOSPC, naming the server), never over-commits.
 */
#ifndef ZS_PLACEMENT_H
#define ZS_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "base/status.h"

struct place_server {
	uint64_t id;
	uint64_t free_bytes; /* capacity minus what other jobs hold */
	const char *addr;    /* for error messages only; may be NULL */
	const char *host;    /* its host (a collective job's rank_hosts); may be NULL */
};

/*
 * Computes the placement of spec (already normalized) over servers[0..n).
 * prev, if not NULL, is the job's current placement: when the result has the
 * same shards, its epoch is kept, otherwise it is prev->epoch + 1 (1 for a
 * new job). On success *out is filled and owned by the caller
 * (zs_placement_release); on failure *out is left empty.
 * Errors: ZS_ESTATE when n is 0; ZS_ENOSPC when a server cannot hold its
 * share; ZS_ENOMEM.
 */
enum zs_status place_job(const struct zs_job_spec *spec,
			 const struct place_server *servers, size_t n,
			 const struct zs_placement *prev,
			 struct zs_placement *out, struct zs_error *err);

/* Bytes that shards of p charge to server id (0 if it holds none). */
uint64_t place_bytes_on(const struct zs_job_spec *spec,
			const struct zs_placement *p, uint64_t server_id);

#endif
