/*
 * test_catalog.c - the coordinator's catalog at its edges, against a real
 * coordinator whose servers the test registers and reports for through
 * real RPCs (as bench_coord_scale does): a checkpoint of a job over 1,000
 * servers commits exactly when the last of them is durable, and restores;
 * one whose last server never reports stays pending; what a checkpoint
 * was taken on and its blobs survive a restart; a job created again under
 * its name never sees the earlier one's checkpoints but by id; a port in
 * use is refused. The catalog's tests run on LMDB and on etcd.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctrl/codec.h"
#include "model/spec_json.h"
#include "storage/kv.h"
#include "tests/harness.h"
#include "tests/integration/catalog_common.h"

/* A job over all NSRV servers (*j, its servers into srv) with a pending
 * checkpoint of step; returns the checkpoint's id. */
static uint64_t wide_pending(const char *name, uint64_t step, struct zs_job *j, uint64_t *srv)
{
	struct zs_checkpoint k;
	uint64_t id;

	create_wide_job(name, 1000, j);
	assert_int_equal(servers_of(j, srv), NSRV);
	assert_int_equal(zs_coord_create_ckpt(C.c, name, step, &k, NULL), ZS_OK);
	id = k.id;
	zs_checkpoint_release(&k);
	return id;
}

/*
 * 1,000 servers durable one by one, in an order that is not the
 * registration's: pending through the 999th (whichever 999), committed at
 * the last; a report again changes nothing; then a restore, carried out
 * by every server, done only once the last one says so.
 */
static void test_checkpoint_over_1000_servers(void **st)
{
	static uint64_t srv[NSRV];
	struct zs_job j, r;
	uint32_t nd;
	uint64_t id;

	(void)st;
	id = wide_pending("wide", 7, &j, srv);
	assert_true(has_task(srv[NSRV - 1], ZS_TASK_SNAPSHOT, id));
	/* odd ones first, then even ones, the server at 500 last */
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = (uint32_t)pass ^ 1; i < NSRV; i += 2)
			if (i != 500)
				report("wide", ZS_TASK_SNAPSHOT, id, 7, srv[i], true, ZS_OK);
	assert_int_equal(ckpt_state("wide", id, &nd), ZS_CKPT_PENDING);
	assert_int_equal(nd, NSRV - 1);
	/* a report again counts once; a server of no shard does not count */
	report("wide", ZS_TASK_SNAPSHOT, id, 7, srv[257], true, ZS_OK);
	report("wide", ZS_TASK_SNAPSHOT, id, 7, 987654321, true, ZS_ESTATE);
	assert_int_equal(ckpt_state("wide", id, &nd), ZS_CKPT_PENDING);
	assert_int_equal(nd, NSRV - 1);
	assert_false(has_task(srv[257], ZS_TASK_SNAPSHOT, id));
	assert_true(has_task(srv[500], ZS_TASK_SNAPSHOT, id));
	report("wide", ZS_TASK_SNAPSHOT, id, 7, srv[500], true, ZS_OK);
	assert_int_equal(ckpt_state("wide", id, &nd), ZS_CKPT_COMMITTED);
	assert_int_equal(nd, NSRV);

	/* the restore: a task on every server, done at the last report */
	assert_int_equal(zs_coord_restore(C.c, "wide", id, &r, NULL), ZS_OK);
	zs_job_release(&r);
	for (uint32_t i = 0; i < NSRV - 1; i++)
		report("wide", ZS_TASK_RESTORE, id, 7, srv[i], true, ZS_OK);
	assert_int_equal(zs_coord_get_job(C.c, "wide", &r, NULL), ZS_OK);
	assert_int_equal(r.restore_pending, id);
	zs_job_release(&r);
	assert_true(has_task(srv[NSRV - 1], ZS_TASK_RESTORE, id));
	report("wide", ZS_TASK_RESTORE, id, 7, srv[NSRV - 1], true, ZS_OK);
	assert_int_equal(zs_coord_get_job(C.c, "wide", &r, NULL), ZS_OK);
	assert_int_equal(r.restore_pending, 0);
	assert_int_equal(r.restored_id, id);
	assert_int_equal(r.restored_step, 7);
	assert_string_equal(r.restore_error, "");
	zs_job_release(&r);
	zs_job_release(&j);
	assert_int_equal(zs_coord_delete_job(C.c, "wide", &r, NULL), ZS_OK);
	zs_job_release(&r);
}

