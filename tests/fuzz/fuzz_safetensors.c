/*
 * fuzz_safetensors.c - libFuzzer target: the safetensors reader
 * (zshardctl import, and the Python package's checkpoints): the input is
 * the whole file, opened from a memfd as a path, and the same bytes as a
 * checkpoint blob's buffers (st_parse_mem, any dtype). Whatever it
 * accepts, every tensor it lists must lie inside the input: each is read
 * to its end.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "storage/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	char path[64];
	struct st_file f;
	volatile uint8_t sink = 0;

	if (fd < 0 && (fd = memfd_create("fuzz.safetensors", 0)) < 0)
		return 0;
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		return 0;
	snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	for (int mem = 0; mem < 2; mem++) {
		if (mem ? st_parse_mem(data, size, "blob", &f, NULL) : st_open(path, &f, NULL))
			continue;
		for (uint32_t i = 0; i < f.n; i++) {
			const uint8_t *p = f.t[i].data;
			if (mem && (p < data || p + f.t[i].bytes > data + size))
				__builtin_trap(); /* outside the input */
			for (uint64_t k = 0; k < f.t[i].bytes; k += 61)
				sink ^= p[k];
			if (f.t[i].bytes)
				sink ^= p[f.t[i].bytes - 1];
			if (st_find(&f, f.t[i].name) == NULL)
				__builtin_trap(); /* a listed tensor must be found by its name */
		}
		st_close(&f);
	}
	(void)sink;
	return 0;
}
