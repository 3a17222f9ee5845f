/*
 * test_cluster.c - the real coordinator, servers and zshardctl on 127.0.0.1
 * with free ports: membership, job creation, placement coverage, bad requests
 * that change nothing, SIGKILL and restart, lease lapse, a server started
 * before its coordinator, clean SIGTERM, and the local launcher.
 *
 * The tests run in order and share one cluster (coordinator + 3 servers,
 * lease 1000 ms).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctrl/coord_client.h"
#include "tests/integration/cluster_common.h"
#include "tests/harness.h"
#include "ctrl/methods.h"
#include "model/model.h"
#include "include/zshard.h"

#define LEASE_MS "1000"

struct cluster C;

static const char *job_json =
	"{\"name\": \"demo\", \"stage\": 3, \"world_size\": 2, \"compute_dtype\": \"bf16\",\n"
	" \"optimizer\": {\"kind\": \"adamw\", \"lr\": 0.001},\n"
	" \"units\": [\n"
	"  {\"name\": \"embed\", \"dtype\": \"f32\", \"tensors\": [{\"name\": \"wte\", \"shape\": [96, 33]}]},\n"
	"  {\"name\": \"h0\", \"tensors\": [{\"name\": \"w\", \"shape\": [64, 65]}, {\"name\": \"b\", \"shape\": [65]}]},\n"
	"  {\"name\": \"one\", \"tensors\": [{\"name\": \"s\", \"shape\": []}]},\n"
	"  {\"name\": \"big\", \"tensors\": [{\"name\": \"w\", \"shape\": [1000, 301]}]}]}\n";

char *path(const char *fmt, ...)
{
	static char buf[8][1024];
	static int k;
	char rel[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof rel, fmt, ap);
	va_end(ap);
	k = (k + 1) % 8;
	snprintf(buf[k], sizeof buf[k], "%s/%s", C.dir, rel);
	return buf[k];
}

static pid_t start_coord(const char *listen, const char *data, const char *port_file)
{
	char *argv[] = {(char *)h_bin("zshard-coordinator"), "--listen", (char *)listen,
			"--data-dir", (char *)data, "--port-file", (char *)port_file,
			"--lease-ms", LEASE_MS, NULL};
	unlink(port_file);
	return h_spawn(argv, path("coordinator.log"));
}

static pid_t start_server(int i, const char *coord)
{
	char data[1024], pf[1024], log[1024];
	snprintf(data, sizeof data, "%s", path("server-%d", i));
	snprintf(pf, sizeof pf, "%s", path("server-%d.addr", i));
	snprintf(log, sizeof log, "%s", path("server-%d.log", i));
	char *argv[] = {(char *)h_bin("zshard-server"), "--coordinator", (char *)coord,
			"--data-dir", data, "--capacity", "64M", "--port-file", pf, NULL};
	unlink(pf);
	return h_spawn(argv, log);
}

int ctl(char **out, char **err, const char *a1, const char *a2, const char *a3,
	       const char *a4)
{
	char *argv[] = {(char *)h_bin("zshardctl"), "--coordinator", C.addr, (char *)a1,
			(char *)a2, (char *)a3, (char *)a4, NULL};
	return h_run(argv, out, err);
}

json_t *ctl_json(const char *a1, const char *a2, const char *a3)
{
	char *out, *err;
	json_t *j = NULL;
	int rc = ctl(&out, &err, a1, a2, a3, NULL);
	if (rc == 0)
		j = json_loads(out, 0, NULL);
	else
		fprintf(stderr, "zshardctl %s failed (%d): %s\n", a1, rc, err);
	free(out);
	free(err);
	return j;
}

static int count_up(void)
{
	json_t *j = ctl_json("servers", "--json", NULL), *s;
	size_t i;
	int up = 0;

	if (!j)
		return -1;
	json_array_foreach(json_object_get(j, "servers"), i, s)
		up += !strcmp(json_string_value(json_object_get(s, "state")), "up");
	json_decref(j);
	return up;
}

static bool all_up(void *arg) { return count_up() == *(int *)arg; }

static const char *state_of(uint64_t id)
{
	static char st[16];
	json_t *j = ctl_json("servers", "--json", NULL), *s;
	size_t i;

	strcpy(st, "absent");
	if (!j)
		return st;
	json_array_foreach(json_object_get(j, "servers"), i, s)
		if ((uint64_t)json_integer_value(json_object_get(s, "id")) == id)
			snprintf(st, sizeof st, "%s", json_string_value(json_object_get(s, "state")));
	json_decref(j);
	return st;
}

static int group_setup(void **st)
{
	char pf[1024];
	(void)st;
	C.dir = h_tmpdir("cluster");
	if (!C.dir)
		return -1;
	C.port = h_free_port();
	snprintf(C.addr, sizeof C.addr, "127.0.0.1:%d", C.port);
	snprintf(pf, sizeof pf, "%s", path("coordinator.addr"));
	C.coord = start_coord(C.addr, path("coordinator"), pf);
	if (!h_wait_file(pf, 10000, C.addr, sizeof C.addr)) {
		fprintf(stderr, "coordinator did not come up; see %s\n", path("coordinator.log"));
		return -1;
	}
	for (int i = 0; i < NSERV; i++)
		C.srv[i] = start_server(i, C.addr);
	for (int i = 0; i < NSERV; i++)
		if (!h_wait_file(path("server-%d.addr", i), 10000, C.srv_addr[i], 64))
			return -1;
	return 0;
}

static int group_teardown(void **st)
{
	(void)st;
	for (int i = 0; i < NSERV; i++)
		h_stop(C.srv[i], SIGKILL, 5000);
	h_stop(C.coord, SIGKILL, 5000);
	h_rmtree(C.dir);
	free(C.dir);
	return 0;
}

/* ------------------------------------------------------------------ tests */