/*
 * The last server's report never comes: the checkpoint stays pending
 * however many of the others report, and a restore of it is refused;
 * a failure reported by that server fails it, naming the server.
 */
static void test_last_report_missing(void **st)
{
	static uint64_t srv[NSRV];
	struct zs_job j, r;
	struct zs_checkpoint k;
	struct zs_error err = {0};
	uint32_t nd;
	uint64_t id;

	(void)st;
	id = wide_pending("gap", 3, &j, srv);
	for (uint32_t i = 0; i + 1 < NSRV; i++)
		report("gap", ZS_TASK_SNAPSHOT, id, 3, srv[i], true, ZS_OK);
	for (uint32_t i = 0; i < 3; i++) /* some again */
		report("gap", ZS_TASK_SNAPSHOT, id, 3, srv[i], true, ZS_OK);
	assert_int_equal(ckpt_state("gap", id, &nd), ZS_CKPT_PENDING);
	assert_int_equal(nd, NSRV - 1);
	assert_int_equal(zs_coord_restore(C.c, "gap", id, &r, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "not committed"));
	/* what is left to do is on the last server alone */
	assert_true(has_task(srv[NSRV - 1], ZS_TASK_SNAPSHOT, id));
	assert_false(has_task(srv[0], ZS_TASK_SNAPSHOT, id));
	report("gap", ZS_TASK_SNAPSHOT, id, 3, srv[NSRV - 1], false, ZS_OK);
	assert_int_equal(zs_coord_get_ckpt(C.c, "gap", id, &k, NULL), ZS_OK);
	assert_int_equal(k.state, ZS_CKPT_FAILED);
	assert_non_null(strstr(k.error, "disk on fire"));
	zs_checkpoint_release(&k);
	zs_job_release(&j);
	assert_int_equal(zs_coord_delete_job(C.c, "gap", &r, NULL), ZS_OK);
	zs_job_release(&r);
}

/* A checkpoint's record as zshard wrote it before its placement and
 * blobs had records of their own: all in one, under ckpts. */
static uint64_t legacy_id;
static struct zs_placement legacy_pl;
static int64_t legacy_created_ms;

static const char *const tables[] = {"meta",    "servers", "jobs",  "ckpts",
				     "members", "ckplace", "ckblobs"};

static size_t legacy_key(uint8_t *key)
{
	size_t kl = 4;
	memcpy(key, "old", 4);
	for (int i = 0; i < 8; i++)
		key[kl++] = (uint8_t)(legacy_id >> (56 - 8 * i));
	return kl;
}

/* The old record was moved out: its placement and blobs have their own. */
static void check_moved_out(const char *data)
{
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	uint8_t key[64];
	size_t kl = legacy_key(key), vl;
	const void *v;
	struct zs_checkpoint k;

	assert_int_equal(zs_kv_open(data, 0, tables, 7, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, false, &t, NULL), ZS_OK);
	assert_int_equal(zs_kv_get(t, 5, key, kl, &v, &vl, NULL), ZS_OK);
	assert_int_equal(zs_kv_get(t, 3, key, kl, &v, &vl, NULL), ZS_OK);
	assert_int_equal(zs_dec_checkpoint(v, vl, &k, NULL), ZS_OK);
	assert_int_equal(k.placement.n_shards, 0);
	assert_int_equal(k.n_blobs, 0);
	zs_checkpoint_release(&k);
	key[kl++] = 0, key[kl++] = 0, key[kl++] = 0, key[kl++] = 1;
	assert_int_equal(zs_kv_get(t, 6, key, kl, &v, &vl, NULL), ZS_OK);
	assert_int_equal(vl, 3);
	zs_kv_abort(t);
	zs_kv_close(kv);
}

