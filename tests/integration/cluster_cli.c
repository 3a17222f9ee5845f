/*
 * cluster_cli.c - zshardctl against test_cluster's cluster: every usage
 * error one clear line and exit status 2, each command's flags from its
 * table (values checked in either form), --help for every command and
 * program, plan and the rdma check.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"
#include "tests/integration/cluster_common.h"

static void expect_ctl(int rc_want, const char *msg, const char *a1, const char *a2,
		       const char *a3, const char *a4)
{
	char *out, *err;
	int rc = ctl(&out, &err, a1, a2, a3, a4);
	if (rc != rc_want || !strstr(err, msg))
		fail_msg("zshardctl %s %s: rc %d (want %d), stderr '%s' (want '%s')", a1,
			 a2 ? a2 : "", rc, rc_want, err, msg);
	/* one clear line, nothing on stdout */
	assert_int_equal(strlen(out), 0);
	assert_non_null(strchr(err, '\n'));
	assert_null(strchr(strchr(err, '\n') + 1, '\n'));
	free(out);
	free(err);
}

void test_cli_errors(void **st)
{
	char bad[1024], unreachable[64];
	char *argv[6], *out, *err;
	FILE *f;

	(void)st;
	expect_ctl(1, "job 'demo' already exists", "job", "create", path("job.json"), NULL);
	expect_ctl(1, "no job 'nope'", "placement", "nope", NULL, NULL);
	expect_ctl(2, "stage must be 1, 2 or 3", "stage", "demo", "4", NULL);
	expect_ctl(1, "no job 'nope'", "stage", "nope", "2", NULL);
	expect_ctl(2, "unknown command 'frobnicate'", "frobnicate", NULL, NULL, NULL);
	expect_ctl(2, "unknown option '--bogus'", "servers", "--bogus", NULL, NULL);
	/* each command's flags from its table (cli/args.c): values checked as
	 * the daemons check theirs, in either form, before anything is asked */
	expect_ctl(2, "--wait: ", "checkpoint", "create", "demo", "--wait=86400001");
	expect_ctl(2, "--step: ", "checkpoint", "create", "demo", "--step=x");
	expect_ctl(2, "--out wants a value", "export", "demo", "--out", NULL);
	expect_ctl(2, "--json takes no value", "jobs", "--json=yes", NULL, NULL);
	expect_ctl(2, "--server: ", "status", "--server", "no-port-here", NULL);
	expect_ctl(2, "--lock: ", "rdma", "--lock", "1X", NULL);
	expect_ctl(2, "unexpected argument 'extra'", "gpu", "extra", NULL, NULL);
	expect_ctl(2, "--keep-checkpoints goes with 'delete NAME'", "job", "show", "demo",
		   "--keep-checkpoints");
	{ /* --json after --server counts (it was read after the query) */
		json_t *k;
		char *o, *e;
		assert_int_equal(ctl(&o, &e, "status", "--server", C.srv_addr[0], "--json"), 0);
		k = json_loads(o, 0, NULL);
		if (!k || !json_is_integer(json_object_get(k, "id")))
			fail_msg("status --server ADDR --json printed '%s'", o);
		json_decref(k);
		free(o);
		free(e);
	}
	snprintf(bad, sizeof bad, "%s", path("bad.json"));
	f = fopen(bad, "w");
	fputs("{\"name\": \"x\", \"stage\": 3, \"world_size\": 1, \"optimizer\": {\"kind\": \"sgd\", \"lr\": 0.1},"
	      " \"units\": [{\"name\": \"u\", \"tensors\": [{\"name\": \"w\", \"shape\": [0]}]}]}", f);
	fclose(f);
	expect_ctl(1, "dimension 0 is zero", "job", "create", bad, NULL);

	snprintf(unreachable, sizeof unreachable, "127.0.0.1:%d", h_free_port());
	argv[0] = (char *)h_bin("zshardctl");
	argv[1] = "--coordinator";
	argv[2] = unreachable;
	argv[3] = "servers";
	argv[4] = NULL;
	assert_int_equal(h_run(argv, &out, &err), 1);
	assert_non_null(strstr(err, "cannot reach"));
	assert_non_null(strstr(err, unreachable));
	free(out);
	free(err);

	/* plan: bad input is a usage error that names it; stats of no job */
	expect_ctl(2, "--params 'x' is not a count", "plan", "--world=2", "--params", "x");
	expect_ctl(2, "give --params N or --job NAME", "plan", "--world", "2", NULL);
	expect_ctl(2, "--stage", "plan", "--params", "1B", "--stage");
	expect_ctl(1, "no job 'nope'", "plan", "--job", "nope", NULL);
	expect_ctl(1, "no job 'nope'", "stats", "nope", NULL, NULL);

	/* --help for every command */
	static const char *const cmds[] = {"servers", "jobs", "job", "placement", "stage",
					   "trainers", "rebalance", "status", "stats", "checkpoint",
					   "plan", "rdma", "export", "import", "scrape-targets",
					   "config", "gpu", "env"};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		assert_int_equal(ctl(&out, &err, cmds[i], "--help", NULL, NULL), 0);
		assert_non_null(strstr(out, "usage: zshardctl"));
		free(out);
		free(err);
	}
	/* and for every program, the local launcher's commands included (it
	 * said "--dir is required") */
	{
		const char *root = getenv("ZSHARD_ROOT");
		char launcher[1024];
		static const char *const progs[] = {"zshard-coordinator", "zshard-server", "zshardctl",
						    "charlm"};
		snprintf(launcher, sizeof launcher, "%s/deploy/local/zshard-local",
			 root ? root : ".");
		for (size_t i = 0; i < sizeof progs / sizeof progs[0] + 3; i++) {
			char bin[1024];
			const char *sub = i < 4 ? NULL : i == 4 ? "--help" : i == 5 ? "start" : "stop";
			snprintf(bin, sizeof bin, "%s", i < 4 ? h_bin(progs[i]) : launcher);
			char *hargv[] = {bin, (char *)(sub ? sub : "--help"), sub && i > 4 ? "--help" : NULL,
					NULL};
			int rc = h_run(hargv, &out, &err);
			if (rc != 0 || (!strstr(out, "usage") && !strstr(out, "zshard-local")))
				fail_msg("%s %s --help: exit %d, '%s' '%s'", bin, sub ? sub : "", rc, out,
					 err);
			free(out);
			free(err);
		}
	}
}

