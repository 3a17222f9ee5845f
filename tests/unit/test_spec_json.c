/* test_spec_json.c - job specs from JSON, and what validation refuses. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "tests/unit/fixtures.h"
#include "model/spec_json.h"

static const char *good =
	"{\"name\": \"demo\", \"stage\": 3, \"world_size\": 2, \"compute_dtype\": \"bf16\","
	" \"optimizer\": {\"kind\": \"adamw\", \"lr\": 0.001, \"weight_decay\": 0.1},"
	" \"units\": [{\"name\": \"embed\", \"dtype\": \"f32\", \"tensors\":"
	"   [{\"name\": \"wte\", \"shape\": [256, 64]}]},"
	"  {\"name\": \"h0\", \"tensors\": [{\"name\": \"w\", \"shape\": [64, 64]},"
	"   {\"name\": \"b\", \"shape\": [64]}, {\"name\": \"g\", \"shape\": []}]}]}";

static void test_good(void **st)
{
	struct zs_job_spec s;

	(void)st;
	assert_int_equal(zs_spec_from_json(good, &s, NULL), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&s, NULL), ZS_OK);
	assert_string_equal(s.name, "demo");
	assert_int_equal(s.stage, 3);
	assert_int_equal(s.world_size, 2);
	assert_int_equal(s.compute_dtype, ZS_BF16);
	assert_int_equal(s.optim.kind, ZS_ADAMW);
	assert_true(s.optim.beta1 == 0.9 && s.optim.beta2 == 0.999 && s.optim.eps == 1e-8);
	assert_int_equal(s.align_bytes, 256);
	assert_int_equal(s.layout.n_units, 2);
	assert_int_equal(s.layout.units[0].dtype, ZS_F32);
	assert_int_equal(s.layout.units[1].dtype, ZS_BF16); /* from the job */
	assert_int_equal(s.layout.units[1].numel, 64 * 64 + 64 + 1);
	assert_int_equal(s.layout.units[1].tensors[2].offset, 64 * 64 + 64);
	assert_true(s.optim.steps_taken == 0);
	zs_job_spec_release(&s);
	{ /* an imported optimizer state's steps */
		char buf[2048];
		const char *p = strstr(good, "\"weight_decay\": 0.1");
		assert_non_null(p);
		snprintf(buf, sizeof buf, "%.*s\"steps_taken\": 7, %s", (int)(p - good), good, p);
		assert_int_equal(zs_spec_from_json(buf, &s, NULL), ZS_OK);
		assert_true(s.optim.steps_taken == 7);
		zs_job_spec_release(&s);
	}
}

/* Replaces the first occurrence of from with to in good, parses, expects failure. */
static void expect_parse_error(const char *from, const char *to, const char *msg)
{
	char buf[2048];
	const char *p = strstr(good, from);
	struct zs_error err = {0};
	struct zs_job_spec s;
	enum zs_status st;

	assert_non_null(p);
	snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, to, p + strlen(from));
	st = zs_spec_from_json(buf, &s, &err);
	if (st == ZS_OK) {
		st = zs_job_spec_normalize(&s, &err);
		zs_job_spec_release(&s);
	}
	assert_int_equal(st, ZS_EINVAL);
	if (!strstr(err.msg, msg))
		fail_msg("error '%s' does not mention '%s'", err.msg, msg);
}

