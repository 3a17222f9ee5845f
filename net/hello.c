/*
 * hello.c - the HELLO's proof of the job's token (net/hello.h): HMAC-SHA256
 * (OpenSSL) over a domain label, the connection's nonce and the HELLO's
 * fields, little-endian.
 */
#include "net/hello.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "base/le.h"
#include "base/util.h"

#define LABEL "zshard data-plane hello v1"

int zs_hello_nonce(uint8_t nonce[ZS_NONCE_LEN])
{
	return zs_random_bytes(nonce, ZS_NONCE_LEN);
}

int zs_hello_proof(const struct zs_hello *h, const char *token, uint8_t out[ZS_PROOF_LEN])
{
	size_t jl = strlen(h->job), n = 0;
	uint8_t msg[sizeof LABEL + ZS_NONCE_LEN + 256 + 4 + 8 + 8 + 2];
	unsigned len = ZS_PROOF_LEN;

	if (jl > 255)
		jl = 255; /* names are shorter (ZS_JOB_NAME_MAX): a bound, not a cut */
	memcpy(msg, LABEL, sizeof LABEL); /* with its NUL */
	n += sizeof LABEL;
	memcpy(msg + n, h->nonce, ZS_NONCE_LEN);
	n += ZS_NONCE_LEN;
	memcpy(msg + n, h->job, jl);
	n += jl;
	msg[n++] = '\0';
	zs_put32(msg + n, h->rank);
	zs_put64(msg + n + 4, h->incarnation);
	zs_put64(msg + n + 12, h->epoch);
	zs_put16(msg + n + 20, h->flags);
	n += 22;
	return HMAC(EVP_sha256(), token, (int)strlen(token), msg, n, out, &len) &&
			       len == ZS_PROOF_LEN
		       ? 0
		       : -1;
}

bool zs_hello_proves(const struct zs_hello *h, const char *token)
{
	uint8_t want[ZS_PROOF_LEN];

	return !zs_hello_proof(h, token, want) && CRYPTO_memcmp(want, h->proof, ZS_PROOF_LEN) == 0;
}