static void test_three_servers_up(void **st)
{
	int n = NSERV;
	(void)st;
	assert_true(h_poll(all_up, &n, 10000));
}

static json_t *placement_json(void)
{
	return ctl_json("placement", "demo", "--json");
}

static void test_create_job_covers_every_byte(void **st)
{
	char *out, *err, *spec = path("job.json");
	FILE *f = fopen(spec, "w");
	json_t *p, *units, *shards, *u, *sh, *servers, *s;
	uint64_t ids[NSERV];
	size_t i, k, n_ids = 0;

	(void)st;
	fputs(job_json, f);
	fclose(f);
	assert_int_equal(ctl(&out, &err, "job", "create", spec, NULL), 0);
	assert_non_null(strstr(out, "job demo (incarnation "));
	assert_non_null(strstr(out, "): stage 3, world size"));
	free(out);
	free(err);

	servers = ctl_json("servers", "--json", NULL);
	json_array_foreach(json_object_get(servers, "servers"), i, s)
		ids[n_ids++] = (uint64_t)json_integer_value(json_object_get(s, "id"));
	json_decref(servers);
	assert_int_equal(n_ids, NSERV);

	p = placement_json();
	assert_non_null(p);
	assert_int_equal(json_integer_value(json_object_get(p, "epoch")), 1);
	units = json_object_get(p, "units");
	shards = json_object_get(p, "shards");
	assert_int_equal(json_array_size(units), 4);
	json_array_foreach(units, i, u) {
		uint64_t numel = (uint64_t)json_integer_value(json_object_get(u, "numel"));
		unsigned dsz = !strcmp(json_string_value(json_object_get(u, "dtype")), "f32") ? 4 : 2;
		uint8_t *seen = calloc(numel, 1);
		size_t n_shards = 0;

		json_array_foreach(shards, k, sh) {
			uint64_t off, len, id;
			bool known = false;
			if ((size_t)json_integer_value(json_object_get(sh, "unit")) != i)
				continue;
			n_shards++;
			off = (uint64_t)json_integer_value(json_object_get(sh, "offset"));
			len = (uint64_t)json_integer_value(json_object_get(sh, "length"));
			id = (uint64_t)json_integer_value(json_object_get(sh, "server"));
			for (size_t q = 0; q < n_ids; q++)
				known |= ids[q] == id;
			assert_true(known);
			assert_int_equal(json_integer_value(json_object_get(sh, "bytes")),
					 len * dsz);
			assert_true(off + len <= numel);
			for (uint64_t e = off; e < off + len; e++)
				seen[e]++;
		}
		for (uint64_t e = 0; e < numel; e++)
			if (seen[e] != 1)
				fail_msg("unit %zu element %llu is owned %d times", i,
					 (unsigned long long)e, seen[e]);
		/* striped over all servers unless the unit is too small */
		assert_int_equal(n_shards, numel > 1000 ? NSERV : n_shards);
		free(seen);
	}
	json_decref(p);
}