static void test_refusals(void **st)
{
	(void)st;
	expect_parse_error("\"stage\": 3", "\"stgae\": 3", "unknown key 'stgae'");
	expect_parse_error("\"stage\": 3", "\"stage\": 4", "stage");
	/* the range said is the one taken (it said [0, 3], then refused 0) */
	expect_parse_error("\"stage\": 3", "\"stage\": 0", "'stage' must be an integer in [1, 3]");
	expect_parse_error("\"stage\": 3,", "", "stage is missing (1, 2 or 3)");
	expect_parse_error("\"world_size\": 2", "\"world_size\": 0",
			   "'world_size' must be an integer in [1, 65536]");
	expect_parse_error("\"bf16\"", "\"int4\"", "unknown dtype 'int4'");
	expect_parse_error("\"adamw\"", "\"lamb\"", "unknown optimizer");
	expect_parse_error("\"lr\": 0.001", "\"lr\": -1", "learning rate");
	expect_parse_error("[256, 64]", "[256, 0]", "dimension 1 is zero");
	expect_parse_error("[256, 64]", "[256, -3]", "integers >= 0");
	expect_parse_error("[256, 64]", "[1,1,1,1,1,1,1,1,1]", "more than 8 dimensions");
	expect_parse_error("\"name\": \"b\"", "\"name\": \"w\"", "tensor name 'w' appears twice");
	expect_parse_error("\"name\": \"h0\"", "\"name\": \"embed\"", "unit name 'embed' appears twice");
	expect_parse_error("\"name\": \"demo\"", "\"name\": \"../etc\"", "job name");
	expect_parse_error("\"name\": \"demo\"", "\"name\": 7", "must be a string");
	expect_parse_error("\"units\": [", "\"units\": [], \"x\": [", "unknown key 'x'");
	expect_parse_error("{\"name\": \"embed\"", "{\"name\": \"\"", "unit 0: name is empty");
	expect_parse_error("\"stage\": 3,", "\"stage\": 3,,", "line 1");
	expect_parse_error("\"compute_dtype\"", "\"align_bytes\": 100, \"compute_dtype\"", "align_bytes 100");
	expect_parse_error("\"weight_decay\": 0.1", "\"momentum\": 1.5", "momentum");
	expect_parse_error("\"weight_decay\": 0.1", "\"steps_taken\": -2", "'steps_taken' must be an integer");
	expect_parse_error("\"weight_decay\": 0.1", "\"steps_taken\": 1.5", "'steps_taken' must be an integer");
	/* collective jobs and their rank hosts */
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"collective\": \"mpi\",",
			   "collective 'mpi' is not nccl or none");
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"rank_hosts\": [\"a\", 7],",
			   "rank_hosts[1] is not a host name");
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"rank_hosts\": [\"a\", \"b\"],",
			   "is for collective jobs");
	expect_parse_error("\"stage\": 3,",
			   "\"stage\": 3, \"collective\": \"nccl\", \"rank_hosts\": [\"a\"],",
			   "names 1 hosts for 2 ranks");
	/* a lost rank not replaced: wait, shrink or rollback, within a bound */
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"rank_lost\": \"grow\",",
			   "rank_lost 'grow' is not wait, shrink or rollback");
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"rank_wait_ms\": -5,", "rank_wait_ms");
	{
		char buf[2048];
		const char *p = strstr(good, "\"stage\": 3,");
		struct zs_error err = {0};
		struct zs_job_spec s;
		snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good,
			 "\"stage\": 3, \"rank_lost\": \"shrink\", \"rank_wait_ms\": 2000,",
			 p + strlen("\"stage\": 3,"));
		assert_int_equal(zs_spec_from_json(buf, &s, &err), ZS_OK);
		assert_int_equal(s.rank_lost, ZS_LOST_SHRINK);
		assert_int_equal(s.rank_wait_ms, 2000);
		assert_string_equal(zs_rank_lost_name(s.rank_lost), "shrink");
		zs_job_spec_release(&s);
	}
	/* data_tls: true or false, "on" or "off" */
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"data_tls\": \"yes\",",
			   "data_tls is true or false");
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"data_tls\": 1,",
			   "data_tls is true or false");
	for (int k = 0; k < 4; k++) {
		static const char *const v[] = {"true", "\"on\"", "false", "\"off\""};
		char buf[2048], field[64];
		const char *p = strstr(good, "\"stage\": 3,");
		struct zs_error err = {0};
		struct zs_job_spec s;
		snprintf(field, sizeof field, "\"stage\": 3, \"data_tls\": %s,", v[k]);
		snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - good), good, field,
			 p + strlen("\"stage\": 3,"));
		assert_int_equal(zs_spec_from_json(buf, &s, &err), ZS_OK);
		assert_int_equal(s.data_tls, k < 2);
		zs_job_spec_release(&s);
	}
	/* readers: an object of pins (0..16) and idle_ms */
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"readers\": 2,", "readers is an object");
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"readers\": {\"pins\": 17},", "pins");
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"readers\": {\"pin\": 1},", "pin");
	{
		char buf[2048];
		const char *p = strstr(good, "\"stage\": 3,");
		struct zs_job_spec s;
		snprintf(buf, sizeof buf, "%.*s\"stage\": 3, \"readers\": {\"pins\": 3, \"idle_ms\": 500},%s",
			 (int)(p - good), good, p + strlen("\"stage\": 3,"));
		assert_int_equal(zs_spec_from_json(buf, &s, NULL), ZS_OK);
		assert_int_equal(s.reader_pins, 3);
		assert_int_equal(s.reader_idle_ms, 500);
		zs_job_spec_release(&s);
	}
	/* replicas: 1 to 3, not with a collective job */
	expect_parse_error("\"stage\": 3,", "\"stage\": 3, \"replicas\": 4,", "replicas");
	{ /* an imported optimizer state reaches one copy: refused with replicas */
		char buf[2048];
		const char *p = strstr(good, "\"weight_decay\": 0.1");
		struct zs_error err = {0};
		struct zs_job_spec s;
		assert_non_null(p);
		snprintf(buf, sizeof buf, "%.*s\"steps_taken\": 2, %s", (int)(p - good), good, p);
		assert_int_equal(zs_spec_from_json(buf, &s, NULL), ZS_OK);
		s.replicas = 2;
		assert_int_equal(zs_job_spec_normalize(&s, &err), ZS_EINVAL);
		assert_non_null(strstr(err.msg, "steps_taken 2"));
		zs_job_spec_release(&s);
	}
	expect_parse_error("\"stage\": 3,",
			   "\"stage\": 3, \"collective\": \"nccl\", \"replicas\": 2,",
			   "a collective job has one copy");
}

