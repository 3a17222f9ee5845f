/*
 * plan.h - what a sharding setup costs in memory, before running it
 * (zshardctl plan, and the predictions make bench checks against).
 *
 * Two accountings:
 *  - the ZeRO paper's (Rajbhandari et al., 2020, section 3): per GPU,
 *    parameters b*P, gradients b*P and K*P of optimizer state (K = 12 for
 *    mixed-precision Adam: fp32 master, m, v), where stage 1 divides the
 *    optimizer state by the data-parallel size N, stage 2 also the
 *    gradients, stage 3 also the parameters;
 *  - zshard's, which moves the optimizer state and the fp32 master to the
 *    shard servers (host memory) at every stage and leaves the trainer
 *    (GPU) only what its step driver holds: stage 1 the replica and every
 *    gradient; stage 2 the replica and the gradients of 1 + push_depth
 *    consecutive units (one being written, the rest being pushed); stage 3
 *    the prefetch window of parameters (1 + prefetch consecutive units;
 *    every unit when kept until backward) and the same gradients. A server
 *    holds, per element of its shards, zs_server_bytes_per_elem: master,
 *    the reduction's state (16 bytes at any world size), the mean
 *    gradient, optimizer state, the compute copy and the previous step's
 *    (a lost rank's replacement redoes its step from it); and, once, its
 *    landing budget for pushes in flight.
 * Not counted (a fixed overhead the output states): the trainer's
 * activations and its process (libraries, connections), the servers'
 * process.
 */
#ifndef ZS_PLAN_H
#define ZS_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

struct zs_plan_in {
	uint64_t params;       /* P; ignored when unit_numel is given */
	uint32_t n_units;      /* units (layers); uniform when unit_numel is NULL */
	const uint64_t *unit_numel; /* optional: the job's units, in order */
	uint32_t world;        /* N data-parallel trainers */
	uint32_t servers;      /* shard servers (0: N, co-located) */
	unsigned stage;        /* 1, 2, 3 */
	enum zs_dtype dtype;   /* compute dtype */
	enum zs_optim_kind optim;
	bool momentum;         /* SGD with momentum */
	unsigned prefetch;
	unsigned push_depth;   /* gradient pushes in flight (0: 1, the driver's default) */
	bool keep_until_backward; /* stage 3: no reshard after forward */
	bool server_gpu;       /* servers keep shards on their GPU (--gpu), one
				* per trainer host, sharing a trainer's GPU */
	uint64_t landing;      /* a server's --landing-budget (0: 256 MiB) */
	uint32_t replicas;     /* copies of each shard (0: 1), on distinct servers */
	uint32_t reader_pins;  /* versions readers may pin (the spec's readers.pins) */
};

struct zs_plan {
	uint64_t params, largest_unit;
	unsigned b, K; /* bytes per parameter: compute dtype, optimizer (paper) */
	/* the paper: bytes per GPU for the baseline (DDP) and stages 1-3 */
	double zero[4];
	/* zshard: bytes per trainer and per server */
	uint64_t trainer_params, trainer_grads, trainer_total;
	uint64_t server_per_elem; /* host bytes per element owned */
	uint64_t server_landing;  /* host bytes for pushes in flight */
	uint64_t server_pins;     /* host bytes for readers' pinned versions:
				   * a compute copy of every element owned each */
	uint64_t server_total;    /* per server, shards spread evenly, the
				   * landing budget and the pins */
	/* server_gpu: the device's share (else 0); the GPU then holds
	 * trainer_total + server_dev_total */
	uint64_t server_dev_per_elem, server_dev_total;
};

/* Fills *out; ZS_EINVAL (with err) for an input out of range. */
enum zs_status zs_plan_compute(const struct zs_plan_in *in, struct zs_plan *out,
			       struct zs_error *err);

/* The GPU bytes a setup needs: the trainer's, and with server_gpu its
 * co-located server's device share. */
uint64_t zs_plan_gpu_bytes(const struct zs_plan *p);

/*
 * The largest parameter count (uniform units of in->n_units) whose trainer
 * (and server_gpu's share) fits in gpu bytes and whose servers fit in host
 * bytes each (0 for a limit not given); UINT64_MAX when nothing bounds it
 * below 2^50.
 */
uint64_t zs_plan_max_params(const struct zs_plan_in *in, uint64_t gpu, uint64_t host);

#endif
