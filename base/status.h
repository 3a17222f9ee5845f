/*
 * status.h - zshard's one error space.
 *
 * Every function that can fail returns enum zs_status; ZS_OK is 0. errno,
 * LMDB, gRPC and verbs codes are mapped into it where they arise, so callers
 * never see a foreign code. A struct zs_error carries the code and one line of
 * text for a human; functions that take one fill it on failure and leave it
 * alone on success. Nothing here allocates, exits or aborts.
 */
#ifndef ZS_STATUS_H
#define ZS_STATUS_H

#include <stddef.h>

#include "include/zshard_status.h" /* enum zs_status, zs_strerror */

#define ZS_ERRMSG_MAX 512

struct zs_error {
	enum zs_status code;
	char msg[ZS_ERRMSG_MAX];
};

/*
 * Records code and a printf-formatted message in err (which may be NULL)
 * and returns code, so that `return zs_fail(err, ZS_EINVAL, "...")` reads
 * as one statement.
 */
enum zs_status zs_fail(struct zs_error *err, enum zs_status code,
		       const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefixes err->msg with "prefix: ", keeping the code. */
void zs_error_prefix(struct zs_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Maps an errno value to a status. */
enum zs_status zs_status_from_errno(int e);

#endif
