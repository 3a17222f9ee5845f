/*
 * tls.c - mutual TLS for the control plane (see ctrl/tls.h): the PEM files
 * read once, then gRPC's SSL credentials made from them for each server
 * and channel.
 */
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env.h"
#include "base/log.h"
#include "ctrl/tls.h"

#define PEM_MAX (1u << 20)

static struct {
	pthread_mutex_t mu;
	bool set; /* configured (possibly off) by flags or the environment */
	char *ca, *cert, *key;
} tls = {PTHREAD_MUTEX_INITIALIZER, false, NULL, NULL, NULL};

/* The whole file, NUL-terminated, if it holds a PEM block of kind (the
 * word before the dashes' end, e.g. "CERTIFICATE", "PRIVATE KEY"). */
static char *read_pem(const char *path, const char *kind, const char *flag, struct zs_error *err)
{
	char *buf = NULL, begin[64];
	size_t n = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		zs_fail(err, ZS_EINVAL, "%s %s: cannot read it", flag, path);
		return NULL;
	}
	buf = malloc(PEM_MAX + 1);
	if (buf)
		n = fread(buf, 1, PEM_MAX + 1, f);
	fclose(f);
	if (!buf) {
		zs_fail(err, ZS_ENOMEM, "out of memory");
		return NULL;
	}
	if (n > PEM_MAX) {
		free(buf);
		zs_fail(err, ZS_EINVAL, "%s %s: larger than %u bytes", flag, path, PEM_MAX);
		return NULL;
	}
	buf[n] = '\0';
	snprintf(begin, sizeof begin, "%s-----", kind);
	if (!strstr(buf, "-----BEGIN ") || !strstr(buf, begin)) {
		free(buf);
		zs_fail(err, ZS_EINVAL, "%s %s: no PEM %s in it", flag, path, kind);
		return NULL;
	}
	return buf;
}

static void wipe(char *s)
{
	if (s) {
		memset(s, 0, strlen(s)); /* key material does not linger in freed memory */
		free(s);
	}
}

enum zs_status zs_tls_configure(const char *ca_file, const char *cert_file, const char *key_file,
				struct zs_error *err)
{
	char *ca = NULL, *cert = NULL, *key = NULL;
	int given = !!ca_file + !!cert_file + !!key_file;

	if (given && given != 3)
		return zs_fail(err, ZS_EINVAL,
			       "TLS needs all of --tls-ca, --tls-cert and --tls-key (mutual TLS: each side presents a certificate)");
	if (given && (!(ca = read_pem(ca_file, "CERTIFICATE", "--tls-ca", err)) ||
		      !(cert = read_pem(cert_file, "CERTIFICATE", "--tls-cert", err)) ||
		      !(key = read_pem(key_file, "PRIVATE KEY", "--tls-key", err)))) {
		wipe(ca);
		wipe(cert);
		wipe(key);
		return err ? err->code : ZS_EINVAL;
	}
	pthread_mutex_lock(&tls.mu);
	wipe(tls.ca);
	wipe(tls.cert);
	wipe(tls.key);
	tls.ca = ca;
	tls.cert = cert;
	tls.key = key;
	tls.set = true;
	pthread_mutex_unlock(&tls.mu);
	return ZS_OK;
}

enum zs_status zs_tls_from_env(struct zs_error *err)
{
	bool set;

	pthread_mutex_lock(&tls.mu);
	set = tls.set;
	pthread_mutex_unlock(&tls.mu);
	if (set)
		return ZS_OK;
	return zs_tls_configure(zs_env("ZSHARD_TLS_CA"), zs_env("ZSHARD_TLS_CERT"),
				zs_env("ZSHARD_TLS_KEY"), err);
}

enum zs_status zs_tls_setup(const char *ca_file, const char *cert_file, const char *key_file,
			    struct zs_error *err)
{
	if (ca_file || cert_file || key_file)
		return zs_tls_configure(ca_file, cert_file, key_file, err);
	return zs_tls_from_env(err);
}

void zs_tls_use(void (*fn)(const char *ca, const char *cert, const char *key, void *arg),
		void *arg)
{
	pthread_mutex_lock(&tls.mu);
	fn(tls.ca, tls.cert, tls.key, arg);
	pthread_mutex_unlock(&tls.mu);
}

enum zs_status zs_tls_identity(char **ca, char **cert, char **key, struct zs_error *err)
{
	bool short_of = false;

	pthread_mutex_lock(&tls.mu);
	*ca = tls.ca ? strdup(tls.ca) : NULL;
	*cert = tls.cert ? strdup(tls.cert) : NULL;
	*key = tls.key ? strdup(tls.key) : NULL;
	short_of = (tls.ca && !*ca) || (tls.cert && !*cert) || (tls.key && !*key);
	pthread_mutex_unlock(&tls.mu);
	if (!short_of)
		return ZS_OK;
	zs_tls_identity_free(*ca, *cert, *key);
	*ca = *cert = *key = NULL;
	return zs_fail(err, ZS_ENOMEM, "out of memory");
}

void zs_tls_identity_free(char *ca, char *cert, char *key)
{
	free(ca);
	free(cert);
	wipe(key);
}

bool zs_tls_on(void)
{
	bool on;
	pthread_mutex_lock(&tls.mu);
	on = tls.ca != NULL;
	pthread_mutex_unlock(&tls.mu);
	return on;
}

grpc_server_credentials *zs_tls_server_creds(void)
{
	grpc_server_credentials *cr;

	pthread_mutex_lock(&tls.mu);
	if (tls.ca) {
		grpc_ssl_pem_key_cert_pair pair = {tls.key, tls.cert};
		cr = grpc_ssl_server_credentials_create_ex(
			tls.ca, &pair, 1, GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
	} else {
		cr = grpc_insecure_server_credentials_create();
	}
	pthread_mutex_unlock(&tls.mu);
	return cr;
}

grpc_channel_credentials *zs_tls_channel_creds(void)
{
	grpc_channel_credentials *cr;

	pthread_mutex_lock(&tls.mu);
	if (tls.ca) {
		grpc_ssl_pem_key_cert_pair pair = {tls.key, tls.cert};
		cr = grpc_ssl_credentials_create(tls.ca, &pair, NULL, NULL);
	} else {
		cr = grpc_insecure_credentials_create();
	}
	pthread_mutex_unlock(&tls.mu);
	return cr;
}
