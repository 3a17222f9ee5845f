/*
 * catalog_common.h - the fixture of the coordinator-only tests
 * (catalog_common.c): one coordinator (LMDB or etcd) and registered
 * servers that never heartbeat (an hour's lease keeps them up).
 */
#ifndef ZS_TESTS_CATALOG_COMMON_H
#define ZS_TESTS_CATALOG_COMMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ctrl/coord_client.h"

#define NSRV 1000

struct cat_cluster {
	char *dir;
	pid_t coord, etcd;
	char etcd_ep[64]; /* "": the catalog in LMDB under dir/coord */
	char addr[64];
	char listen[64]; /* what the coordinator is started with */
	struct zs_coord_client *c;
	uint64_t ids[NSRV];
	uint32_t n_srv;
	/* on etcd: the coordinator seals the job tokens with a key of the
	 * fixture's (dir/etcd.key, --secret-key); set before setup_with */
	bool secret_key;
};
extern struct cat_cluster C;

/* The etcd group's tests skip, saying why, where etcd is not installed. */
#define NEED_COORD()                                                      \
	do {                                                              \
		if (!C.coord) {                                           \
			printf("skipped: no etcd (Debian's etcd-server)\n"); \
			skip();                                           \
		}                                                         \
	} while (0)

/* The groups' setups: NSRV servers on LMDB; 16 on etcd (skipped, saying
 * so, without etcd); the teardown of either. */
int setup(void **st);
/* n_srv servers, the catalog on etcd or LMDB (C.secret_key kept). */
int setup_with(uint32_t n_srv, bool etcd);
int setup_etcd(void **st);
int teardown(void **st);
/* Starts the coordinator on C.listen; false after saying why. */
bool start_coord(void);
/* Kills the coordinator (SIGKILL) and starts it again on its catalog and
 * address (between, LMDB only, runs in between); the servers heartbeat. */
void restart_coord(void (*between)(const char *data));
/* A job of units small units: each goes to 8 servers, the first of them
 * rotated by one a unit (993 units or more cover all 1,000). */
void create_wide_job(const char *name, unsigned units, struct zs_job *j);
/* The distinct servers of j's placement, in placement order. */
uint32_t servers_of(const struct zs_job *j, uint64_t *out);
/* Server sid reports task kind of checkpoint id done (ok) or failed
 * ("disk on fire"); the call must return want. */
void report(const char *job, enum zs_task_kind kind, uint64_t id, uint64_t step, uint64_t sid,
	    bool ok, enum zs_status want);
enum zs_ckpt_state ckpt_state(const char *job, uint64_t id, uint32_t *n_durable);
/* Whether server sid is handed a task of kind for checkpoint id. */
bool has_task(uint64_t sid, enum zs_task_kind kind, uint64_t id);
/* A checkpoint of j at step that every server of it reports durable. */
uint64_t commit_ckpt(const struct zs_job *j, uint64_t step);
/* The checkpoints listed for name (all: --all): ids, incarnations; count. */
uint32_t listed(const char *name, bool all, uint64_t *ids, uint64_t *incs);
/* Restores id into job name; every server carries it out. */
void restore_all(const char *name, uint64_t id);

#endif
