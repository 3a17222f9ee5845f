/*
 * fuzz_spec.c - libFuzzer target: the job-spec parser (JSON text, as
 * zshardctl job create and the Python package send it). A spec it accepts
 * is normalized (validated) and, when valid, placed over three servers:
 * every step a job create takes at the coordinator.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/placement.h"
#include "model/spec_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct zs_job_spec s;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (!zs_spec_from_json(text, &s, NULL)) {
		if (!zs_job_spec_normalize(&s, NULL)) {
			struct place_server ps[3] = {{1, 1ull << 40, NULL, "a"}, {2, 1ull << 40, NULL, "b"},
						     {3, 1ull << 30, NULL, "c"}};
			struct zs_placement pl;
			if (!place_job(&s, ps, 3, NULL, &pl, NULL))
				zs_placement_release(&pl);
		}
		(void)zs_layout_digest(&s.layout);
		zs_job_spec_release(&s);
	}
	free(text);
	return 0;
}
