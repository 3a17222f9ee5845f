/*
 * catalog_common.c - the coordinator-only tests' fixture (test_catalog,
 * test_recovery): a real coordinator, its catalog in LMDB or in a real
 * etcd, and servers the test registers and reports for through real RPCs
 * (fake addresses: nothing is dialled).
 */
#include "tests/integration/catalog_common.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/harness.h"

struct cat_cluster C;

static bool leads(void *arg)
{
	struct zs_coord_status s;
	(void)arg;
	return zs_coord_status(C.c, &s, NULL) == ZS_OK;
}

/* Starts the coordinator on C.listen (its catalog in LMDB or etcd) and
 * waits until it serves; false after saying why. */
bool start_coord(void)
{
	char data[512], pf[512], log[512];
	struct zs_error err = {0};

	snprintf(data, sizeof data, "%s/coord", C.dir);
	snprintf(pf, sizeof pf, "%s/coord.addr", C.dir);
	snprintf(log, sizeof log, "%s/coordinator.log", C.dir);
	unlink(pf);
	/* the servers never heartbeat: an hour's lease keeps them up */
	char *lmdb[] = {(char *)h_bin("zshard-coordinator"), "--listen", C.listen,
			"--data-dir", data, "--port-file", pf, "--lease-ms", "3600000",
			"--trainer-lease-ms", "3000", "--trainer-gone-ms", "1500",
			"--log-level", "warn", NULL};
	char key[512];
	snprintf(key, sizeof key, "%s/etcd.key", C.dir);
	char *etcd[] = {(char *)h_bin("zshard-coordinator"), "--listen", C.listen,
			"--etcd", C.etcd_ep, "--etcd-lease-s", "2", "--port-file", pf,
			"--lease-ms", "3600000", "--trainer-lease-ms", "3000",
			"--trainer-gone-ms", "1500", "--log-level", "warn",
			C.secret_key ? "--secret-key" : NULL, key, NULL};
	if (C.secret_key && access(key, F_OK)) { /* 64 hex digits, 0600 */
		FILE *f = fopen(key, "w");
		if (!f || fputs("5eed0f5ea1ed5eed0f5ea1ed5eed0f5ea1ed5eed0f5ea1ed5eed0f5ea1ed0123\n",
				f) < 0 || fclose(f) || chmod(key, 0600)) {
			fprintf(stderr, "catalog: cannot write %s\n", key);
			return false;
		}
	}
	C.coord = h_spawn(C.etcd_ep[0] ? etcd : lmdb, log);
	if (C.coord <= 0 || !h_wait_file(pf, 30000, C.addr, sizeof C.addr)) {
		fprintf(stderr, "catalog: the coordinator did not start within 30 s (log: %s)\n", log);
		return false;
	}
	snprintf(C.listen, sizeof C.listen, "%s", C.addr);
	if (zs_coord_open(C.addr, 20000, 1, &C.c, &err)) {
		fprintf(stderr, "catalog: cannot reach the coordinator: %s\n", err.msg);
		return false;
	}
	/* on etcd it serves once it leads (a killed one's lease first ends) */
	if (!h_poll(leads, NULL, 30000)) {
		fprintf(stderr, "catalog: the coordinator did not lead within 30 s (log: %s)\n", log);
		return false;
	}
	return true;
}

