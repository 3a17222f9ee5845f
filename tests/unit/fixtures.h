/* fixtures.h - small job specs shared by unit tests. */
#ifndef ZS_FIXTURES_H
#define ZS_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* A 3-unit AdamW bf16 job: embed (f32, 2 tensors), h0 (2 tensors), scalar unit. */
static inline void fixture_spec(struct zs_job_spec *s, const char *name)
{
	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", name);
	s->stage = 2;
	s->world_size = 3;
	s->compute_dtype = ZS_BF16;
	s->optim = (struct zs_optim){.kind = ZS_ADAMW, .lr = 1e-3, .weight_decay = 0.01,
				     .clip_norm = 1.0};
	s->layout.n_units = 3;
	s->layout.units = calloc(3, sizeof *s->layout.units);
	strcpy(s->layout.units[0].name, "embed");
	s->layout.units[0].dtype = ZS_F32;
	s->layout.units[0].n_tensors = 2;
	s->layout.units[0].tensors = calloc(2, sizeof(struct zs_tensor));
	strcpy(s->layout.units[0].tensors[0].name, "wte");
	s->layout.units[0].tensors[0].ndim = 2;
	s->layout.units[0].tensors[0].shape[0] = 256;
	s->layout.units[0].tensors[0].shape[1] = 64;
	strcpy(s->layout.units[0].tensors[1].name, "wpe");
	s->layout.units[0].tensors[1].ndim = 2;
	s->layout.units[0].tensors[1].shape[0] = 32;
	s->layout.units[0].tensors[1].shape[1] = 64;
	strcpy(s->layout.units[1].name, "h0");
	s->layout.units[1].n_tensors = 2;
	s->layout.units[1].tensors = calloc(2, sizeof(struct zs_tensor));
	strcpy(s->layout.units[1].tensors[0].name, "w");
	s->layout.units[1].tensors[0].ndim = 2;
	s->layout.units[1].tensors[0].shape[0] = 64;
	s->layout.units[1].tensors[0].shape[1] = 64;
	strcpy(s->layout.units[1].tensors[1].name, "b");
	s->layout.units[1].tensors[1].ndim = 1;
	s->layout.units[1].tensors[1].shape[0] = 64;
	strcpy(s->layout.units[2].name, "scale");
	s->layout.units[2].n_tensors = 1;
	s->layout.units[2].tensors = calloc(1, sizeof(struct zs_tensor));
	strcpy(s->layout.units[2].tensors[0].name, "s");
	s->layout.units[2].tensors[0].ndim = 0;
}

#endif
