/*
 * coord.h - the coordinator: server membership with leases, jobs and their
 * placements, trainer joins, the stage. Its whole state is in LMDB under its
 * data dir; every change is committed (synchronously) before it is answered,
 * so a SIGKILL loses nothing that a client saw succeed.
 *
 * Liveness is not persisted: after a restart every known server is down
 * until its next heartbeat.
 */
#ifndef ZS_COORD_H
#define ZS_COORD_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

struct coord;

struct coord_config {
	const char *listen;   /* HOST:PORT, port 0 for a free one */
	const char *data_dir; /* LMDB environment */
	uint32_t lease_ms;    /* a server silent this long is marked down */
	uint32_t trainer_lease_ms; /* a trainer silent this long loses its rank
				    * and its job rolls back (0: 10 s) */
	/* a trainer whose data connections to a server all ended and that
	 * has not renewed its lease for this long is gone at once (0: 3 s) */
	uint32_t trainer_gone_ms;
	uint32_t norm_timeout_ms; /* bound on collecting a step's gradient
				   * norms from every server (0: 60 s) */
	const char *metrics;  /* HOST:PORT to serve Prometheus metrics at, or NULL */
	const char *advertise; /* HOST[:PORT] Status reports (NAT, pods); NULL: bound */
	/* etcd endpoints "HOST:PORT,...": the catalog lives there and several
	 * coordinators share it, one leading (then data_dir may be NULL) */
	const char *etcd;
	const char *etcd_prefix; /* the keys' prefix (NULL: /zshard) */
	uint32_t etcd_lease_s;   /* the leader's lease (0: 5 s) */
	/* with TLS: a client certificate must name a role (coord/roles.c);
	 * else one that names none is an admin's */
	bool tls_roles_required;
	/* the file of the key that seals the catalog's job tokens; NULL: the
	 * data dir's secret.key (made at first start), or, with etcd, none
	 * (the tokens stay unsealed there, said at start) */
	const char *secret_key;
	/* every job's tcp data plane encrypted (a job spec's data_tls, for
	 * all of them) */
	bool data_tls;
	/* the metrics endpoint answers only clients with a certificate of the
	 * CA (mTLS on) */
	bool metrics_certified;
};

/*
 * Opens the catalog, starts the RPC server and the lease reaper. bound gets
 * the address actually listened on. Errors: ZS_EINVAL, ZS_EIO (catalog),
 * ZS_EUNAVAIL (cannot listen), ZS_ESTATE (data dir used by another process).
 */
enum zs_status coord_start(const struct coord_config *cfg, struct coord **out,
			   char *bound, size_t bound_len, struct zs_error *err);

/* Stops serving, closes the catalog, frees. Blocks until threads exit. */
void coord_free(struct coord *c);

/* With etcd: this coordinator lost the lead (its daemon exits, to start
 * again as a standby); always 0 without. */
int coord_lost(struct coord *c);

#endif