static void put_legacy_record(const char *data)
{
	struct zs_kv *kv;
	struct zs_kv_txn *t;
	struct zs_checkpoint k = {.id = legacy_id, .step = 9, .state = ZS_CKPT_COMMITTED,
				  .epoch = legacy_pl.epoch, .placement = legacy_pl,
				  .created_ms = legacy_created_ms};
	struct zs_blob b[2] = {{0, 3, (uint8_t *)"ab"}, {1, 3, (uint8_t *)"cd"}};
	struct zs_buf v;
	uint8_t key[64];
	size_t kl;

	snprintf(k.job, sizeof k.job, "old");
	k.blobs = b;
	k.n_blobs = 2;
	k.durable = &legacy_pl.shards[0].server_id;
	k.n_durable = 1;
	kl = legacy_key(key);
	assert_int_equal(zs_kv_open(data, 0, tables, 7, 0, &kv, NULL), ZS_OK);
	assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
	assert_int_equal(zs_enc_checkpoint(&k, &v), ZS_OK);
	assert_int_equal(zs_kv_put(t, 3, key, kl, v.data, v.len, NULL), ZS_OK);
	zs_buf_release(&v);
	assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
	zs_kv_close(kv);
}

/*
 * What a checkpoint is taken on and each rank's blob are records of their
 * own: all of it comes back after the coordinator is killed, and a record
 * written the old way (all in one) is read and moved out.
 */
static void test_checkpoint_records_survive_restart(void **st)
{
	struct zs_job j, r;
	struct zs_checkpoint k, back;
	uint64_t id;

	(void)st;
	NEED_COORD();
	create_wide_job("old", 3, &j);
	assert_int_equal(zs_coord_create_ckpt(C.c, "old", 4, &k, NULL), ZS_OK);
	id = k.id;
	zs_checkpoint_release(&k);
	assert_int_equal(zs_coord_put_blob(C.c, "old", id, 0, "rank zero", 10, NULL), ZS_OK);
	assert_int_equal(zs_coord_put_blob(C.c, "old", id, 0, "rank 0", 7, NULL), ZS_OK);
	for (uint32_t i = 0; i < j.placement.n_shards; i++)
		report("old", ZS_TASK_SNAPSHOT, id, 4, j.placement.shards[i].server_id, true, ZS_OK);
	assert_int_equal(ckpt_state("old", id, NULL), ZS_CKPT_COMMITTED);
	legacy_id = id + 1000;
	legacy_pl = j.placement;
	legacy_created_ms = j.created_ms + 1; /* taken by this job */
	restart_coord(put_legacy_record);

	assert_int_equal(zs_coord_get_ckpt(C.c, "old", id, &back, NULL), ZS_OK);
	assert_int_equal(back.state, ZS_CKPT_COMMITTED);
	assert_int_equal(back.placement.n_shards, j.placement.n_shards);
	assert_memory_equal(back.placement.shards, j.placement.shards,
			    j.placement.n_shards * sizeof *j.placement.shards);
	assert_int_equal(back.n_blobs, 1);
	assert_string_equal((char *)back.blobs[0].data, "rank 0");
	assert_int_equal(back.incarnation, j.incarnation);
	zs_checkpoint_release(&back);
	/* the old record (LMDB only: written into the coordinator's files):
	 * read whole, then moved out (read again after a second restart,
	 * with its ckpts record now without them); from before incarnations,
	 * it is taken as the job's, which was created before it */
	for (int pass = 0; !C.etcd_ep[0] && pass < 2; pass++) {
		if (pass)
			restart_coord(check_moved_out);
		assert_int_equal(zs_coord_get_ckpt(C.c, "old", legacy_id, &back, NULL), ZS_OK);
		assert_int_equal(back.step, 9);
		assert_int_equal(back.placement.n_shards, j.placement.n_shards);
		assert_int_equal(back.n_blobs, 2);
		assert_string_equal((char *)back.blobs[1].data, "cd");
		assert_int_equal(back.incarnation, j.incarnation);
		assert_int_equal(back.layout_digest, zs_layout_digest(&j.spec.layout));
		zs_checkpoint_release(&back);
	}
	zs_job_release(&j);
	if (!C.etcd_ep[0])
		assert_int_equal(zs_coord_delete_ckpt(C.c, "old", legacy_id, NULL, NULL), ZS_OK);
	assert_int_equal(zs_coord_delete_job(C.c, "old", &r, NULL), ZS_OK);
	zs_job_release(&r);
}

