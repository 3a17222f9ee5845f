/*
 * strerror.c - the names of zshard's status codes: the one public function
 * of base/, in a file of its own so that a program linking both libzshard
 * and the internal library gets it once.
 */
#include "base/status.h"

static const char *const names[ZS_STATUS_COUNT] = {
	[ZS_OK] = "ok",
	[ZS_EINVAL] = "invalid argument",
	[ZS_ENOTFOUND] = "not found",
	[ZS_EEXIST] = "already exists",
	[ZS_ENOSPC] = "no space",
	[ZS_EUNAVAIL] = "unavailable",
	[ZS_ETIMEDOUT] = "timed out",
	[ZS_EIO] = "I/O error",
	[ZS_ENOMEM] = "out of memory",
	[ZS_EPROTO] = "protocol error",
	[ZS_ESTATE] = "failed precondition",
	[ZS_ECANCELED] = "canceled",
	[ZS_EAGAIN] = "try again",
	[ZS_EINTERNAL] = "internal error",
	[ZS_ERESUME] = "rolled back: resume",
	[ZS_EPERM] = "permission denied",
};

const char *zs_strerror(int s)
{
	if ((unsigned)s >= ZS_STATUS_COUNT)
		return "unknown status";
	return names[s];
}