int setup_with(uint32_t n_srv, bool etcd)
{
	struct zs_error err = {0};

	bool sk = C.secret_key;

	memset(&C, 0, sizeof C);
	C.secret_key = sk;
	C.dir = h_tmpdir("catalog");
	C.n_srv = n_srv;
	snprintf(C.listen, sizeof C.listen, "127.0.0.1:0");
	if (etcd) {
		C.etcd = h_start_etcd(C.dir, C.etcd_ep, sizeof C.etcd_ep);
		if (C.etcd <= 0) {
			printf("catalog on etcd: skipped: %s\n",
			       C.etcd ? "etcd did not start" : "no etcd (Debian's etcd-server)");
			C.etcd_ep[0] = '\0';
			return C.etcd ? -1 : 0;
		}
	}
	if (!start_coord())
		return -1;
	for (uint32_t i = 0; i < n_srv; i++) {
		struct zs_server_info me = {.capacity = 1ull << 40};
		uint32_t lease;
		/* fake addresses: nothing listens there, nothing is dialled */
		snprintf(me.addr, sizeof me.addr, "127.0.0.%u:%u", 2 + i / 250, 1000 + i);
		snprintf(me.data_addr, sizeof me.data_addr, "127.0.0.%u:%u", 2 + i / 250, 3000 + i);
		if (zs_coord_register(C.c, &me, &C.ids[i], &lease, &err)) {
			fprintf(stderr, "catalog: register %u: %s\n", i, err.msg);
			return -1;
		}
	}
	return 0;
}

int setup(void **st)
{
	(void)st;
	return setup_with(NSRV, false);
}

int setup_etcd(void **st)
{
	(void)st;
	return setup_with(16, true);
}

/* Kills the coordinator (SIGKILL: no clean stop) and starts it again on
 * the same catalog and address; between (LMDB only) runs in between. */
void restart_coord(void (*between)(const char *data))
{
	char data[512];

	zs_coord_close(C.c);
	C.c = NULL;
	assert_int_equal(h_stop(C.coord, SIGKILL, 20000), 128 + SIGKILL);
	snprintf(data, sizeof data, "%s/coord", C.dir);
	if (between && !C.etcd_ep[0])
		between(data);
	if (!start_coord())
		fail_msg("the coordinator did not come back");
	/* servers are down to a restarted coordinator until they heartbeat */
	for (uint32_t i = 0; i < C.n_srv; i++) {
		uint32_t lease;
		uint64_t gen, tgen;
		struct zs_error err = {0};
		if (zs_coord_heartbeat(C.c, C.ids[i], "", &lease, &gen, &tgen, &err))
			fail_msg("heartbeat of server %llu: %s", (unsigned long long)C.ids[i],
				 err.msg);
	}
}

int teardown(void **st)
{
	(void)st;
	if (C.c)
		zs_coord_close(C.c);
	if (C.coord > 0)
		h_stop(C.coord, SIGTERM, 20000);
	if (C.etcd > 0)
		h_stop(C.etcd, SIGTERM, 20000);
	h_rmtree(C.dir);
	free(C.dir);
	return 0;
}

/* A job of `units` small units: each goes to 8 servers, the first of
 * them rotated by one a unit, so 993 units or more cover all 1,000. */
void create_wide_job(const char *name, unsigned units, struct zs_job *j)
{
	size_t cap = 256 + units * 96;
	char *json = malloc(cap);
	size_t at;
	struct zs_error err = {0};

	assert_non_null(json);
	at = (size_t)snprintf(json, cap,
			      "{\"name\": \"%s\", \"stage\": 3, \"world_size\": 1,\n"
			      " \"optimizer\": {\"kind\": \"sgd\", \"lr\": 0.1},\n \"units\": [",
			      name);
	for (unsigned u = 0; u < units; u++)
		at += (size_t)snprintf(json + at, cap - at,
				       "%s{\"name\": \"u%u\", \"tensors\": [{\"name\": \"w\", \"shape\": [4096]}]}",
				       u ? ", " : "", u);
	snprintf(json + at, cap - at, "]}\n");
	if (zs_coord_create_job_json(C.c, json, j, &err))
		fail_msg("create %s: %s", name, err.msg);
	free(json);
}

/* The distinct servers of j's placement, in placement order. */
uint32_t servers_of(const struct zs_job *j, uint64_t *out)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < j->placement.n_shards; i++) {
		uint64_t id = j->placement.shards[i].server_id;
		bool seen = false;
		for (uint32_t k = 0; k < n && !seen; k++)
			seen = out[k] == id;
		if (!seen)
			out[n++] = id;
	}
	return n;
}