/* plan needs no coordinator; the paper's Figure 1 in its JSON, and a job's
 * own layout through the coordinator. rdma says plainly what is missing. */
void test_plan_and_rdma_check(void **st)
{
	char *argv[12] = {(char *)h_bin("zshardctl"), "plan", "--params", "7.5B", "--world",
			  "64", "--stage", "1", "--json", NULL};
	char *out, *err;
	json_t *j, *z;

	(void)st;
	assert_int_equal(h_run(argv, &out, &err), 0);
	j = json_loads(out, 0, NULL);
	assert_non_null(j);
	z = json_object_get(j, "zero_paper_per_gpu");
	assert_true(json_real_value(json_object_get(z, "baseline")) == 120e9);
	assert_true(fabs(json_real_value(json_object_get(z, "stage1")) - 31.4e9) < 0.05e9);
	/* stage 1 in zshard: the replica and every gradient on the trainer */
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "trainer"),
							    "total_bytes")),
			 4 * 7500000000LL);
	json_decref(j);
	free(out);
	free(err);
	/* text, with the fit against given memory */
	argv[7] = "3";
	argv[8] = "--gpu-mem";
	argv[9] = "80G";
	argv[10] = NULL;
	assert_int_equal(h_run(argv, &out, &err), 0);
	assert_non_null(strstr(out, "stage 3 (P_os+g+p)"));
	assert_non_null(strstr(out, "GPU 80.00 GiB: fits"));
	free(out);
	free(err);
	/* a job's own units */
	assert_int_equal(ctl(&out, &err, "plan", "--job", "demo", "--json"), 0);
	j = json_loads(out, 0, NULL);
	assert_non_null(j);
	assert_true(json_integer_value(json_object_get(j, "units")) >= 1);
	assert_int_equal(json_integer_value(json_object_get(j, "servers")), 3);
	json_decref(j);
	free(out);
	free(err);
	/* rdma: exit 0 where it works, else 1 and the reason */
	argv[1] = "rdma";
	argv[2] = NULL;
	{
		int rc = h_run(argv, &out, &err);
		assert_true(rc == 0 || rc == 1);
		assert_non_null(strstr(out, rc ? "rdma cannot work on this host: " : "rdma works"));
		free(out);
		free(err);
	}
}