/* Fails, naming the first line that differs, unless a == b. */
static void same_state(const char *a, const char *b)
{
	size_t line = 1;
	const char *la = a, *lb = b;

	if (!strcmp(a, b))
		return;
	for (; *a && *a == *b; a++, b++)
		if (*a == '\n') {
			line++;
			la = a + 1;
			lb = b + 1;
		}
	fail_msg("the state differs at line %zu: '%.*s' then '%.*s'", line,
		 (int)strcspn(la, "\n"), la, (int)strcspn(lb, "\n"), lb);
}

/* The job's record as the coordinator has it, for before/after comparisons. */
static char *job_snapshot(void)
{
	char *out, *err, *pl, *tr;
	int rc = ctl(&out, &err, "placement", "demo", "--json", NULL);
	assert_int_equal(rc, 0);
	pl = out;
	free(err);
	assert_int_equal(ctl(&out, &err, "trainers", "demo", "--json", NULL), 0);
	tr = out;
	free(err);
	assert_int_equal(ctl(&out, &err, "jobs", "--json", NULL, NULL), 0);
	free(err);
	char *all;
	assert_true(asprintf(&all, "%s%s%s", pl, tr, out) > 0);
	free(pl);
	free(tr);
	free(out);
	return all;
}

static void spec_like(struct zs_job_spec *d, const struct zs_job_spec *s,
		      const char *name)
{
	*d = *s;
	assert_int_equal(zs_layout_copy(&d->layout, &s->layout), ZS_OK);
	snprintf(d->name, sizeof d->name, "%s", name);
}