static bool rolled_back(void *arg)
{
	struct zs_job r;
	bool moved;
	if (zs_coord_get_job(C.c, "inc", &r, NULL))
		return false;
	moved = r.timeline > *(uint64_t *)arg;
	zs_job_release(&r);
	return moved;
}

/*
 * A job deleted and created again under its name is another incarnation:
 * it never sees, restores or rolls back to the earlier one's checkpoints.
 * Deleted with --keep-checkpoints, those stay reachable by id alone (list
 * --all, a restore into a job of the same layout, a delete); deleted
 * plainly, the job's own go with it. Through a restart, on LMDB and etcd.
 */
static void test_incarnations(void **st)
{
	struct zs_job a, b, r;
	struct zs_checkpoint k;
	struct zs_error err = {0};
	uint64_t ids[16], incs[16], a5, a6, b5, timeline;
	uint32_t deleted, kept;

	(void)st;
	NEED_COORD();
	create_wide_job("inc", 3, &a);
	a5 = commit_ckpt(&a, 5);
	a6 = commit_ckpt(&a, 6);
	assert_int_equal(zs_coord_put_blob(C.c, "inc", a6, 0, "a's rank 0", 11, NULL), ZS_OK);
	assert_int_equal(zs_coord_delete_job_ex(C.c, "inc", true, &r, &deleted, &kept, NULL), ZS_OK);
	zs_job_release(&r);
	assert_int_equal(deleted, 0);
	assert_int_equal(kept, 2);
	/* out of reach but by id: a job of the name is not needed to list them */
	assert_int_equal(zs_coord_list_ckpts(C.c, "inc", NULL, NULL, &err), ZS_ENOTFOUND);
	assert_int_equal(listed("inc", true, ids, NULL), 2);

	/* created again, the same model: another incarnation and token */
	create_wide_job("inc", 3, &b);
	assert_true(b.incarnation != a.incarnation && b.incarnation != 0);
	assert_int_equal(listed("inc", false, ids, NULL), 0);
	assert_int_equal(listed("inc", true, ids, incs), 2);
	assert_int_equal(incs[0], a.incarnation);
	assert_int_equal(zs_coord_restore(C.c, "inc", 0, &r, &err), ZS_ENOTFOUND);
	/* its checkpoint at step 5 is its own, not the earlier one's */
	assert_int_equal(zs_coord_create_ckpt(C.c, "inc", 5, &k, NULL), ZS_OK);
	b5 = k.id;
	assert_true(b5 != a5);
	assert_int_equal(k.state, ZS_CKPT_PENDING);
	assert_int_equal(k.incarnation, b.incarnation);
	zs_checkpoint_release(&k);
	/* the earlier one's is not its servers' task, and takes no report */
	assert_false(has_task(b.placement.shards[0].server_id, ZS_TASK_SNAPSHOT, a5));
	assert_true(has_task(b.placement.shards[0].server_id, ZS_TASK_SNAPSHOT, b5));
	report("inc", ZS_TASK_SNAPSHOT, a5, 5, b.placement.shards[0].server_id, true, ZS_ESTATE);
	assert_int_equal(zs_coord_put_blob(C.c, "inc", a6, 0, "b's", 4, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "earlier job's"));
	assert_int_equal(zs_coord_delete_ckpt(C.c, "inc", b5, NULL, NULL), ZS_OK);

	/* a trainer's lease lapses: the rollback is to a reset (step 0),
	 * never to the earlier job's latest */
	struct zs_join_req jr = {.rank = 0, .session = 77};
	snprintf(jr.job, sizeof jr.job, "inc");
	assert_int_equal(zs_coord_join(C.c, &jr, &r, NULL), ZS_OK);
	timeline = r.timeline;
	zs_job_release(&r);
	if (!h_poll(rolled_back, &timeline, 20000))
		fail_msg("the job did not roll back within 20 s of its trainer's lease (3 s)");
	assert_int_equal(zs_coord_get_job(C.c, "inc", &r, NULL), ZS_OK);
	assert_int_equal(r.restore_pending, ZS_CKPT_RESET);
	zs_job_release(&r);
	for (uint32_t i = 0; i < b.placement.n_shards; i++)
		report("inc", ZS_TASK_RESTORE, ZS_CKPT_RESET, 0, b.placement.shards[i].server_id,
		       true, ZS_OK);

	/* asked for by id, the same layout: restored, and its state is where
	 * a later rollback goes while the job has none of its own */
	restore_all("inc", a6);
	assert_int_equal(zs_coord_join(C.c, &jr, &r, NULL), ZS_OK);
	timeline = r.timeline;
	zs_job_release(&r);
	if (!h_poll(rolled_back, &timeline, 20000))
		fail_msg("the job did not roll back within 20 s of its trainer's lease (3 s)");
	assert_int_equal(zs_coord_get_job(C.c, "inc", &r, NULL), ZS_OK);
	assert_int_equal(r.restore_pending, a6);
	zs_job_release(&r);
	for (uint32_t i = 0; i < b.placement.n_shards; i++)
		report("inc", ZS_TASK_RESTORE, a6, 6, b.placement.shards[i].server_id, true, ZS_OK);

	/* deleted plainly: its own checkpoint goes, the earlier ones stay */
	b5 = commit_ckpt(&b, 7);
	assert_int_equal(zs_coord_delete_job_ex(C.c, "inc", false, &r, &deleted, &kept, NULL), ZS_OK);
	zs_job_release(&r);
	assert_int_equal(deleted, 1);
	assert_int_equal(kept, 0);
	assert_int_equal(zs_coord_get_ckpt(C.c, "inc", b5, &k, &err), ZS_ENOTFOUND);
	assert_int_equal(listed("inc", true, ids, NULL), 2);
	/* one kept is deleted by its id, with no job of the name */
	assert_int_equal(zs_coord_delete_ckpt(C.c, "inc", a5, NULL, &err), ZS_OK);

	/* through a restart; then into another model of the name: refused */
	restart_coord(NULL);
	assert_int_equal(listed("inc", true, ids, incs), 1);
	assert_int_equal(ids[0], a6);
	assert_int_equal(incs[0], a.incarnation);
	create_wide_job("inc", 4, &r);
	zs_job_release(&r);
	assert_int_equal(zs_coord_restore(C.c, "inc", a6, &r, &err), ZS_ESTATE);
	assert_non_null(strstr(err.msg, "layout differs"));
	assert_int_equal(zs_coord_delete_job(C.c, "inc", &r, NULL), ZS_OK);
	zs_job_release(&r);
	assert_int_equal(zs_coord_delete_ckpt(C.c, "inc", a6, NULL, &err), ZS_OK);
	assert_int_equal(listed("inc", true, ids, NULL), 0);
	zs_job_release(&a);
	zs_job_release(&b);
}

