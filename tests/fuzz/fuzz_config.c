/*
 * fuzz_config.c - libFuzzer target: the launch configuration's parser
 * (base/config.h), which every daemon, libzshard and zshardctl read: the
 * input as a file's text, checked the way zshardctl config check does it
 * (every mistake said, going on past each); what it keeps is then made into
 * each daemon's command line, as they take it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"

static void say(void *arg, const char *msg)
{
	size_t *n = arg;
	*n += strlen(msg); /* the message is whole */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");
	static const char *const who[] = {"server", "coordinator"};
	struct zs_config c;
	size_t said = 0;

	if (!f)
		return 0;
	zs_config_check_stream(f, "/fuzz/zshard.conf", &c, say, &said);
	fclose(f);
	for (int w = 0; w < 2; w++) {
		char *a0 = "prog", **v;
		int argc;
		if (!zs_config_argv(&c, who[w], 1, &a0, &v, &argc, NULL))
			free(v);
	}
	zs_config_release(&c);
	return 0;
}