void report(const char *job, enum zs_task_kind kind, uint64_t id, uint64_t step,
		   uint64_t sid, bool ok, enum zs_status want)
{
	struct zs_task t = {.kind = kind, .id = id, .step = step};
	struct zs_error err = {0};

	snprintf(t.job, sizeof t.job, "%s", job);
	enum zs_status st = zs_coord_task_done(C.c, sid, &t, ok, ok ? NULL : "disk on fire",
					       1000, &err);
	if (st != want)
		fail_msg("task %d of checkpoint %llu from server %llu: %s (%s), wanted %s", kind,
			 (unsigned long long)id, (unsigned long long)sid, zs_strerror(st), err.msg,
			 zs_strerror(want));
}

enum zs_ckpt_state ckpt_state(const char *job, uint64_t id, uint32_t *n_durable)
{
	struct zs_checkpoint k;
	enum zs_ckpt_state s;

	assert_int_equal(zs_coord_get_ckpt(C.c, job, id, &k, NULL), ZS_OK);
	s = k.state;
	if (n_durable)
		*n_durable = k.n_durable;
	zs_checkpoint_release(&k);
	return s;
}

/* Whether server sid is handed a task of kind for checkpoint id. */
bool has_task(uint64_t sid, enum zs_task_kind kind, uint64_t id)
{
	struct zs_task *v;
	uint32_t n;
	bool has = false;

	assert_int_equal(zs_coord_server_tasks(C.c, sid, &v, &n, NULL), ZS_OK);
	for (uint32_t i = 0; i < n; i++)
		has |= v[i].kind == kind && v[i].id == id;
	free(v);
	return has;
}

/* Takes a checkpoint of job j at step and has every server of it report
 * it durable; returns its id. */
uint64_t commit_ckpt(const struct zs_job *j, uint64_t step)
{
	struct zs_checkpoint k;
	uint64_t id;

	assert_int_equal(zs_coord_create_ckpt(C.c, j->spec.name, step, &k, NULL), ZS_OK);
	id = k.id;
	assert_int_equal(k.incarnation, j->incarnation);
	zs_checkpoint_release(&k);
	for (uint32_t i = 0; i < j->placement.n_shards; i++)
		report(j->spec.name, ZS_TASK_SNAPSHOT, id, step, j->placement.shards[i].server_id,
		       true, ZS_OK);
	assert_int_equal(ckpt_state(j->spec.name, id, NULL), ZS_CKPT_COMMITTED);
	return id;
}

/* The checkpoints listed for name (all: --all) into ids; their count. */
uint32_t listed(const char *name, bool all, uint64_t *ids, uint64_t *incs)
{
	struct zs_checkpoint *v;
	uint32_t n;
	struct zs_error err = {0};

	if (zs_coord_list_ckpts_ex(C.c, name, all, &v, &n, &err))
		fail_msg("list %s: %s", name, err.msg);
	for (uint32_t i = 0; i < n; i++) {
		ids[i] = v[i].id;
		if (incs)
			incs[i] = v[i].incarnation;
		zs_checkpoint_release(&v[i]);
	}
	free(v);
	return n;
}

/* Restores id into job name and has every server carry it out. */
void restore_all(const char *name, uint64_t id)
{
	struct zs_job r;
	struct zs_checkpoint k;
	struct zs_error err = {0};

	if (zs_coord_restore(C.c, name, id, &r, &err))
		fail_msg("restore %s %llu: %s", name, (unsigned long long)id, err.msg);
	assert_int_equal(r.restore_pending, id);
	assert_int_equal(zs_coord_get_ckpt(C.c, name, id, &k, NULL), ZS_OK);
	for (uint32_t i = 0; i < r.placement.n_shards; i++)
		report(name, ZS_TASK_RESTORE, id, k.step, r.placement.shards[i].server_id, true,
		       ZS_OK);
	zs_checkpoint_release(&k);
	zs_job_release(&r);
	assert_int_equal(zs_coord_get_job(C.c, name, &r, NULL), ZS_OK);
	assert_int_equal(r.restore_pending, 0);
	assert_int_equal(r.restored_id, id);
	zs_job_release(&r);
}

