/* fixtures.h - small job specs shared by unit tests. */
#ifndef ZS_FIXTURES_H
#define ZS_FIXTURES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>

#include "model/model.h"

/* The process's open file descriptors (for tests that nothing is left open). */
static inline int fixture_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static inline void fixture_tensor(struct zs_tensor *t, const char *name, uint32_t ndim,
				  uint64_t d0, uint64_t d1)
{
	snprintf(t->name, sizeof t->name, "%s", name);
	t->ndim = ndim;
	t->shape[0] = d0;
	t->shape[1] = d1;
}

static inline struct zs_tensor *fixture_unit(struct zs_job_spec *s, int u,
					     const char *name, uint32_t n_tensors)
{
	snprintf(s->layout.units[u].name, sizeof s->layout.units[u].name, "%s", name);
	s->layout.units[u].n_tensors = n_tensors;
	s->layout.units[u].tensors = calloc(n_tensors, sizeof(struct zs_tensor));
	return s->layout.units[u].tensors;
}

/* A 3-unit AdamW bf16 job: embed (f32, 2 tensors), h0 (2 tensors), scalar unit. */
static inline void fixture_spec(struct zs_job_spec *s, const char *name)
{
	struct zs_tensor *t;

	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", name);
	s->stage = 2;
	s->world_size = 3;
	s->compute_dtype = ZS_BF16;
	s->optim = (struct zs_optim){
	    .kind = ZS_ADAMW, .lr = 1e-3, .weight_decay = 0.01, .clip_norm = 1.0};
	s->layout.n_units = 3;
	s->layout.units = calloc(3, sizeof *s->layout.units);
	t = fixture_unit(s, 0, "embed", 2);
	s->layout.units[0].dtype = ZS_F32;
	fixture_tensor(&t[0], "wte", 2, 256, 64);
	fixture_tensor(&t[1], "wpe", 2, 32, 64);
	t = fixture_unit(s, 1, "h0", 2);
	fixture_tensor(&t[0], "w", 2, 64, 64);
	fixture_tensor(&t[1], "b", 1, 64, 0);
	t = fixture_unit(s, 2, "scale", 1);
	fixture_tensor(&t[0], "s", 0, 0, 0);
}

#endif
