/*
 * relaytree.h - the weight readers' relay tree, as pure decisions: the
 * timeline a pinned live step is of, and a reader's parent. The relaying
 * readers of one version (a job's step of one timeline, or a checkpoint),
 * in the order they first called (ids grow), form the tree: the one at
 * place p reads from the one at place (p - 1) / fanout, the first from
 * the servers, so each server sends each byte of a version once whatever
 * the number of readers; a reader that relays nothing reads from the
 * place after them. coord/readers.c is the shell (the registry, its
 * leases, the calls); the simulator's reader world (sim/readers.c) runs
 * the same functions under readers joining, leaving, lapsing, parents
 * reported lost, coordinators restarting and rollbacks.
 */
#ifndef ZS_MODEL_RELAYTREE_H
#define ZS_MODEL_RELAYTREE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

/*
 * The timeline of the version a reader says (pinned step, and the
 * timeline it says: the run its servers stamped the pin with, 1 + their
 * timeline, engine/pins.c; 0 from servers that do not say), where the
 * registry knew it as known (NULL: not registered) and the job is on
 * timeline job_tl: a checkpoint's or nothing pinned is 0; a live step
 * said is kept (the servers' stamp, or the one given before, said again
 * after a coordinator's restart); unsaid, the one given before for the
 * same step while the job is still on that run (a renewal the registry
 * took before its pin's call), else the job's run now (+ 1: never 0).
 */
uint64_t zs_rt_timeline(const struct zs_reader_info *said, const struct zs_reader_info *known,
			uint64_t job_tl);

/*
 * The parent of v[me] among v[0..n) (one job's registered readers, any
 * order): the index of the reader it reads from, or -1 for the servers.
 * Only readers of its version and timeline that relay count.
 */
int zs_rt_parent(const struct zs_reader_info *v, uint32_t n, uint32_t me, uint32_t fanout);

#endif
