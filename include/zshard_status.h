/*
 * zshard_status.h - zshard's one error space, part of the public API
 * (zshard.h includes it).
 *
 * Every zshard function that can fail returns an enum zs_status (as an
 * int in zshard.h, for bindings); ZS_OK is 0. errno, LMDB, gRPC and verbs
 * codes are mapped into it where they arise, so a caller never sees a
 * foreign code. The values are stable: a binding may copy them.
 */
#ifndef ZSHARD_STATUS_H
#define ZSHARD_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

enum zs_status {
	ZS_OK = 0,
	ZS_EINVAL,    /* 1: bad argument or malformed request; nothing changed */
	ZS_ENOTFOUND, /* 2: the named job, server, unit or rank does not exist */
	ZS_EEXIST,    /* 3: already there (a rank joined twice, a job name taken) */
	ZS_ENOSPC,    /* 4: capacity exhausted (server memory, disk, map size) */
	ZS_EUNAVAIL,  /* 5: peer unreachable or shutting down; may succeed later */
	ZS_ETIMEDOUT, /* 6: a bounded wait ran out */
	ZS_EIO,       /* 7: storage failed */
	ZS_ENOMEM,    /* 8: out of memory */
	ZS_EPROTO,    /* 9: a peer sent something that does not decode */
	ZS_ESTATE,    /* 10: valid request, wrong moment (failed precondition) */
	ZS_ECANCELED, /* 11: the operation was dropped (its handle closed) */
	ZS_EAGAIN,    /* 12: not done yet, or no resources right now: retry */
	ZS_EINTERNAL, /* 13: a bug: please report */
	ZS_ERESUME,   /* 14: the job was rolled back (a process of it was lost):
		       * zs_trainer_resume() gives the step to resume at */
	ZS_EPERM,     /* 15: the caller's role (its certificate's) may not do it */
	ZS_STATUS_COUNT
};

#pragma GCC visibility push(default)

/*
 * The short constant name of a status, e.g. "not found"; an unknown value
 * gives "unknown status". Never NULL; the string is static (never freed).
 */
const char *zs_strerror(int status);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif

#endif