static void test_bad_rpcs_change_nothing(void **st)
{
	struct zs_coord_client *c;
	struct zs_error err = {0};
	struct zs_job job, j2;
	struct zs_join_req r = {0};
	struct zs_job_spec spec;
	struct zs_server_info me = {0};
	uint64_t id;
	uint32_t lease;
	char *before, *after;
	const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff};

	(void)st;
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, "demo", &job, NULL), ZS_OK);

	/* a valid join first, so that "joined twice" has something to hit */
	strcpy(r.job, "demo");
	strcpy(r.host, "test-host");
	r.rank = 1;
	assert_int_equal(zs_layout_copy(&r.layout, &job.spec.layout), ZS_OK);
	assert_int_equal(zs_coord_join(c, &r, &j2, &err), ZS_OK);
	assert_int_equal(j2.n_trainers, 0); /* a join's reply: the job, not who joined */
	assert_true(j2.placement.n_shards > 0);
	zs_job_release(&j2);
	assert_int_equal(zs_coord_get_job(c, "demo", &j2, &err), ZS_OK);
	assert_int_equal(j2.n_trainers, 1);
	assert_int_equal(j2.trainers[0].rank, 1);
	zs_job_release(&j2);
	before = job_snapshot();

	assert_int_equal(zs_coord_join(c, &r, &j2, &err), ZS_EEXIST);
	assert_non_null(strstr(err.msg, "rank 1 already joined job 'demo'"));
	r.rank = 2;
	assert_int_equal(zs_coord_join(c, &r, &j2, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "rank 2 is out of range"));
	r.rank = 0;
	r.layout.units[1].tensors[0].shape[0] = 63;
	assert_int_equal(zs_coord_join(c, &r, &j2, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "layout differs"));
	r.layout.units[1].tensors[0].shape[0] = 64;
	{ /* the digest a trainer sends instead: checked, refused on a mismatch */
		struct zs_layout keep = r.layout;
		r.layout = (struct zs_layout){0};
		r.layout_digest = zs_layout_digest(&job.spec.layout) ^ 1;
		assert_int_equal(zs_coord_join(c, &r, &j2, &err), ZS_EINVAL);
		assert_non_null(strstr(err.msg, "layout differs from job 'demo' (digest"));
		r.layout = keep;
		r.layout_digest = 0;
	}
	strcpy(r.job, "nope");
	assert_int_equal(zs_coord_join(c, &r, &j2, &err), ZS_ENOTFOUND);
	strcpy(r.job, "demo");
	assert_int_equal(zs_coord_leave(c, "demo", 0, 0, false, 0, &j2, &err), ZS_ENOTFOUND);
	assert_non_null(strstr(err.msg, "rank 0 has not joined"));
	assert_int_equal(zs_coord_raw(c, ZS_M_JOIN, junk, sizeof junk, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "malformed"));
	assert_int_equal(zs_coord_raw(c, "/zshard.Coordinator/NoSuch", NULL, 0, &err),
			 ZS_EPROTO);
	assert_int_equal(zs_coord_set_stage(c, "demo", 0, &j2, &err), ZS_EINVAL);

	/* invalid specs sent straight to the coordinator, past client checks */
	spec_like(&spec, &job.spec, "bad-stage");
	spec.stage = 7;
	assert_int_equal(zs_coord_create_job(c, &spec, &j2, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "stage 7"));
	spec.stage = 1;
	strcpy(spec.name, "way/too");
	assert_int_equal(zs_coord_create_job(c, &spec, &j2, &err), ZS_EINVAL);
	/* too large for 3 x 64 MiB */
	strcpy(spec.name, "huge");
	spec.layout.units[3].tensors[0].shape[0] = 100000;
	assert_int_equal(zs_coord_create_job(c, &spec, &j2, &err), ZS_ENOSPC);
	assert_non_null(strstr(err.msg, "cannot hold its share of job 'huge'"));
	zs_job_spec_release(&spec);

	/* a server registration with no real port, or no capacity */
	strcpy(me.addr, "127.0.0.1:0");
	me.capacity = 1;
	assert_int_equal(zs_coord_register(c, &me, &id, &lease, &err), ZS_EINVAL);
	strcpy(me.addr, "127.0.0.1:9");
	me.capacity = 0;
	assert_int_equal(zs_coord_register(c, &me, &id, &lease, &err), ZS_EINVAL);
	assert_int_equal(zs_coord_heartbeat(c, 999, "", &lease, &id, &id, &err), ZS_ENOTFOUND);
	/* a norm report for a job that does not clip, or for a shard elsewhere */
	{
		struct zs_shard_norm nv = {0, 0, 1.0};
		struct zs_norm_report nr = {.job = "demo", .step = 0, .server_id = 12345,
					    .n = 1, .norms = &nv};
		double total;
		assert_int_equal(zs_coord_report_norm(c, &nr, 2000, &total, &err), ZS_ESTATE);
		assert_non_null(strstr(err.msg, "does not clip"));
		strcpy(nr.job, "nope");
		assert_int_equal(zs_coord_report_norm(c, &nr, 2000, &total, &err), ZS_ENOTFOUND);
	}

	after = job_snapshot();
	same_state(before, after);
	assert_int_equal(count_up(), NSERV);
	free(before);
	free(after);

	/* an operator evicts the rank a dead trainer left joined */
	{
		char *out, *errs;
		assert_int_equal(ctl(&out, &errs, "trainers", "evict", "demo", "x"), 2);
		free(out);
		free(errs);
		assert_int_equal(ctl(&out, &errs, "trainers", "evict", "demo", "1"), 0);
		assert_non_null(strstr(out, "rank 1 evicted"));
		free(out);
		free(errs);
		assert_int_equal(zs_coord_get_job(c, "demo", &j2, NULL), ZS_OK);
		assert_int_equal(j2.n_trainers, 0);
		zs_job_release(&j2);
		assert_int_equal(ctl(&out, &errs, "trainers", "evict", "demo", "1"), 1);
		assert_non_null(strstr(errs, "rank 1 has not joined"));
		free(out);
		free(errs);
		r.rank = 1; /* and the rank can join again */
		assert_int_equal(zs_coord_join(c, &r, &j2, &err), ZS_OK);
		zs_job_release(&j2);
		assert_int_equal(zs_coord_leave(c, "demo", 1, 0, false, 0, &j2, &err), ZS_OK);
		zs_job_release(&j2);
	}
	zs_layout_release(&r.layout);
	zs_job_release(&job);
	zs_coord_close(c);
}

