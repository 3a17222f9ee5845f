/*
 * spec_json.h - a job spec written as JSON, for operators and scripts:
 *
 *   {"name": "demo", "stage": 3, "world_size": 2, "compute_dtype": "bf16",
 *    "align_bytes": 256,
 *    "optimizer": {"kind": "adamw", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999,
 *                  "eps": 1e-8, "weight_decay": 0.01, "clip_norm": 1.0},
 *    "units": [{"name": "embed", "dtype": "f32",
 *               "tensors": [{"name": "wte", "shape": [256, 64]}]}]}
 *
 * Optimizer groups (torch's param_groups): "optimizer": {..., "groups":
 * [{}, {"weight_decay": 0}]} lists groups 0, 1, ... (a key left out takes
 * the top-level value) and a tensor names its own, {"name": "ln.bias",
 * "shape": [64], "group": 1}; without "groups" there is one, group 0.
 *
 * Keys other than these are refused (a typo must not silently become a
 * default). Parsing checks types only; zs_job_spec_normalize() checks values.
 */
#ifndef ZS_SPEC_JSON_H
#define ZS_SPEC_JSON_H

#include "model/model.h"
#include "base/status.h"

/* Parses text; on success *spec is owned by the caller (zs_job_spec_release). */
enum zs_status zs_spec_from_json(const char *text, struct zs_job_spec *spec,
				 struct zs_error *err);
/* Reads and parses a file ("-" for stdin). */
enum zs_status zs_spec_load(const char *path, struct zs_job_spec *spec,
			    struct zs_error *err);

#endif
