/*
 * ckpt_arm.h - a pending checkpoint armed on the servers at once, rather
 * than at their next heartbeat: the one fan-out of a checkpoint's snapshot
 * task, used by the trainers (zs_checkpoint) and by zshardctl checkpoint
 * create, so that a step just ahead of them is still captured (each server
 * arms the capture before the step's update).
 */
#ifndef ZS_CTRL_CKPT_ARM_H
#define ZS_CTRL_CKPT_ARM_H

#include <stdint.h>

#include "base/status.h"
#include "ctrl/coord_client.h"
#include "model/model.h"

/*
 * Sends checkpoint id's snapshot task (step) to every server holding a
 * shard of j, any copy, as j's placement says; for a replicated job, to
 * every live server too (its copies may have moved since j was read; one
 * that holds none may refuse). A replicated job's server that is down,
 * lost or stopped past timeout_ms is skipped with a warning: its failover
 * fails this checkpoint and the next one is taken. Any other refusal
 * fails, naming the server.
 */
enum zs_status zs_ckpt_arm(struct zs_coord_client *c, const struct zs_job *j, uint64_t id,
			   uint64_t step, int timeout_ms, struct zs_error *err);

#endif
