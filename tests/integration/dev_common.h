/*
 * dev_common.h - what the device-mode tests share (test_device.c,
 * test_collective.c): ranks that train the oracle with their unit buffers
 * in device memory, their "kernels" copies queued on their compute stream
 * (test_device.c says how that catches a missing wait), and the check of
 * such a run against the single-process reference.
 */
#ifndef ZS_TESTS_DEV_COMMON_H
#define ZS_TESTS_DEV_COMMON_H

#include "tests/integration/train_common.h"

#include "gpu/dev.h"

struct dev_rank {
	zs_trainer *t;
	int device;        /* for zs_trainer_set_device */
	bool own_stream;   /* a compute stream of its own (else NULL) */
	struct zs_policy pol;
	int rc;
	char why[512];
	unsigned long long peak_params;
	struct zs_dev *dev; /* the rank's own handle on the device, and */
	zs_dev_stream s;    /* its compute stream: closed after the trainer */
};

/* A struct dev_rank's thread: its steps of the oracle in device mode. */
void *dev_train(void *arg);
/* Trains the oracle job name (units of sizes[0..U) elements) with R
 * device-mode ranks over transport and checks it bitwise; collective: a
 * collective job (rank r on device + r where device is a CUDA ordinal);
 * peak: rank 0's peak of live parameter bytes. */
void dev_run_sizes(const char *name, uint32_t R, const char *transport, unsigned stage,
		   enum zs_dtype dt, int device, bool own_stream, unsigned prefetch,
		   const uint64_t *sizes, uint32_t U, bool collective, unsigned long long *peak);

#endif