/* libzshard's zs_create_job: a job from its JSON spec; a taken name, a bad
 * spec and a typo are refused with the reason, and create nothing. */
static void test_create_job_from_json(void **st)
{
	static const char spec[] =
		"{\"name\": \"fromjson\", \"stage\": 2, \"world_size\": 2,"
		" \"optimizer\": {\"kind\": \"sgd\", \"lr\": 0.1},"
		" \"units\": [{\"name\": \"a\", \"tensors\": [{\"name\": \"w\", \"shape\": [64, 8]}]}]}";
	char err[256];
	struct zs_coord_client *c;
	struct zs_job j;

	(void)st;
	assert_int_equal(zs_create_job(C.addr, spec, 5000, err, sizeof err), ZS_OK);
	assert_string_equal(err, "");
	assert_int_equal(zs_coord_open(C.addr, 5000, 0, &c, NULL), ZS_OK);
	assert_int_equal(zs_coord_get_job(c, "fromjson", &j, NULL), ZS_OK);
	assert_int_equal(j.spec.stage, 2);
	assert_int_equal(j.spec.layout.units[0].numel, 512);
	zs_job_release(&j);
	assert_int_equal(zs_create_job(C.addr, spec, 5000, err, sizeof err), ZS_EEXIST);
	assert_non_null(strstr(err, "already exists"));
	assert_int_equal(zs_create_job(C.addr, "{\"name\": \"x\", \"stag\": 2}", 5000, err,
				       sizeof err), ZS_EINVAL);
	assert_non_null(strstr(err, "stag"));
	assert_int_equal(zs_create_job(C.addr, "{not json", 5000, err, sizeof err), ZS_EINVAL);
	assert_int_equal(zs_create_job(C.addr, NULL, 5000, err, sizeof err), ZS_EINVAL);
	assert_int_equal(zs_coord_get_job(c, "x", &j, NULL), ZS_ENOTFOUND);
	assert_int_equal(zs_coord_delete_job(c, "fromjson", &j, NULL), ZS_OK);
	zs_job_release(&j);
	zs_coord_close(c);
}

static void test_stage_change(void **st)
{
	char *out, *err;
	(void)st;
	assert_int_equal(ctl(&out, &err, "stage", "demo", "2", NULL), 0);
	assert_string_equal(out, "2\n");
	free(out);
	free(err);
	assert_int_equal(ctl(&out, &err, "stage", "demo", NULL, NULL), 0);
	assert_string_equal(out, "2\n");
	free(out);
	free(err);
}

static void test_sigkill_restart_keeps_state(void **st)
{
	char *before = job_snapshot(), *after, pf[1024], addr[64];
	char *out, *err;
	int n = NSERV;

	(void)st;
	assert_int_equal(h_stop(C.coord, SIGKILL, 5000), 128 + SIGKILL);
	snprintf(pf, sizeof pf, "%s", path("coordinator.addr"));
	C.coord = start_coord(C.addr, path("coordinator"), pf);
	assert_true(h_wait_file(pf, 10000, addr, sizeof addr));
	assert_string_equal(addr, C.addr);
	after = job_snapshot();
	same_state(before, after);
	assert_int_equal(ctl(&out, &err, "stage", "demo", NULL, NULL), 0);
	assert_string_equal(out, "2\n");
	free(out);
	free(err);
	/* servers find the restarted coordinator and renew their leases */
	assert_true(h_poll(all_up, &n, 10000));
	free(before);
	free(after);
}

