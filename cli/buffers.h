/*
 * buffers.h - a PyTorch model's persistent buffers, from the checkpoint of
 * the step an export is of (see buffers.c).
 */
#ifndef ZS_CLI_BUFFERS_H
#define ZS_CLI_BUFFERS_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"
#include "storage/safetensors.h"

struct zs_coord_client;

struct cli_buffers {
	bool found;        /* st holds rank 0's buffers of the step */
	uint64_t id;       /* of the checkpoint they come from */
	struct st_file st; /* its tensors point into ckpt's blob */
	char what[96];
	char why[200];     /* not found: why, for the note */
	struct zs_checkpoint *ckpt;
	uint32_t n_ckpt;
};

/* Rank 0's buffers as job's committed checkpoint of step recorded them
 * (out->found), or why there are none (out->why); errors: a checkpoint's
 * buffers that do not parse, the coordinator's. Free with cli_buffers_free. */
enum zs_status cli_buffers_at(struct zs_coord_client *c, const char *job, uint64_t step,
			      struct cli_buffers *out, struct zs_error *err);
void cli_buffers_free(struct cli_buffers *b);

#endif
