/*
 * transport_toy.h - the transport conformance suite's fixture
 * (test_transport.c): a toy target behind a real listener (tcp and shm
 * endpoints, the rdma path when asked) that serves unit 0 of job "job"
 * (token "tok", 4 ranks) from NELEM f32 values, i * 0.5, lands pushes in a
 * staging array of as many, holds reads of a step past ready_step until
 * toy_release, and counts completed and aborted pushes. It keeps "shards"
 * on an emulated device: shm peers may push from their device memory
 * (zs_post_write_device), which it copies into the staging array.
 */
#ifndef ZS_TESTS_TRANSPORT_TOY_H
#define ZS_TESTS_TRANSPORT_TOY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/listener.h"
#include "net/transport.h"

#define NELEM	   (16u << 20) /* 64 MiB of f32 served, 64 MiB of staging */
#define JOB_HANDLE 7

struct toy {
	struct zs_listener *l;
	float *served, *staging;
	pthread_mutex_t mu;
	uint64_t ready_step; /* reads of a later step wait */
	struct zs_sop *held[256];
	struct zs_xfer held_x[256];
	int n_held;
	int writes_done, writes_aborted;
	struct zs_dev *dev; /* the emulated device its device pushes map on */
	int maps, unmaps;   /* of trainers' device memory */
};

struct fixture {
	const struct zs_transport_ops *t;
	bool tls; /* its connections encrypted (net/dtls.h) */
	struct toy toy;
	char tcp_addr[ZS_ADDR_MAX], shm_name[ZS_ADDR_MAX];
};

/* The address f's transport dials: the shm name or the tcp address. */
const char *addr_of(struct fixture *f);
/* The toy's callbacks, with t as their context. */
struct zs_target toy_target(struct toy *t);
/* Starts f's toy on a listener for f->t (2 * NELEM * 4 bytes of arena);
 * 0, or -1 with the reason on stderr. stop_toy fails held reads, frees it. */
int start_toy(struct fixture *f);
void stop_toy(struct fixture *f);
/* cmocka group setups (a static fixture for each transport) and teardown. */
int setup_tcp(void **st);
int setup_tcp_tls(void **st);
int setup_shm(void **st);
int setup_rdma(void **st);
int teardown(void **st);
/* Reads a counter the listener's threads update (*p of t's). */
int count(struct toy *t, const int *p);
/* Answers every held read: served, or failed (fail). */
void toy_release(struct toy *t, bool fail);
/* A connection of rank 1 to f's toy over f->t, failing the test if refused. */
struct zs_conn *open_conn(struct fixture *f, unsigned max_inflight);
/* A transfer of unit 0's f32 [off, off + len) at step. */
struct zs_xfer xf(uint64_t off, uint64_t len, uint64_t step);

/* Raw peers, for the misbehaving-peer and handshake tests: a socket to f's
 * toy with the server's first frame (its nonce) read; a HELLO of job "job"
 * as rank 2 with the proof given, sent on fd (the answer's op); one said
 * properly (its proof into proof when not NULL), its socket. */
int raw_dial(struct fixture *f, uint8_t nonce[ZS_NONCE_LEN]);
uint16_t raw_hello_send(int fd, const uint8_t proof[ZS_PROOF_LEN]);
int raw_hello_proof(struct fixture *f, uint8_t *proof);
int raw_hello(struct fixture *f);

#endif