/*
 * Failed checkpoints are bounded: with none committing (a full disk while
 * trainers restart), a job keeps its newest 8 failed ones, the reason of
 * each; older ones are pruned (430 piled up in 30 s before).
 */
static void test_failed_checkpoints_are_bounded(void **st)
{
	struct zs_job j, r;
	struct zs_checkpoint *v, k;
	uint32_t n;
	uint64_t last = 0;

	(void)st;
	NEED_COORD();
	create_wide_job("fails", 2, &j);
	for (uint64_t step = 1; step <= 20; step++) {
		assert_int_equal(zs_coord_create_ckpt(C.c, "fails", step, &k, NULL), ZS_OK);
		last = k.id;
		zs_checkpoint_release(&k);
		report("fails", ZS_TASK_SNAPSHOT, last, step, j.placement.shards[0].server_id, false,
		       ZS_OK);
	}
	assert_int_equal(zs_coord_list_ckpts(C.c, "fails", &v, &n, NULL), ZS_OK);
	assert_int_equal(n, 8);
	for (uint32_t i = 0; i < n; i++) {
		assert_int_equal(v[i].state, ZS_CKPT_FAILED);
		assert_true(v[i].id > last - 8);
		assert_non_null(strstr(v[i].error, "disk on fire"));
		zs_checkpoint_release(&v[i]);
	}
	free(v);
	zs_job_release(&j);
	assert_int_equal(zs_coord_delete_job(C.c, "fails", &r, NULL), ZS_OK);
	zs_job_release(&r);
}

