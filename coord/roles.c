/*
 * roles.c - who may call what: the role a client's certificate names
 * (ctrl/rpc.h's zs_rpc_call_role: a subjectAltName URI "zshard:role:NAME",
 * else the subject's OU), checked before every call (coord_gate).
 *
 *   admin     everything
 *   operator  reads; stop a job; take a checkpoint; evict a rank
 *   trainer   create its job (rank 0 does, from its model), join, leave,
 *             renew, report steps and norms, checkpoints and their blobs,
 *             the communicator id; reads
 *   reader    reads (a job with its data-plane token: zshardctl export);
 *             a weight reader's registration (Reader)
 *   server    a shard server's calls: register, heartbeat, assignments,
 *             tasks, norms, dropped ranks; reads
 *
 * Without TLS nobody has an identity: every call is taken, as before. With
 * TLS, a certificate that names no role is an admin's unless the
 * coordinator runs with --tls-roles required; one that names a role
 * outside the list is refused. Refusals (ZS_EPERM) name the role and the
 * call.
 */
#include "coord/lookup.h"

#include "base/log.h"
#include "ctrl/methods.h"

enum { R_ADMIN = 1, R_OPERATOR = 2, R_TRAINER = 4, R_READER = 8, R_SERVER = 16 };
#define READS (R_OPERATOR | R_TRAINER | R_READER | R_SERVER)

static const struct {
	const char *path;
	unsigned roles; /* besides admin */
} calls[] = {
	{ZS_M_GET_JOB, READS},
	{ZS_M_JOBS, READS},
	{ZS_M_SERVERS, READS},
	{ZS_M_COORD_STATUS, READS},
	{ZS_M_GET_CKPT, READS},
	{ZS_M_LIST_CKPTS, READS},
	{ZS_M_STEP_REPORTS, READS},
	{ZS_M_STOP_JOB, R_OPERATOR},
	{ZS_M_CREATE_CKPT, R_OPERATOR | R_TRAINER},
	{ZS_M_CREATE_JOB, R_TRAINER},
	{ZS_M_CREATE_JOB_JSON, R_TRAINER},
	{ZS_M_JOIN, R_TRAINER},
	{ZS_M_LEAVE, R_TRAINER | R_OPERATOR}, /* evicting: coord_h_leave's */
	{ZS_M_TRAINER_HB, R_TRAINER},
	{ZS_M_REPORT_STEP, R_TRAINER},
	{ZS_M_PUT_BLOB, R_TRAINER},
	{ZS_M_COMM_ID, R_TRAINER},
	{ZS_M_READER, R_READER}, /* a weight reader's own credential */
	{ZS_M_READERS, READS},
	{ZS_M_REPORT_NORM, R_TRAINER | R_SERVER},
	{ZS_M_REGISTER, R_SERVER},
	{ZS_M_HEARTBEAT, R_SERVER},
	{ZS_M_ASSIGNMENTS, R_SERVER},
	{ZS_M_SERVER_TASKS, R_SERVER},
	{ZS_M_TASK_DONE, R_SERVER},
	{ZS_M_DROPPED_RANKS, R_SERVER},
	/* admin alone: delete, set the stage, rebalance, restore, resize,
	 * delete a checkpoint */
};

static const char *const names[] = {"admin", "operator", "trainer", "reader", "server"};

static unsigned role_bit(const char *role)
{
	for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
		if (!strcmp(role, names[i]))
			return 1u << i;
	return 0;
}

bool coord_role_gathers_only(struct zs_rpc_call *call)
{
	char r[64];

	return zs_rpc_call_role(call, r, sizeof r) > 0 &&
	       (!strcmp(r, "reader") || !strcmp(r, "operator"));
}

bool coord_role_ok(struct coord *c, struct zs_rpc_call *call)
{
	const char *path = zs_rpc_call_method(call);
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	unsigned bit, allowed = R_ADMIN;
	char role[64];
	int r = zs_rpc_call_role(call, role, sizeof role);

	if (r < 0) /* no TLS: no identity */
		return true;
	if (r == 0) {
		if (!c->cfg.tls_roles_required)
			return true; /* a certificate from before roles: an admin's */
		zs_rpc_fail(call, ZS_EPERM,
			    "%s: the client's certificate names no role (a subjectAltName URI zshard:role:NAME or an OU of admin, operator, trainer, reader or server), and this coordinator requires one (--tls-roles required)",
			    name);
		return false;
	}
	if (!(bit = role_bit(role))) {
		zs_rpc_fail(call, ZS_EPERM,
			    "%s: the client's certificate names role '%s', which is none of admin, operator, trainer, reader, server",
			    name, role);
		return false;
	}
	for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
		if (!strcmp(calls[i].path, path))
			allowed |= calls[i].roles;
	if (bit & allowed)
		return true;
	{
		char who[80] = "";
		size_t n = 0;
		for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++)
			if (allowed & (1u << i))
				n += (size_t)snprintf(who + n, sizeof who - n, "%s%s", n ? ", " : "",
						      names[i]);
		zs_rpc_fail(call, ZS_EPERM,
			    "role '%s' may not call %s (its certificate's role; these may: %s)", role,
			    name, who);
	}
	return false;
}
