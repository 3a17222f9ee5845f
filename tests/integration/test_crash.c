/*
 * test_crash.c - failures through the whole service: a server or the
 * coordinator killed mid-checkpoint (the previous checkpoint is what comes
 * back), a checkpoint on a full disk (a clear error, training goes on), a
 * trainer that dies mid-step (named, in bounded time), an evicted rank and a
 * lapsed lease (the job rolls back by itself; the trainers resume), a
 * checkpoint found bad when restored (the job falls back by itself).
 */
#include "tests/integration/train_common.h"

#include <sys/statvfs.h>

#include "storage/ckpt.h"
#include "storage/kv.h"

/*
 * A server killed in the middle of writing a checkpoint (fault injection
 * at fixed points): the checkpoint never commits, and the previous
 * committed one is what a restore brings back, intact.
 */
static void crash_during_checkpoint(const char *fault, const char *job)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_checkpoint k;
	struct zs_job j;
	struct rank_ctx x[1];
	unsigned long long a, b;
	int rc;

	oracle_spec(&spec, job, 1, ZS_ADAMW, ZS_F32);
	create_job(&spec);
	x[0] = (struct rank_ctx){.t = join(job, 0, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 1, 0, 1);
	assert_int_equal(zs_checkpoint(x[0].t, 1, NULL, 0, &a), ZS_OK);
	assert_int_equal(zs_checkpoint_wait(x[0].t, a, 20000), ZS_OK);
	zs_trainer_close(x[0].t);

	/* server 0 comes back armed; restore A so that it holds parameters */
	h_stop(C.srv[0], SIGTERM, 5000);
	restart_server(0, fault);
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &c, NULL), ZS_OK);
	for (int i = 0; i < 200 && zs_coord_restore(c, job, a, &j, NULL); i++)
		usleep(50 * 1000);
	zs_job_release(&j);
	wait_restored(c, job, &j);
	if (j.restore_error[0])
		fail_msg("%s: restore of A: %s", fault, j.restore_error);
	zs_job_release(&j);

	x[0] = (struct rank_ctx){.t = join(job, 0, "tcp")};
	{
		/* server 0 dying before it answers leaves the rank waiting for
		 * the coordinator's verdict on it (client/verdict.c), which
		 * comes only when the server is back, after this call: bounded
		 * at 3 s here, not the default 120 s */
		struct zs_policy pol;
		zs_trainer_policy(x[0].t, &pol);
		pol.op_timeout_ms = 3000;
		assert_int_equal(zs_trainer_set_policy(x[0].t, &pol), ZS_OK);
	}
	train_ranks(x, 1, 1, 2);
	/* server 0 may die at the fault point before it answers the snapshot
	 * request: zs_checkpoint then says it is unreachable (b is set) */
	rc = zs_checkpoint(x[0].t, 2, NULL, 0, &b);
	if (rc != ZS_OK && rc != ZS_EUNAVAIL)
		fail_msg("%s: zs_checkpoint: %s", fault, zs_trainer_error(x[0].t));
	/* server 0 dies at the fault point: B never commits */
	rc = h_stop(C.srv[0], 0, 30000);
	if (rc != 128 + SIGKILL)
		fail_msg("%s: server 0 ended with %d, not by the fault point (see %s/server-0.log)",
			 fault, rc, C.dir);
	rc = zs_checkpoint_wait(x[0].t, b, 1500);
	if (rc != ZS_EAGAIN)
		fail_msg("%s: checkpoint %llu: %s (%d)", fault, b, zs_trainer_error(x[0].t), rc);
	assert_int_equal(zs_coord_get_ckpt(c, job, b, &k, NULL), ZS_OK);
	if (k.state != ZS_CKPT_PENDING)
		fail_msg("%s: checkpoint %llu is %s: %s", fault, b, zs_ckpt_state_name(k.state),
			 k.error);
	zs_checkpoint_release(&k);
	/* an incomplete checkpoint cannot be restored */
	{
		struct zs_error err = {0};
		struct zs_job jj;
		assert_int_equal(zs_coord_restore(c, job, b, &jj, &err), ZS_ESTATE);
		assert_non_null(strstr(err.msg, "not committed"));
	}
	zs_trainer_close(x[0].t);

	/* back without the fault: the latest committed is A, and it is whole */
	restart_server(0, NULL);
	for (int i = 0; i < 200 && zs_coord_restore(c, job, 0, &j, NULL); i++)
		usleep(50 * 1000);
	zs_job_release(&j);
	wait_restored(c, job, &j);
	assert_string_equal(j.restore_error, "");
	assert_int_equal(j.restored_id, a);
	zs_job_release(&j);
	x[0] = (struct rank_ctx){.t = join(job, 0, "tcp")};
	check_oracle(x[0].t, &spec, 1);
	zs_trainer_close(x[0].t);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/* The number of distinct servers holding shards of job. */