/* Reads a whole small file into a malloc'd string ("" when absent). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b = calloc(1, 65536);
	assert_non_null(b);
	if (f) {
		size_t n = fread(b, 1, 65535, f);
		b[n] = '\0';
		fclose(f);
	}
	return b;
}

/*
 * Every daemon refuses a port in use, whatever else binds it: a second
 * coordinator (its own catalog) on the first one's address, and a server
 * told to listen there, exit with an error that says so; the first
 * coordinator still answers every call with its own catalog.
 */
static void test_port_in_use_refused(void **st)
{
	char data[512], log[512];
	struct zs_server_info *sv;
	uint32_t n;

	(void)st;
	NEED_COORD();
	for (int kind = 0; kind < 2; kind++) {
		snprintf(data, sizeof data, "%s/second-%d", C.dir, kind);
		snprintf(log, sizeof log, "%s/second-%d.log", C.dir, kind);
		char bin[512];
		snprintf(bin, sizeof bin, "%s", h_bin(kind ? "zshard-server" : "zshard-coordinator"));
		char *coord[] = {bin, "--listen", C.addr, "--data-dir", data, NULL};
		char *server[] = {bin, "--listen", C.addr,
				  "--coordinator", C.addr, "--data-dir", data,
				  "--capacity", "16M", NULL};
		pid_t p = h_spawn(kind ? server : coord, log);
		assert_true(p > 0);
		int rc = h_stop(p, 0, 30000);
		char *out = slurp(log);
		if (rc == 0 || rc == -1)
			fail_msg("a %s on %s, in use, exited %d: %s", kind ? "server" : "coordinator",
				 C.addr, rc, out);
		if (!strstr(out, "the address is in use"))
			fail_msg("the %s's error does not say the address is in use: %s",
				 kind ? "server" : "coordinator", out);
		free(out);
	}
	/* every call still reaches the first, with its catalog */
	for (int i = 0; i < 10; i++) {
		assert_int_equal(zs_coord_servers(C.c, &sv, &n, NULL), ZS_OK);
		assert_int_equal(n, C.n_srv);
		free(sv);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_checkpoint_over_1000_servers),
		cmocka_unit_test(test_last_report_missing),
		cmocka_unit_test(test_checkpoint_records_survive_restart),
		cmocka_unit_test(test_incarnations),
		cmocka_unit_test(test_failed_checkpoints_are_bounded),
		cmocka_unit_test(test_port_in_use_refused),
	};
	/* the catalog's records the same in etcd as in LMDB */
	const struct CMUnitTest on_etcd[] = {
		cmocka_unit_test(test_checkpoint_records_survive_restart),
		cmocka_unit_test(test_incarnations),
	};
	int rc;

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	rc = cmocka_run_group_tests_name("catalog", tests, setup, teardown);
	return rc | cmocka_run_group_tests_name("catalog on etcd", on_etcd, setup_etcd, teardown);
}
