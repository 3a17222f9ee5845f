/*
 * emu_shm.h - the emulated device's shareable allocations (gpu/dev.h,
 * zs_dev_share / zs_dev_map): each one a memfd of its own, mapped shared;
 * its handle names the process, the descriptor and the memfd's name, and
 * another process of the same user maps it through /proc/PID/fd/FD after
 * checking that name, so a descriptor number reused for another
 * allocation is refused rather than mapped. Internal to gpu/ (emu.c).
 */
#ifndef ZS_GPU_EMU_SHM_H
#define ZS_GPU_EMU_SHM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpu/dev_int.h"

/* the emulator's zs_dev_ident: every emulated device of a host is one */
#define EMU_IDENT 0x454d5531u

struct emu_shm;
struct emu_shms {
	pthread_mutex_t mu;
	struct emu_shm *list;
	unsigned long long next_id;
};

void emu_shm_init(struct emu_shms *m);
/* n bytes backed by a memfd, or NULL with the reason in d's error */
void *emu_shm_alloc(struct zs_dev *d, struct emu_shms *m, size_t n);
/* Frees p when it is one of m's: true; false when it is not. */
bool emu_shm_free(struct emu_shms *m, void *p);
void emu_shm_free_all(struct emu_shms *m);
enum zs_status emu_shm_share(struct zs_dev *d, struct emu_shms *m, const void *p, void **base,
			     size_t *size, unsigned char handle[ZS_DEV_HANDLE_BYTES]);
enum zs_status emu_map(struct zs_dev *d, const unsigned char handle[ZS_DEV_HANDLE_BYTES],
		       void **base, size_t *size);
void emu_unmap(struct zs_dev *d, void *base, size_t size);

#endif
