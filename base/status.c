/* status.c - the error helpers (zs_strerror, public, is in strerror.c). */
#include "base/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum zs_status zs_fail(struct zs_error *err, enum zs_status code,
		       const char *fmt, ...)
{
	if (err) {
		/* formatted aside first: a message may quote err->msg itself */
		char msg[sizeof err->msg];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		err->code = code;
		memcpy(err->msg, msg, sizeof msg);
	}
	return code;
}

void zs_error_prefix(struct zs_error *err, const char *fmt, ...)
{
	char pre[ZS_ERRMSG_MAX], old[ZS_ERRMSG_MAX];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof pre, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	/* a message too long for the buffer is cut, never overrun */
	if (snprintf(err->msg, sizeof err->msg, "%s: %s", pre, old) < 0)
		err->msg[0] = '\0';
}

enum zs_status zs_status_from_errno(int e)
{
	switch (e) {
	case 0:
		return ZS_OK;
	case EINVAL:
	case ERANGE:
		return ZS_EINVAL;
	case ENOENT:
		return ZS_ENOTFOUND;
	case EEXIST:
		return ZS_EEXIST;
	case ENOSPC:
	case EDQUOT:
		return ZS_ENOSPC;
	case ENOMEM:
		return ZS_ENOMEM;
	case ETIMEDOUT:
		return ZS_ETIMEDOUT;
	case EAGAIN:
		return ZS_EAGAIN;
	case ECONNREFUSED:
	case ECONNRESET:
	case EPIPE:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return ZS_EUNAVAIL;
	case ECANCELED:
		return ZS_ECANCELED;
	default:
		return ZS_EIO;
	}
}