static bool is_down(void *arg) { return !strcmp(state_of(*(uint64_t *)arg), "down"); }
static bool is_up(void *arg) { return !strcmp(state_of(*(uint64_t *)arg), "up"); }

static void test_lease_lapse_and_return(void **st)
{
	struct zs_server_status s;
	uint64_t id;
	int n = NSERV;

	(void)st;
	assert_int_equal(zs_server_status_query(C.srv_addr[1], 5000, &s, NULL), ZS_OK);
	id = s.id;
	assert_true(s.registered);
	assert_int_equal(s.n_assignments, 1); /* job demo */
	zs_server_status_release(&s);

	assert_int_equal(h_stop(C.srv[1], SIGTERM, 5000), 0);
	assert_true(h_poll(is_down, &id, 5000));
	assert_int_equal(count_up(), NSERV - 1);

	C.srv[1] = start_server(1, C.addr);
	assert_true(h_wait_file(path("server-1.addr"), 10000, C.srv_addr[1], 64));
	assert_true(h_poll(is_up, &id, 10000)); /* same id: kept in its data dir */
	assert_true(h_poll(all_up, &n, 5000));
}

static void test_server_waits_for_coordinator(void **st)
{
	char addr[64], data[1024], pf[1024], log[1024], caddr[64];
	pid_t srv, coord;
	int n = 1;
	char saved[64];

	(void)st;
	snprintf(addr, sizeof addr, "127.0.0.1:%d", h_free_port());
	snprintf(data, sizeof data, "%s", path("early-server"));
	snprintf(pf, sizeof pf, "%s", path("early-server.addr"));
	snprintf(log, sizeof log, "%s", path("early-server.log"));
	char *argv[] = {(char *)h_bin("zshard-server"), "--coordinator", addr, "--data-dir",
			data, "--capacity", "1G", "--port-file", pf, NULL};
	srv = h_spawn(argv, log);
	usleep(1500 * 1000);
	assert_true(h_alive(srv));
	snprintf(pf, sizeof pf, "%s", path("late-coordinator.addr"));
	coord = start_coord(addr, path("late-coordinator"), pf);
	assert_true(h_wait_file(pf, 10000, caddr, sizeof caddr));
	memcpy(saved, C.addr, sizeof saved);
	memcpy(C.addr, addr, sizeof C.addr);
	assert_true(h_poll(all_up, &n, 10000));
	memcpy(C.addr, saved, sizeof C.addr);
	assert_int_equal(h_stop(srv, SIGTERM, 5000), 0);
	assert_int_equal(h_stop(coord, SIGTERM, 5000), 0);
}

static void test_sigterm_is_clean(void **st)
{
	(void)st;
	for (int i = 0; i < NSERV; i++) {
		assert_int_equal(h_stop(C.srv[i], SIGTERM, 5000), 0);
		C.srv[i] = -1;
	}
	assert_int_equal(h_stop(C.coord, SIGTERM, 5000), 0);
	C.coord = -1;
}

