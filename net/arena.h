/*
 * arena.h - where buffers go in a server's arena: a first-fit allocator
 * over the offsets [0, len) of one region, with free neighbours merged
 * and the free tail given back, so that whatever sequence of buffers was
 * taken and given back, an arena with nothing taken holds one buffer of
 * its whole length again.
 *
 * It knows offsets only: no memory, no lock (the listener holds its own
 * around every call). Buffers are multiples of 4 KiB at 4 KiB offsets.
 * Cost: a take scans the free gaps (none on a server that only grows),
 * a give finds its buffer by binary search; both move the list's tail
 * when a gap opens or closes (O(buffers), as the list it replaced).
 */
#ifndef ZS_NET_ARENA_H
#define ZS_NET_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct zs_arena_block {
	uint64_t off, size;
	bool used;
};

struct zs_arena_map {
	uint64_t len;   /* the region's length (a multiple of 4 KiB) */
	uint64_t used;  /* [0, used) is covered by blocks, taken or free */
	uint64_t dirty; /* [0, dirty) has been handed out at some time */
	uint64_t taken; /* bytes in taken blocks */
	struct zs_arena_block *v; /* sorted by offset, no two free ones adjacent */
	size_t n, cap;
	size_t n_free;
};

/* An empty map of len bytes (rounded down to 4 KiB). */
void zs_arena_map_init(struct zs_arena_map *m, uint64_t len);
void zs_arena_map_release(struct zs_arena_map *m);

/*
 * Takes a buffer of at least bytes (rounded up to 4 KiB, 4 KiB for 0) at
 * the lowest offset where one fits; *off is its offset, *zero_upto how
 * much of it may hold bytes of an earlier buffer (it must be zeroed up to
 * there; beyond, the region was never handed out). False when no gap and
 * no tail is large enough, or out of memory for the list: nothing changes.
 */
bool zs_arena_take(struct zs_arena_map *m, uint64_t bytes, uint64_t *off, uint64_t *zero_upto);

/* Gives back the buffer taken at off; false (nothing changes) when no
 * buffer taken starts there. */
bool zs_arena_give(struct zs_arena_map *m, uint64_t off);

/* The largest buffer a take could hand out now. */
uint64_t zs_arena_largest(const struct zs_arena_map *m);

#endif