/* A frozen tensor: parsed, part of the layout (another frozen set is
 * another layout) and of its digest, which stays what it was for a layout
 * with none frozen (checkpoints name the digest). */
static void test_frozen(void **st)
{
	struct zs_job_spec s, t;
	uint64_t before;
	char why[256];
	char *text = strdup(good), *at = strstr(text, "[256, 64]}");
	char buf[4096];

	(void)st;
	assert_non_null(at);
	snprintf(buf, sizeof buf, "%.*s[256, 64], \"frozen\": true}%s", (int)(at - text), text,
		 at + strlen("[256, 64]}"));
	assert_int_equal(zs_spec_from_json(good, &s, NULL), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&s, NULL), ZS_OK);
	assert_int_equal(zs_spec_from_json(buf, &t, NULL), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&t, NULL), ZS_OK);
	assert_false(s.layout.units[0].tensors[0].frozen);
	assert_true(t.layout.units[0].tensors[0].frozen);
	assert_false(zs_layout_equal(&s.layout, &t.layout, why, sizeof why));
	assert_non_null(strstr(why, "tensor 'wte' is trained, the job's is frozen"));
	before = zs_layout_digest(&s.layout);
	assert_true(before != zs_layout_digest(&t.layout));
	s.layout.units[0].tensors[0].frozen = true;
	assert_true(zs_layout_equal(&s.layout, &t.layout, NULL, 0));
	assert_true(zs_layout_digest(&s.layout) == zs_layout_digest(&t.layout));
	zs_job_spec_release(&s);
	zs_job_spec_release(&t);
	free(text);
}

/* Aliases: a tensor's other names, parsed onto the layout, copied, never
 * part of its identity; one that repeats or is another tensor's name is
 * refused. */