static void test_local_launcher(void **st)
{
	const char *root = getenv("ZSHARD_ROOT");
	char launcher[1024], dir[1024], *out, *err;
	char pids[4][32];
	int n = 3;

	(void)st;
	snprintf(launcher, sizeof launcher, "%s/deploy/local/zshard-local", root ? root : ".");
	snprintf(dir, sizeof dir, "%s", path("local"));
	char *start[] = {launcher, "start", "--servers", "3", "--dir", dir,
			 "--server-opt", "--step-timeout-ms=5000", NULL};
	assert_int_equal(h_run(start, &out, &err), 0);
	out[strcspn(out, "\n")] = '\0';
	assert_true(!strncmp(out, "127.0.0.1:", 10));
	memcpy(C.addr, out, strlen(out) + 1);
	free(out);
	free(err);
	assert_true(h_poll(all_up, &n, 5000));
	for (int i = 0; i < 4; i++) {
		char f[1100];
		snprintf(f, sizeof f, i ? "%s/run/server-%d.pid" : "%s/run/coordinator.pid", dir, i - 1);
		assert_true(h_wait_file(f, 100, pids[i], sizeof pids[i]));
	}
	{ /* the server option reached the servers */
		char f[64], cmdline[4096] = "";
		FILE *fp;
		size_t k;
		snprintf(f, sizeof f, "/proc/%s/cmdline", pids[1]);
		assert_non_null(fp = fopen(f, "r"));
		k = fread(cmdline, 1, sizeof cmdline - 1, fp);
		fclose(fp);
		for (size_t q = 0; q < k; q++)
			if (!cmdline[q])
				cmdline[q] = ' ';
		assert_non_null(strstr(cmdline, "--step-timeout-ms=5000"));
	}
	/* a second start on a running cluster is refused; nothing changes */
	assert_int_equal(h_run(start, &out, &err), 1);
	assert_non_null(strstr(err, "already runs"));
	free(out);
	free(err);
	/* one server and the coordinator restart in place: same address */
	char *rs[] = {launcher, "restart", "server-1", "--dir", dir, NULL};
	char *rc[] = {launcher, "restart", "coordinator", "--dir", dir, NULL};
	assert_int_equal(h_run(rs, &out, &err), 0);
	free(out);
	free(err);
	assert_int_equal(kill(atoi(pids[2]), 0), -1); /* the old server-1 is gone */
	assert_int_equal(h_run(rc, &out, &err), 0);
	out[strcspn(out, "\n")] = '\0';
	assert_string_equal(out, C.addr);
	free(out);
	free(err);
	assert_true(h_poll(all_up, &n, 5000));
	char *bad[] = {launcher, "restart", "server-7", "--dir", dir, NULL};
	assert_int_equal(h_run(bad, &out, &err), 1);
	free(out);
	free(err);
	{ /* every daemon it started, the restarted ones too, stops */
		char f[1100];
		snprintf(f, sizeof f, "%s/run/server-1.pid", dir);
		assert_true(h_wait_file(f, 100, pids[2], sizeof pids[2]));
		snprintf(f, sizeof f, "%s/run/coordinator.pid", dir);
		assert_true(h_wait_file(f, 100, pids[0], sizeof pids[0]));
	}
	char *stop[] = {launcher, "stop", "--dir", dir, NULL};
	assert_int_equal(h_run(stop, &out, &err), 0);
	free(out);
	free(err);
	for (int i = 0; i < 4; i++)
		if (kill(atoi(pids[i]), 0) == 0)
			fail_msg("pid %s still runs after zshard-local stop", pids[i]);
	/* started again with no options: as before, on the same address */
	char *again[] = {launcher, "start", "--dir", dir, NULL};
	assert_int_equal(h_run(again, &out, &err), 0);
	out[strcspn(out, "\n")] = '\0';
	assert_string_equal(out, C.addr);
	free(out);
	free(err);
	assert_true(h_poll(all_up, &n, 5000));
	assert_int_equal(h_run(stop, &out, &err), 0);
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_three_servers_up),
		cmocka_unit_test(test_create_job_covers_every_byte),
		cmocka_unit_test(test_cli_errors),
		cmocka_unit_test(test_plan_and_rdma_check),
		cmocka_unit_test(test_bad_rpcs_change_nothing),
		cmocka_unit_test(test_stage_change),
		cmocka_unit_test(test_create_job_from_json),
		cmocka_unit_test(test_sigkill_restart_keeps_state),
		cmocka_unit_test(test_lease_lapse_and_return),
		cmocka_unit_test(test_server_waits_for_coordinator),
		cmocka_unit_test(test_sigterm_is_clean),
		cmocka_unit_test(test_local_launcher),
	};
	return cmocka_run_group_tests_name("cluster", tests, group_setup, group_teardown);
}