static uint32_t job_servers(struct zs_coord_client *c, const char *job)
{
	struct zs_job j;
	uint64_t seen[64];
	uint32_t n = 0;

	assert_int_equal(zs_coord_get_job(c, job, &j, NULL), ZS_OK);
	for (uint32_t i = 0; i < j.placement.n_shards; i++) {
		bool dup = false;
		for (uint32_t k = 0; k < n; k++)
			dup |= seen[k] == j.placement.shards[i].server_id;
		if (!dup && n < 64)
			seen[n++] = j.placement.shards[i].server_id;
	}
	zs_job_release(&j);
	return n;
}

/*
 * The coordinator killed as it is about to record a checkpoint committed:
 * after its restart that checkpoint is committed only once every server
 * has reported it durable again (the last report was lost with the
 * coordinator, and its snapshot task is still pending), and a restore of
 * the latest brings back a committed checkpoint, whole: the previous one,
 * or this one when every server re-reported it first.
 */
static void coordinator_dies_at_commit(void)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_checkpoint k;
	struct rank_ctx x[1];
	unsigned long long a, b, restored;
	char pf[1024], log[1024], data[1024], addr[64];
	int rc;

	oracle_spec(&spec, "crash3", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	x[0] = (struct rank_ctx){.t = join("crash3", 0, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 1, 0, 1);
	assert_int_equal(zs_checkpoint(x[0].t, 1, NULL, 0, &a), ZS_OK);
	assert_int_equal(zs_checkpoint_wait(x[0].t, a, 20000), ZS_OK);

	/* the coordinator comes back armed on the same port and directory */
	h_stop(C.coord, SIGTERM, 5000);
	snprintf(pf, sizeof pf, "%s/coordinator.addr", C.dir);
	snprintf(log, sizeof log, "%s/coordinator.log", C.dir);
	snprintf(data, sizeof data, "%s/coordinator", C.dir);
	unlink(pf);
	char *argv[] = {(char *)h_bin("zshard-coordinator"), "--listen", C.addr, "--data-dir", data,
			"--port-file", pf, "--lease-ms", "1500", NULL};
	setenv("ZSHARD_FAULT", "coord-before-commit", 1);
	C.coord = h_spawn(argv, log);
	unsetenv("ZSHARD_FAULT");
	assert_true(h_wait_file(pf, 10000, addr, sizeof addr));
	train_ranks(x, 1, 1, 2);
	rc = zs_checkpoint(x[0].t, 2, NULL, 0, &b);
	assert_true(rc == ZS_OK || rc == ZS_EUNAVAIL);
	rc = h_stop(C.coord, 0, 30000);
	if (rc != 128 + SIGKILL)
		fail_msg("the coordinator ended with %d, not at its fault point", rc);
	zs_trainer_close(x[0].t);

	unlink(pf);
	C.coord = h_spawn(argv, log);
	assert_true(h_wait_file(pf, 10000, addr, sizeof addr));
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_ckpt(c, "crash3", b, &k, NULL), ZS_OK);
	if (k.state == ZS_CKPT_COMMITTED && k.n_durable < job_servers(c, "crash3"))
		fail_msg("checkpoint %llu is committed with %u of %u servers durable", b,
			 k.n_durable, job_servers(c, "crash3"));
	zs_checkpoint_release(&k);
	{
		struct zs_job j;
		int i;
		for (i = 0; i < 200 && zs_coord_restore(c, "crash3", 0, &j, NULL); i++)
			usleep(50 * 1000);
		assert_true(i < 200);
		zs_job_release(&j);
		wait_restored(c, "crash3", &j);
		assert_string_equal(j.restore_error, "");
		if (j.restored_id != a && j.restored_id != b)
			fail_msg("restored checkpoint %llu, neither %llu nor %llu",
				 (unsigned long long)j.restored_id, a, b);
		restored = j.restored_id;
		zs_job_release(&j);
		assert_int_equal(zs_coord_get_ckpt(c, "crash3", restored, &k, NULL), ZS_OK);
		assert_int_equal(k.state, ZS_CKPT_COMMITTED);
		assert_int_equal(k.n_durable, job_servers(c, "crash3"));
		zs_checkpoint_release(&k);
		/* the old rank 0 left while the coordinator was down: it is still
		 * recorded, and is evicted now, which rolls the job back to that
		 * checkpoint again: waited for, or the join below may come
		 * before the rollback and its gather be told to resume */
		if (!zs_coord_leave(c, "crash3", 0, 0, false, 0, &j, NULL))
			zs_job_release(&j);
		wait_restored(c, "crash3", &j);
		/* to the latest committed: B's, if its last report came in the
		 * meantime */
		if (j.restored_id != a && j.restored_id != b)
			fail_msg("the eviction rolled back to checkpoint %llu, neither %llu nor %llu",
				 (unsigned long long)j.restored_id, a, b);
		restored = j.restored_id;
		zs_job_release(&j);
	}
	x[0] = (struct rank_ctx){.t = join("crash3", 0, "tcp")};
	check_oracle(x[0].t, &spec, restored == a ? 1 : 2);
	zs_trainer_close(x[0].t);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

static void test_crash_during_checkpoint(void **st)
{
	(void)st;
	crash_during_checkpoint("ckpt-mid-write", "crash1");
	crash_during_checkpoint("ckpt-before-report", "crash2");
	coordinator_dies_at_commit();
}

/*
 * A full data dir: a checkpoint on a server whose data dir is a 4 MiB
 * tmpfs fails with a clear "no space" error, and training goes on; a
 * clean stop (SIGTERM) on a disk without room for the job's live state
 * says it could not keep it and why, and the server exits by itself (it
 * died of a SIGBUS writing through LMDB's map before).
 */
/* What the full-disk test started, for its teardown to undo whether or
 * not the test got to the end: no server, no mount left behind. */
static struct {
	pid_t srv;
	char mnt[1024];
} full;

static int full_disk_teardown(void **st)
{
	char cmd[1100];

	(void)st;
	if (full.srv > 0 && h_alive(full.srv))
		h_stop(full.srv, SIGKILL, 5000);
	full.srv = 0;
	if (full.mnt[0]) {
		zs_fmt(cmd, sizeof cmd, "umount %s", full.mnt);
		if (system(cmd))
			fprintf(stderr, "cannot unmount %s\n", full.mnt);
		full.mnt[0] = '\0';
	}
	return 0;
}

static void test_checkpoint_on_a_full_disk(void **st)
{
	static const uint64_t sizes[] = {1u << 20, 64};
	char small[1024], cmd[1200], log[1024], data[1024], port[1024], got[64];
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_server_info *s;
	struct zs_checkpoint k;
	struct rank_ctx x[1];
	unsigned long long id;
	uint32_t n_s;
	uint64_t sid = 0;
	pid_t srv;

	(void)st;
	snprintf(small, sizeof small, "%s/small", C.dir);
	zs_fmt(cmd, sizeof cmd, "mkdir -p %s && mount -t tmpfs -o size=4m tmpfs %s 2>/dev/null",
	       small, small);
	if (system(cmd)) {
		printf("[  SKIP    ] cannot mount a small tmpfs here (not root?): the full-disk test is skipped\n");
		skip();
	}
	snprintf(full.mnt, sizeof full.mnt, "%s", small);
	snprintf(log, sizeof log, "%s/server-small.log", C.dir);
	zs_fmt(data, sizeof data, "%s/data", small);
	snprintf(port, sizeof port, "%s/server-small.addr", C.dir);
	char *argv[] = {(char *)h_bin("zshard-server"), "--coordinator", C.addr, "--data-dir", data,
			"--capacity", "256M", "--port-file", port, NULL};
	srv = full.srv = h_spawn(argv, log);
	assert_true(h_wait_file(port, 10000, got, sizeof got));
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	for (int i = 0; i < 100 && !sid; i++) {
		assert_int_equal(zs_coord_servers(c, &s, &n_s, NULL), ZS_OK);
		for (uint32_t k2 = 0; k2 < n_s; k2++)
			if (!strcmp(s[k2].addr, got) && s[k2].up)
				sid = s[k2].id;
		free(s);
		if (!sid)
			usleep(50 * 1000);
	}
	assert_true(sid != 0);
	oracle_spec_sizes(&spec, "full", 1, ZS_ADAMW, ZS_F32, sizes, 2);
	create_job(&spec);
	rebalance(c, "full", &sid, 1, 1); /* all of it on the small server */
	x[0] = (struct rank_ctx){.t = join("full", 0, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 1, 0, 1);
	assert_int_equal(zs_checkpoint(x[0].t, 1, NULL, 0, &id), ZS_OK);
	assert_int_equal(zs_checkpoint_wait(x[0].t, id, 20000), ZS_EIO);
	assert_int_equal(zs_coord_get_ckpt(c, "full", id, &k, NULL), ZS_OK);
	assert_int_equal(k.state, ZS_CKPT_FAILED);
	if (!strstr(k.error, "free"))
		fail_msg("the failure does not say why: %s", k.error);
	if (!strstr(k.error, got))
		fail_msg("the failure does not name the server's address %s: %s", got, k.error);
	zs_checkpoint_release(&k);
	train_ranks(x, 1, 1, 2); /* the job goes on */
	assert_true(h_alive(srv)); /* and the server did not die of it */
	/* it says it is unwell (its next heartbeat carries it): the operator
	 * sees why in zshardctl servers */
	{
		bool unwell = false;
		for (int i = 0; i < 100 && !unwell; i++) {
			assert_int_equal(zs_coord_servers(c, &s, &n_s, NULL), ZS_OK);
			for (uint32_t k2 = 0; k2 < n_s; k2++)
				unwell |= s[k2].id == sid && strstr(s[k2].health, "disk full");
			free(s);
			if (!unwell)
				usleep(50 * 1000);
		}
		assert_true(unwell);
	}
	/* room again: the next checkpoint commits, and the failed one, kept
	 * until then for the operator to see, is pruned */
	zs_fmt(cmd, sizeof cmd, "mount -o remount,size=64m %s", small);
	assert_int_equal(system(cmd), 0);
	{
		unsigned long long id2;
		assert_int_equal(zs_checkpoint(x[0].t, 2, NULL, 0, &id2), ZS_OK);
		assert_int_equal(zs_checkpoint_wait(x[0].t, id2, 20000), ZS_OK);
		assert_int_equal(zs_coord_get_ckpt(c, "full", id, &k, NULL), ZS_ENOTFOUND);
	}
	{ /* and well again */
		bool well = false;
		for (int i = 0; i < 100 && !well; i++) {
			assert_int_equal(zs_coord_servers(c, &s, &n_s, NULL), ZS_OK);
			for (uint32_t k2 = 0; k2 < n_s; k2++)
				well |= s[k2].id == sid && !s[k2].health[0];
			free(s);
			if (!well)
				usleep(50 * 1000);
		}
		assert_true(well);
	}
	zs_trainer_close(x[0].t);
	{
		/* the disk filled by another process, 2 MiB left: the job's
		 * live state (12 MiB) does not fit */
		struct statvfs vfs;
		char filler[1100];
		FILE *f;
		uint64_t left;
		zs_fmt(filler, sizeof filler, "%s/filler", small);
		assert_int_equal(statvfs(small, &vfs), 0);
		left = (uint64_t)vfs.f_bavail * vfs.f_frsize;
		assert_non_null(f = fopen(filler, "w"));
		static char zeros[1 << 16];
		for (uint64_t w = 0; w + (2u << 20) < left; w += sizeof zeros)
			if (fwrite(zeros, 1, sizeof zeros, f) != sizeof zeros)
				break;
		fclose(f);
		int rc = h_stop(srv, SIGTERM, 20000);
		if (rc != 1)
			fail_msg("a clean stop on a full disk ended with %d (want 1, the server's own exit; %d is a SIGBUS): see %s",
				 rc, 128 + SIGBUS, log);
		if (!text_in_file(log, "is not kept: its live state") ||
		    !text_in_file(log, "has no room for"))
			fail_msg("the server's log does not say why the live state was not kept: %s",
				 log);
		full.srv = 0;
	}
	/* later jobs must not be placed on it: wait until its lease lapses */
	for (int i = 0, down = 0; i < 200 && !down; i++) {
		assert_int_equal(zs_coord_servers(c, &s, &n_s, NULL), ZS_OK);
		for (uint32_t k2 = 0; k2 < n_s; k2++)
			down |= s[k2].id == sid && !s[k2].up;
		free(s);
		if (!down)
			usleep(50 * 1000);
	}
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/*
 * A server stopped (SIGSTOP: its sockets stay open, nothing answers): the
 * step driver's wait is bounded by its policy and fails with ZS_ETIMEDOUT
 * naming the server, the unit and the step, instead of hanging.
 */
static void test_liveness_stopped_server_is_bounded(void **st)
{
	struct zs_job_spec spec;
	struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1, .op_timeout_ms = 1500};
	zs_trainer *t;
	const void *p;
	double t0;
	int rc = ZS_OK;

	(void)st;
	oracle_spec(&spec, "stopped", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	t = join("stopped", 0, "tcp");
	upload_init(t);
	assert_int_equal(zs_trainer_set_policy(t, &pol), ZS_OK);
	assert_int_equal(kill(C.srv[0], SIGSTOP), 0);
	t0 = (double)zs_now_ms();
	if ((rc = zs_step_begin(t, 0)) == ZS_OK)
		for (unsigned u = 0; u < zs_trainer_units(t) && rc == ZS_OK; u++)
			rc = zs_unit_params(t, u, 0, &p);
	kill(C.srv[0], SIGCONT);
	assert_int_equal(rc, ZS_ETIMEDOUT);
	assert_non_null(strstr(zs_trainer_error(t), "no answer from"));
	assert_non_null(strstr(zs_trainer_error(t), "op_timeout_ms"));
	assert_true((double)zs_now_ms() - t0 < 15000);
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

static void wait_server(struct zs_coord_client *c, int i, bool up);

/* SIGCONT to server 0 once the coordinator marks it down, and a while
 * after (ms), from a thread */
struct later {
	struct zs_coord_client *c;
	int ms;
};

static void *cont_later(void *arg)
{
	struct later *l = arg;
	wait_server(l->c, 0, false);
	zs_sleep_ms(l->ms, NULL);
	kill(C.srv[0], SIGCONT);
	return NULL;
}

/* Step 0's gathers of job's only rank: its status, how long they took */
static int gather_all(zs_trainer *t, int64_t *waited)
{
	const void *p;
	int64_t t0 = zs_now_ms();
	int rc;

	if ((rc = zs_step_begin(t, 0)) == ZS_OK)
		for (unsigned u = 0; u < zs_trainer_units(t) && rc == ZS_OK; u++)
			rc = zs_unit_params(t, u, 0, &p);
	*waited = zs_now_ms() - t0;
	return rc;
}

/*
 * A server stopped (SIGSTOP) past its lease (1.5 s here), which the
 * coordinator marks down: a job without replicas waits for it (a stop, a
 * partition that heals: it continues where it was) or for the rollback
 * that its restart without its state brings, within the step driver's
 * bound. Continued a second after the mark, the step's gathers complete;
 * never continued, the wait ends at the bound (5 s here) with ZS_ETIMEDOUT
 * naming the server down. (It failed at the mark before, with ZS_EUNAVAIL,
 * ending a rank that the pause would have let go on.)
 */
static void test_liveness_server_marked_down_is_waited_for(void **st)
{
	struct zs_job_spec spec;
	struct zs_policy pol = {.prefetch = 1, .reshard_after_forward = 1, .op_timeout_ms = 5000};
	struct later l = {.ms = 1000};
	pthread_t th;
	zs_trainer *t;
	int64_t waited;
	int rc;

	(void)st;
	oracle_spec(&spec, "down", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	t = join("down", 0, "tcp");
	upload_init(t);
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &l.c, NULL), ZS_OK);
	assert_int_equal(kill(C.srv[0], SIGSTOP), 0);
	assert_int_equal(pthread_create(&th, NULL, cont_later, &l), 0);
	rc = gather_all(t, &waited);
	pthread_join(th, NULL);
	if (rc != ZS_OK)
		fail_msg("a server stopped for 3 s: after %lld ms: %s: %s", (long long)waited,
			 zs_strerror(rc), zs_trainer_error(t));
	assert_true(waited >= 1000);
	zs_trainer_close(t);
	/* stopped for good: the bound, naming it down */
	t = join("down", 0, "tcp");
	assert_int_equal(zs_trainer_set_policy(t, &pol), ZS_OK);
	wait_server(l.c, 0, true);
	assert_int_equal(kill(C.srv[0], SIGSTOP), 0);
	rc = gather_all(t, &waited);
	kill(C.srv[0], SIGCONT);
	wait_server(l.c, 0, true);
	zs_coord_close(l.c);
	if (rc != ZS_ETIMEDOUT || !strstr(zs_trainer_error(t), "is down") ||
	    !strstr(zs_trainer_error(t), "op_timeout_ms"))
		fail_msg("after %lld ms: %s: %s", (long long)waited, zs_strerror(rc),
			 zs_trainer_error(t));
	assert_true(waited < 15000);
	zs_trainer_close(t);
	zs_job_spec_release(&spec);
}

/* A rank that dies mid-step: the others get a clear error, in bounded time,
 * that names it; the servers go on serving. */
static void test_liveness_dead_trainer_is_named(void **st)
{
	struct zs_job_spec spec;
	zs_trainer *t0, *t1;
	zs_op *op;
	float p[1000], g[1000] = {0};
	struct timespec a, b;
	double waited;

	(void)st;
	oracle_spec(&spec, "dead", 2, ZS_SGD, ZS_F32);
	create_job(&spec);
	t0 = join("dead", 0, "tcp");
	t1 = join("dead", 1, "tcp");
	assert_int_equal(zs_init_unit(t0, 0, g), ZS_OK);
	assert_int_equal(zs_push(t0, 0, 0, g, &op), ZS_OK);
	assert_int_equal(zs_op_wait(op, 5000), ZS_OK);
	zs_trainer_close(t1); /* rank 1 is gone without pushing step 0 */
	clock_gettime(CLOCK_MONOTONIC, &a);
	assert_int_equal(zs_gather(t0, 0, 1, p, &op), ZS_OK);
	assert_int_equal(zs_op_wait(op, 30000), ZS_ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	waited = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
	if (!strstr(zs_trainer_error(t0), "push of step 0 from rank 1"))
		fail_msg("the error does not name rank 1: %s", zs_trainer_error(t0));
	assert_true(waited >= 2.5 && waited < 15.0); /* the server's 3 s bound */
	/* the server still serves: step 0 of another unit is there */
	assert_int_equal(zs_init_unit(t0, 3, g), ZS_OK);
	assert_int_equal(zs_gather(t0, 3, 0, p, &op), ZS_OK);
	assert_int_equal(zs_op_wait(op, 5000), ZS_OK);
	zs_trainer_close(t0);
	zs_job_spec_release(&spec);
}

/*
 * An operator evicts a rank that is training: the job rolls back to its
 * latest committed checkpoint by itself; the trainer's old connections say
 * ZS_ERESUME; zs_trainer_resume rejoins the rank and gives the checkpoint's
 * step; training from there ends bitwise where an uninterrupted run does.
 */
static void test_evicted_rank_rolls_back(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct rank_ctx x[1];
	struct zs_job j;
	unsigned long long id, step;
	unsigned len;
	float p[1000];
	char *out = NULL, *errs = NULL;

	(void)st;
	oracle_spec(&spec, "evict", 1, ZS_ADAMW, ZS_F32);
	create_job(&spec);
	x[0] = (struct rank_ctx){.t = join("evict", 0, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 1, 0, 2);
	assert_int_equal(zs_checkpoint(x[0].t, 2, NULL, 0, &id), ZS_OK);
	assert_int_equal(zs_checkpoint_wait(x[0].t, id, 20000), ZS_OK);
	train_ranks(x, 1, 2, 3); /* one step past the checkpoint: lost below */

	if (ctl(&out, &errs, "trainers", "evict", "evict", "0", NULL))
		fail_msg("trainers evict: %s", errs);
	free(out);
	free(errs);
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &c, NULL), ZS_OK);
	wait_restored(c, "evict", &j);
	assert_int_equal(j.n_trainers, 0);
	assert_int_equal(j.restored_id, id);
	assert_int_equal(j.restored_step, 2);
	assert_true(j.timeline >= 1);
	if (!strstr(j.rollback_reason, "rank 0 was evicted"))
		fail_msg("rollback reason: '%s'", j.rollback_reason);
	zs_job_release(&j);

	/* the connections of the timeline that ended are told so */
	assert_int_equal(fetch(x[0].t, 0, 3, p), ZS_ERESUME);
	assert_non_null(strstr(zs_trainer_error(x[0].t), "rolled back"));
	/* the trainer takes its rank again and resumes at the checkpoint */
	assert_int_equal(zs_trainer_resume(x[0].t, &step, NULL, 0, &len), ZS_OK);
	assert_int_equal(step, 2);
	assert_int_equal(zs_coord_get_job(c, "evict", &j, NULL), ZS_OK);
	assert_int_equal(j.n_trainers, 1);
	zs_job_release(&j);
	train_ranks(x, 1, 2, 4);
	check_oracle(x[0].t, &spec, 4);
	zs_trainer_close(x[0].t);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/*
 * A rank whose trainer stops renewing its lease (it joined with a session,
 * then went silent: dead, stopped, cut off) loses it within the
 * coordinator's --trainer-lease-ms (3 s here): the rank is free again, and
 * the job (no checkpoint yet) is reset, and the other rank is told so with
 * ZS_ERESUME.
 */
static void test_liveness_lapsed_lease_frees_the_rank(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_join_req req = {.rank = 1, .session = 42};
	struct zs_job j;
	zs_trainer *t0;
	zs_op *op;
	static float g[4099], p[4099]; /* the largest unit's elements */
	unsigned long long step;
	unsigned len;
	int64_t t_start;
	int rc;

	(void)st;
	oracle_spec(&spec, "lapse", 2, ZS_SGD, ZS_F32);
	create_job(&spec);
	t0 = join("lapse", 0, "tcp");
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &c, NULL), ZS_OK);
	snprintf(req.job, sizeof req.job, "lapse");
	snprintf(req.host, sizeof req.host, "nowhere");
	req.layout = spec.layout;
	assert_int_equal(zs_coord_join(c, &req, &j, NULL), ZS_OK);
	zs_job_release(&j);
	upload_init(t0);
	for (unsigned u = 0; u < 4; u++) {
		assert_int_equal(zs_push(t0, u, 0, g, &op), ZS_OK);
		assert_int_equal(zs_op_wait(op, 5000), ZS_OK);
	}
	/* held: rank 1 never pushes step 0. It ends within the servers' step
	 * timeout (3 s here) or, if the lease lapses first, at the rollback */
	t_start = zs_now_ms();
	assert_int_equal(zs_gather(t0, 0, 1, p, &op), ZS_OK);
	rc = zs_op_wait(op, 20000);
	if (rc != ZS_ERESUME && rc != ZS_ETIMEDOUT)
		fail_msg("the held gather ended with %s: %s", zs_strerror(rc), zs_trainer_error(t0));
	for (;;) { /* the lease lapses within 3 s and the sweep's tick */
		assert_int_equal(zs_coord_get_job(c, "lapse", &j, NULL), ZS_OK);
		if (j.n_trainers == 1 && !j.restore_pending)
			break;
		zs_job_release(&j);
		if (zs_now_ms() - t_start > 15000)
			fail_msg("rank 1's lease did not lapse within 15 s");
		usleep(50 * 1000);
	}
	if (!strstr(j.rollback_reason, "rank 1 missed its lease"))
		fail_msg("rollback reason: '%s'", j.rollback_reason);
	zs_job_release(&j);
	/* the job was reset: this trainer's connections are told to resume */
	assert_int_equal(fetch(t0, 0, 0, p), ZS_ERESUME);
	/* no checkpoint to go back to: from step 0, rank 0 uploads again */
	assert_int_equal(zs_trainer_resume(t0, &step, NULL, 0, &len), ZS_ENOTFOUND);
	upload_init(t0);
	assert_int_equal(fetch(t0, 1, 0, p), ZS_OK);
	/* the rank is free for the process that replaces the lost one */
	req.session = 43;
	assert_int_equal(zs_coord_join(c, &req, &j, NULL), ZS_OK);
	zs_job_release(&j);
	zs_trainer_close(t0);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/*
 * A checkpoint found bad when it is restored (one record of it flipped on
 * a server's disk): the rollback that needed it falls back by itself to
 * the newest older checkpoint, which verifies, and says so (the bad one
 * is marked failed with the server's reason, the job's rollback reason
 * names it); the ranks resume there and end bitwise where a run never
 * interrupted ends. Before, the restore failed and the job stopped until
 * an operator deleted the bad checkpoint.
 */
static void test_bad_checkpoint_falls_back(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct zs_checkpoint k;
	struct zs_server_info *s;
	struct zs_job j;
	struct rank_ctx x[1];
	unsigned long long a, b, step;
	uint64_t sid = 0;
	uint32_t n;
	bool flipped = false;

	(void)st;
	oracle_spec(&spec, "bad", 1, ZS_ADAMW, ZS_F32);
	create_job(&spec);
	x[0] = (struct rank_ctx){.t = join("bad", 0, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 1, 0, 1);
	assert_int_equal(zs_checkpoint(x[0].t, 1, NULL, 0, &a), ZS_OK);
	assert_int_equal(zs_checkpoint_wait(x[0].t, a, 20000), ZS_OK);
	train_ranks(x, 1, 1, 2);
	assert_int_equal(zs_checkpoint(x[0].t, 2, NULL, 0, &b), ZS_OK);
	assert_int_equal(zs_checkpoint_wait(x[0].t, b, 20000), ZS_OK);
	train_ranks(x, 1, 2, 3);
	zs_trainer_close(x[0].t);

	/* server 0 dies; one of its records of B gets a bit flipped */
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_servers(c, &s, &n, NULL), ZS_OK);
	for (uint32_t i = 0; i < n; i++)
		if (!strcmp(s[i].addr, C.srv_addr[0]))
			sid = s[i].id;
	free(s);
	assert_int_equal(zs_coord_get_job(c, "bad", &j, NULL), ZS_OK);
	h_stop(C.srv[0], SIGKILL, 5000);
	{
		static const char *const tables[] = {"meta", "ckpt", "live"};
		char data[1100];
		struct zs_kv *kv;
		struct zs_kv_txn *t;
		uint8_t key[CKPT_KEY_MAX];
		snprintf(data, sizeof data, "%s/server-0", C.dir);
		assert_int_equal(zs_kv_open(data, 0, tables, 3, ZS_KV_WRITEMAP, &kv, NULL), ZS_OK);
		assert_int_equal(zs_kv_begin(kv, true, &t, NULL), ZS_OK);
		for (uint32_t i = 0; i < j.placement.n_shards && !flipped; i++) {
			const struct zs_shard *sh = &j.placement.shards[i];
			size_t kl = ckpt_key(key, "bad", b, sh->unit, sh->index, CKPT_MASTER), vl;
			const void *v;
			if (sh->server_id != sid || zs_kv_get(t, 1, key, kl, &v, &vl, NULL))
				continue;
			uint8_t *copy = malloc(vl);
			memcpy(copy, v, vl);
			copy[vl - 1] ^= 0x10; /* a bit of its last element */
			assert_int_equal(zs_kv_put(t, 1, key, kl, copy, vl, NULL), ZS_OK);
			free(copy);
			flipped = true;
		}
		assert_int_equal(zs_kv_commit(t, NULL), ZS_OK);
		zs_kv_close(kv);
	}
	assert_true(flipped);
	zs_job_release(&j);

	/* back without its shards: the job rolls back to B, whose restore
	 * finds the flipped record, and falls back to A by itself */
	restart_server(0, NULL);
	for (int i = 0; i < 600; i++) {
		assert_int_equal(zs_coord_get_job(c, "bad", &j, NULL), ZS_OK);
		if (!j.restore_pending && j.restored_id == a)
			break;
		zs_job_release(&j);
		j.restored_id = 0;
		usleep(50 * 1000);
	}
	if (j.restored_id != a)
		fail_msg("the job did not fall back to checkpoint %llu within 30 s", a);
	if (!strstr(j.rollback_reason, "failed its restore") ||
	    !strstr(j.rollback_reason, "checksum mismatch"))
		fail_msg("the job does not say why it fell back: '%s'", j.rollback_reason);
	assert_string_equal(j.restore_error, "");
	zs_job_release(&j);
	assert_int_equal(zs_coord_get_ckpt(c, "bad", b, &k, NULL), ZS_OK);
	assert_int_equal(k.state, ZS_CKPT_FAILED);
	if (!strstr(k.error, "found bad by its restore") || !strstr(k.error, C.srv_addr[0]))
		fail_msg("checkpoint %llu does not say why it failed, naming the server: %s", b,
			 k.error);
	zs_checkpoint_release(&k);
	/* the rank resumes at A's step and ends where the reference ends */
	x[0] = (struct rank_ctx){.t = join("bad", 0, "tcp")};
	assert_int_equal(zs_trainer_resume(x[0].t, &step, NULL, 0, NULL), ZS_OK);
	assert_int_equal(step, 1);
	train_ranks(x, 1, 1, 3);
	check_oracle(x[0].t, &spec, 3);
	zs_trainer_close(x[0].t);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

/* Whether server i is up (true) or down (false) to the coordinator, within
 * 20 s; false after failing the test. */
static void wait_server(struct zs_coord_client *c, int i, bool up)
{
	for (int64_t deadline = zs_now_ms() + 20000; zs_now_ms() < deadline; usleep(50 * 1000)) {
		struct zs_server_info *s;
		uint32_t n;
		bool is = false;
		assert_int_equal(zs_coord_servers(c, &s, &n, NULL), ZS_OK);
		for (uint32_t k = 0; k < n; k++)
			if (!strcmp(s[k].addr, C.srv_addr[i]))
				is = s[k].up;
		free(s);
		if (is == up)
			return;
	}
	fail_msg("server %d (%s) is not %s within 20 s", i, C.srv_addr[i], up ? "up" : "down");
}

/*
 * A rebalance of a job without replicas whose state is on a server that
 * is down fails at once, naming the server (it waited a fixed 120 s for a
 * checkpoint that could not commit, whatever --timeout-ms said).
 */
static void test_rebalance_with_a_server_down(void **st)
{
	struct zs_job_spec spec;
	struct zs_coord_client *c;
	struct rank_ctx x[1];
	char *out, *errs;
	int64_t t0;
	int rc;

	(void)st;
	oracle_spec(&spec, "rbd", 1, ZS_SGD, ZS_F32);
	create_job(&spec);
	x[0] = (struct rank_ctx){.t = join("rbd", 0, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 1, 0, 1);
	zs_trainer_close(x[0].t); /* left cleanly: the servers hold its state */
	assert_int_equal(zs_coord_open(C.addr, 5000, 1, &c, NULL), ZS_OK);
	assert_int_equal(kill(C.srv[0], SIGSTOP), 0);
	wait_server(c, 0, false);
	t0 = zs_now_ms();
	rc = ctl(&out, &errs, "--timeout-ms", "3000", "rebalance", "rbd", NULL);
	kill(C.srv[0], SIGCONT);
	if (rc != 1 || !strstr(errs, "is down") || !strstr(errs, C.srv_addr[0]))
		fail_msg("rebalance with server 0 down: exit %d, '%s'", rc, errs);
	if (zs_now_ms() - t0 > 30000)
		fail_msg("rebalance with server 0 down took %lld ms (its bound is 3000)",
			 (long long)(zs_now_ms() - t0));
	free(out);
	free(errs);
	wait_server(c, 0, true);
	zs_coord_close(c);
	zs_job_spec_release(&spec);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crash_during_checkpoint),
		cmocka_unit_test(test_bad_checkpoint_falls_back),
		cmocka_unit_test(test_rebalance_with_a_server_down),
		cmocka_unit_test_teardown(test_checkpoint_on_a_full_disk, full_disk_teardown),
		cmocka_unit_test(test_liveness_dead_trainer_is_named),
		cmocka_unit_test(test_liveness_stopped_server_is_bounded),
		cmocka_unit_test(test_liveness_server_marked_down_is_waited_for),
		cmocka_unit_test(test_evicted_rank_rolls_back),
		cmocka_unit_test(test_liveness_lapsed_lease_frees_the_rank),
	};
	const char *skip = getenv("ZSHARD_TEST_SKIP");

	if (argc > 1) /* e.g. test_crash '*rdma*' */
		cmocka_set_test_filter(argv[1]);
	if (skip && *skip) { /* e.g. '*liveness*' (tests/check.sh says why) */
		printf("test_crash: the tests matching '%s' are left out (ZSHARD_TEST_SKIP)\n", skip);
		cmocka_set_skip_filter(skip);
	}
	return cmocka_run_group_tests_name("crash", tests, group_setup, group_teardown);
}