static void test_aliases(void **st)
{
	struct zs_job_spec s, t;
	struct zs_layout c;
	struct zs_error err = {0};
	char buf[4096], *text = strdup(good), *at = strstr(text, "[256, 64]}");

	(void)st;
	snprintf(buf, sizeof buf, "%.*s[256, 64], \"aliases\": [\"head\", \"out.w\"]}%s",
		 (int)(at - text), text, at + strlen("[256, 64]}"));
	assert_int_equal(zs_spec_from_json(buf, &s, &err), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&s, &err), ZS_OK);
	assert_int_equal(s.layout.n_aliases, 2);
	assert_string_equal(s.layout.aliases[1].name, "out.w");
	assert_int_equal(s.layout.aliases[1].unit, 0);
	assert_int_equal(s.layout.aliases[1].tensor, 0);
	assert_int_equal(zs_spec_from_json(good, &t, NULL), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&t, NULL), ZS_OK);
	assert_true(zs_layout_equal(&s.layout, &t.layout, NULL, 0));
	assert_true(zs_layout_digest(&s.layout) == zs_layout_digest(&t.layout));
	assert_int_equal(zs_layout_copy(&c, &s.layout), ZS_OK);
	assert_int_equal(c.n_aliases, 2);
	assert_string_equal(c.aliases[0].name, "head");
	zs_layout_release(&c);
	/* the name of a tensor, twice, out of range */
	snprintf(s.layout.aliases[1].name, sizeof s.layout.aliases[1].name, "%s",
		 s.layout.units[1].tensors[0].name);
	assert_int_equal(zs_job_spec_normalize(&s, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "is the name of a tensor"));
	snprintf(s.layout.aliases[1].name, sizeof s.layout.aliases[1].name, "head");
	assert_int_equal(zs_job_spec_normalize(&s, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "alias 'head' appears twice"));
	s.layout.aliases[1].tensor = 99;
	assert_int_equal(zs_job_spec_normalize(&s, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "names no tensor"));
	zs_job_spec_release(&s);
	zs_job_spec_release(&t);
	free(text);
	expect_parse_error("[256, 64]}", "[256, 64], \"aliases\": \"head\"}",
			   "'aliases' must be an array of names");
}

/* Optimizer groups: values per group (missing keys from the top level),
 * tensors naming theirs, through JSON and protobuf alike. */
static void test_groups(void **st)
{
	static const char *text =
		"{\"name\": \"g\", \"stage\": 3, \"world_size\": 2,"
		" \"optimizer\": {\"kind\": \"adamw\", \"lr\": 0.001, \"weight_decay\": 0.1,"
		"   \"beta2\": 0.95, \"groups\": [{}, {\"weight_decay\": 0}, {\"lr\": 0.01, \"eps\": 1e-6}]},"
		" \"units\": [{\"name\": \"h0\", \"tensors\": [{\"name\": \"w\", \"shape\": [8, 8]},"
		"   {\"name\": \"b\", \"shape\": [8], \"group\": 1},"
		"   {\"name\": \"e\", \"shape\": [4], \"group\": 2}]}]}";
	struct zs_job_spec s, plain;
	struct zs_error err = {0};

	(void)st;
	assert_int_equal(zs_spec_from_json(text, &s, &err), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&s, &err), ZS_OK);
	assert_int_equal(s.optim.n_groups, 3);
	assert_true(s.optim.groups[0].lr == 0.001 && s.optim.groups[0].weight_decay == 0.1);
	assert_true(s.optim.groups[1].weight_decay == 0.0 && s.optim.groups[1].lr == 0.001);
	assert_true(s.optim.groups[1].beta1 == 0.9 && s.optim.groups[1].beta2 == 0.95);
	assert_true(s.optim.groups[2].lr == 0.01 && s.optim.groups[2].eps == 1e-6 &&
		    s.optim.groups[2].weight_decay == 0.1);
	assert_int_equal(s.layout.units[0].tensors[0].group, 0);
	assert_int_equal(s.layout.units[0].tensors[1].group, 1);
	assert_int_equal(s.layout.units[0].tensors[2].group, 2);
	/* a job without groups has one, of the top-level values */
	assert_int_equal(zs_spec_from_json(good, &plain, NULL), ZS_OK);
	assert_int_equal(zs_job_spec_normalize(&plain, NULL), ZS_OK);
	assert_int_equal(plain.optim.n_groups, 1);
	assert_true(plain.optim.groups[0].lr == 0.001 && plain.optim.groups[0].weight_decay == 0.1 &&
		    plain.optim.groups[0].beta2 == 0.999);
	/* a layout whose tensor moved to another group is another layout */
	plain.layout.units[1].tensors[1].group = 0;
	zs_job_spec_release(&plain);
	s.layout.units[0].tensors[1].group = 0;
	{
		struct zs_job_spec t;
		char why[256];
		assert_int_equal(zs_spec_from_json(text, &t, NULL), ZS_OK);
		assert_int_equal(zs_job_spec_normalize(&t, NULL), ZS_OK);
		assert_false(zs_layout_equal(&s.layout, &t.layout, why, sizeof why));
		assert_non_null(strstr(why, "optimizer group 0, the job's in 1"));
		zs_job_spec_release(&t);
	}
	/* a tensor of a group the job does not have; a group's bad value */
	s.layout.units[0].tensors[1].group = 3;
	assert_int_equal(zs_job_spec_normalize(&s, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "tensor 'b' of unit 'h0' is in optimizer group 3"));
	zs_job_spec_release(&s);
	expect_parse_error("\"lr\": 0.001", "\"lr\": 0.001, \"groups\": []", "'groups' must be");
	expect_parse_error("\"lr\": 0.001", "\"lr\": 0.001, \"groups\": [{\"lr\": -2}]",
			   "optimizer group 0: learning rate -2");
	expect_parse_error("\"lr\": 0.001", "\"lr\": 0.001, \"groups\": [{\"lamda\": 1}]",
			   "unknown key 'lamda'");
	expect_parse_error("[256, 64]}", "[256, 64], \"group\": -1}", "'group' must be an integer");
	expect_parse_error("[256, 64]}", "[256, 64], \"frozen\": 1}",
			   "tensor 'wte': 'frozen' must be true or false");
	expect_parse_error("[256, 64]}", "[256, 64], \"group\": 1}",
			   "tensor 'wte' of unit 'embed' is in optimizer group 1; the job has 1");
}

