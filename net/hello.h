/*
 * hello.h - the data plane's handshake: a connection's HELLO proves the
 * job's token without sending it.
 *
 * The server speaks first: a NONCE frame of ZS_NONCE_LEN fresh random
 * bytes on every connection it accepts. The client's HELLO then carries
 * the job's name and HMAC-SHA256, keyed by the token, of the nonce and
 * everything the HELLO says (job, rank, incarnation, placement epoch,
 * flags). A capture holds no token, and a captured HELLO is refused on
 * any other connection (another nonce). Both ends compute the proof here.
 */
#ifndef ZS_HELLO_H
#define ZS_HELLO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ZS_NONCE_LEN 32
#define ZS_PROOF_LEN 32

/* What a HELLO says, and the nonce of the connection it came on. */
struct zs_hello {
	const char *job;
	const uint8_t *proof;   /* ZS_PROOF_LEN bytes */
	const uint8_t *nonce;   /* ZS_NONCE_LEN bytes */
	uint64_t incarnation, epoch;
	uint32_t rank;
	uint16_t flags;
	/* the trainer's reconnect count (the frame's offset; not in the
	 * proof: it only says which of its reconnects this is) */
	uint64_t reconnects;
	uint64_t session; /* the trainer process's (the frame's length; not in the proof) */
	/* the server's: the connection's bytes are encrypted (net/dtls.h),
	 * or do not leave the host (shm), or move by the one-sided path
	 * (rdma: the fabric keeps them) - what a job's data_tls asks */
	bool covered;
	/* in/out, where not NULL: set by the server when the proof is of the
	 * job's reader token (ctrl/token.h), or set before by the server
	 * when its encryption was keyed by it: the connection may only gather */
	bool *reader;
};

/* Fills a fresh nonce (getrandom); -1 when the kernel gives none. */
int zs_hello_nonce(uint8_t nonce[ZS_NONCE_LEN]);
/* The proof of h (its proof field aside) for token, into out; -1 when
 * OpenSSL fails (out of memory). */
int zs_hello_proof(const struct zs_hello *h, const char *token, uint8_t out[ZS_PROOF_LEN]);
/* Whether h's proof is the one token gives (in constant time). */
bool zs_hello_proves(const struct zs_hello *h, const char *token);

#endif
