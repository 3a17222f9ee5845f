/*
 * jobio.h - whole-job access for operator tools (export, import): connects
 * to every server holding a shard of a job as an observer (it reads state
 * and uploads initial parameters; it never pushes gradients) and reads or
 * writes whole units.
 */
#ifndef ZS_JOBIO_H
#define ZS_JOBIO_H

#include <stdint.h>

#include "model/model.h"
#include "base/status.h"

struct jobio;

enum zs_status jobio_open(const char *coordinator, const char *job, int timeout_ms,
			  struct jobio **out, struct zs_error *err);
void jobio_close(struct jobio *io);
const struct zs_job *jobio_job(const struct jobio *io);

/*
 * Reads array (0 master, 1 and 2 the optimizer's state) of a unit into out
 * (numel floats) and its version. ZS_ESTATE when the unit's shards are at
 * different steps (training is mid-step).
 */
enum zs_status jobio_read(struct jobio *io, uint32_t unit, int array, float *out,
			  uint64_t *version, struct zs_error *err);
/* Uploads a unit's initial parameters (before its first step). */
enum zs_status jobio_init(struct jobio *io, uint32_t unit, const float *in,
			  struct zs_error *err);
/* Uploads a unit's optimizer array (1 or 2) imported with its parameters,
 * after them and before the first step (shards of frozen tensors alone
 * keep none and are skipped). */
enum zs_status jobio_init_state(struct jobio *io, uint32_t unit, int array, const float *in,
				struct zs_error *err);

#endif
