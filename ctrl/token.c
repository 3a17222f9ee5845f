/*
 * token.c - a job's reader token (see ctrl/token.h).
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "ctrl/token.h"

#define READER_LABEL "zshard: the reader token of a job, v1"

void zs_reader_token(const char *token, char out[ZS_TOKEN_MAX])
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned len = 0;

	out[0] = '\0';
	if (!token[0] || !HMAC(EVP_sha256(), token, (int)strlen(token),
			       (const unsigned char *)READER_LABEL, strlen(READER_LABEL), mac, &len) ||
	    len < 16)
		return;
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	OPENSSL_cleanse(mac, sizeof mac);
}