static void test_layout_equal(void **st)
{
	struct zs_job_spec a, b;
	char why[256];

	(void)st;
	fixture_spec(&a, "x");
	fixture_spec(&b, "x");
	assert_true(zs_layout_equal(&a.layout, &b.layout, why, sizeof why));
	/* the digest a join sends tells apart what the comparison does */
#define SAME_DIGEST(yes) assert_true((zs_layout_digest(&a.layout) == \
				      zs_layout_digest(&b.layout)) == (yes))
	SAME_DIGEST(true);
	b.layout.units[1].tensors[0].shape[1] = 65;
	assert_false(zs_layout_equal(&a.layout, &b.layout, why, sizeof why));
	assert_non_null(strstr(why, "tensor 'w'"));
	SAME_DIGEST(false);
	b.layout.units[1].tensors[0].shape[1] = 64;
	SAME_DIGEST(true);
	b.layout.units[1].tensors[0].group = 1;
	SAME_DIGEST(false);
	b.layout.units[1].tensors[0].group = 0;
	b.layout.units[1].dtype = b.layout.units[1].dtype == ZS_F32 ? ZS_BF16 : ZS_F32;
	SAME_DIGEST(false);
	b.layout.units[1].dtype = a.layout.units[1].dtype;
	b.layout.units[1].tensors[0].ndim++;
	SAME_DIGEST(false);
	b.layout.units[1].tensors[0].ndim--;
	strcat(b.layout.units[1].tensors[0].name, "x");
	SAME_DIGEST(false);
	strcpy(b.layout.units[1].tensors[0].name, a.layout.units[1].tensors[0].name);
	SAME_DIGEST(true);
	strcpy(b.layout.units[2].name, "other");
	assert_false(zs_layout_equal(&a.layout, &b.layout, why, sizeof why));
	assert_non_null(strstr(why, "unit 2"));
	SAME_DIGEST(false);
	b.layout.n_units = 2;
	assert_false(zs_layout_equal(&a.layout, &b.layout, why, sizeof why));
	SAME_DIGEST(false);
#undef SAME_DIGEST
	b.layout.n_units = 3;
	zs_job_spec_release(&a);
	zs_job_spec_release(&b);
}

static void test_load_file_errors(void **st)
{
	struct zs_error err = {0};
	struct zs_job_spec s;

	(void)st;
	assert_int_equal(zs_spec_load("/nonexistent/job.json", &s, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "/nonexistent/job.json"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_frozen),
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_layout_equal),
		cmocka_unit_test(test_load_file_errors),
	};
	return cmocka_run_group_tests_name("spec_json", tests, NULL, NULL);
}
