/*
 * test_transfer.c - checkpoints that travel, through the whole service:
 * zshardctl export and import as safetensors (parameters, and the
 * optimizer's state with the step it was taken at), zs_init_unit_state.
 */
#include "tests/integration/train_common.h"

/* zshardctl import FILE into job, then export it to back */
static void import_export(const char *job, const char *file, const char *back)
{
	char *out, *errs;

	if (ctl(&out, &errs, "import", job, file, NULL, NULL))
		fail_msg("import %s into %s: %s", file, job, errs);
	free(out);
	free(errs);
	if (ctl(&out, &errs, "export", job, "--out", back, NULL))
		fail_msg("export %s: %s", job, errs);
	free(out);
	free(errs);
}

/*
 * Export, import: a trained job's parameters (and optimizer state) as
 * safetensors, read back by an independent reader; imported into a new job
 * and exported again, the same bits; a bad file changes nothing.
 */
static void test_export_import(void **st)
{
	struct zs_job_spec spec;
	struct rank_ctx x[1];
	struct st_file fa, fb;
	char a[1024], b[1024], raw[1024], junk[1024], *out, *errs;
	const char *root = getenv("ZSHARD_ROOT");
	float got[1000];
	int rc;

	(void)st;
	snprintf(a, sizeof a, "%s/a.safetensors", C.dir);
	snprintf(b, sizeof b, "%s/b.safetensors", C.dir);
	snprintf(raw, sizeof raw, "%s/u0.w.raw", C.dir);
	snprintf(junk, sizeof junk, "%s/junk.safetensors", C.dir);
	oracle_spec(&spec, "exa", 1, ZS_ADAMW, ZS_F32);
	create_job(&spec);
	snprintf(spec.name, sizeof spec.name, "exb");
	create_job(&spec);
	snprintf(spec.name, sizeof spec.name, "exc");
	create_job(&spec);
	x[0] = (struct rank_ctx){.t = join("exa", 0, "tcp")};
	upload_init(x[0].t);
	train_ranks(x, 1, 0, 2);

	rc = ctl(&out, &errs, "export", "exa", "--out", a, "--optimizer");
	if (rc)
		fail_msg("export: %s", errs);
	assert_non_null(strstr(out, "at step 2"));
	free(out);
	free(errs);
	/* every unit's tensor is "w": bare names would collide, so nothing
	 * is written and the error names the tensor */
	rc = ctl(&out, &errs, "export", "exa", "--out", b, "--bare-names");
	if (rc != 1 || !strstr(errs, "two units have a tensor 'w'") || !access(b, F_OK))
		fail_msg("export --bare-names of colliding names: rc %d, '%s'", rc, errs);
	free(out);
	free(errs);
	/* an independent reader agrees with what a gather returns */
	{
		char script[1024];
		snprintf(script, sizeof script, "%s/tests/ref/safetensors_read.py", root ? root : ".");
		char *argv[] = {"/usr/bin/python3", script, a, "u0.w", raw, NULL};
		rc = h_run(argv, &out, &errs);
		if (rc)
			fail_msg("the independent reader refused the file: %s", errs);
		free(out);
		free(errs);
		FILE *fr = fopen(raw, "rb");
		float want[1000];
		assert_non_null(fr);
		assert_int_equal(fread(want, 4, 1000, fr), 1000);
		fclose(fr);
		assert_int_equal(fetch(x[0].t, 0, 2, got), ZS_OK);
		assert_memory_equal(got, want, sizeof want);
	}
	/* into a new job and out again: the same bits */
	import_export("exb", a, b);
	assert_int_equal(st_open(a, &fa, NULL), ZS_OK);
	assert_int_equal(st_open(b, &fb, NULL), ZS_OK);
	assert_int_equal(fb.n, 4);
	assert_int_equal(fa.n, 12); /* + exp_avg and exp_avg_sq of each */
	for (uint32_t i = 0; i < fb.n; i++) {
		const struct st_tensor *ta = st_find(&fa, fb.t[i].name);
		assert_non_null(ta);
		assert_int_equal(ta->bytes, fb.t[i].bytes);
		assert_memory_equal(ta->data, fb.t[i].data, ta->bytes);
	}
	assert_non_null(st_find(&fa, "u2.w.exp_avg_sq"));
	st_close(&fa);
	st_close(&fb);
	/* importing again into a job that has trained... exb has not, but exa has */
	rc = ctl(&out, &errs, "import", "exa", a, NULL, NULL);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(errs, "initial parameters come before step 0"));
	free(out);
	free(errs);
	/* a bad file: refused, and exc still has no parameters */
	{
		FILE *fj = fopen(junk, "wb");
		uint64_t hl = 40;
		fwrite(&hl, 8, 1, fj);
		fputs("{\"u0.w\": {\"dtype\": \"F32\", \"shape\": [1000]", fj);
		fclose(fj);
	}
	rc = ctl(&out, &errs, "import", "exc", junk, NULL, NULL);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(errs, "junk.safetensors"));
	free(out);
	free(errs);
	/* a file whose shapes differ from the layout: refused, nothing uploaded */
	{
		char wrong[1024];
		float zeros[2000] = {0};
		struct st_tensor tt[4] = {
			{.name = "u0.w", .dtype = ZS_F32, .ndim = 1, .shape = {2000}, .data = zeros, .bytes = 8000},
			{.name = "u1.w", .dtype = ZS_F32, .ndim = 1, .shape = {1}, .data = zeros, .bytes = 4},
			{.name = "u2.w", .dtype = ZS_F32, .ndim = 1, .shape = {1}, .data = zeros, .bytes = 4},
			{.name = "u3.w", .dtype = ZS_F32, .ndim = 1, .shape = {1}, .data = zeros, .bytes = 4},
		};
		snprintf(wrong, sizeof wrong, "%s/wrong.safetensors", C.dir);
		assert_int_equal(st_write(wrong, tt, 4, NULL, 0, NULL, NULL), ZS_OK);
		rc = ctl(&out, &errs, "import", "exc", wrong, NULL, NULL);
		assert_int_equal(rc, 1);
		/* both shapes said (it said "another shape" alone) */
		assert_non_null(strstr(errs, "has shape [2000]; the job's is ["));
		free(out);
		free(errs);
		rc = ctl(&out, &errs, "export", "exc", "--out", wrong, NULL);
		assert_int_equal(rc, 1); /* still no parameters: nothing was uploaded */
		assert_non_null(strstr(errs, "no parameters yet"));
		free(out);
		free(errs);
	}
	rc = ctl(&out, &errs, "import", "exc", b, NULL, NULL); /* b lacks nothing */
	assert_int_equal(rc, 0);
	free(out);
	free(errs);
	/* a tensor found under its alias (a tied parameter's other name, as a
	 * file written by another tool may hold it), and exported again */
	{
		char tied[1024], back[1024];
		float w1[1] = {0.25f}, big[5000] = {0};
		struct st_file fc;
		const struct st_tensor *tw;
		struct st_tensor tt[4] = {
			{.name = "u0.w", .dtype = ZS_F32, .ndim = 1, .shape = {0}, .data = big},
			{.name = "tied.w", .dtype = ZS_F32, .ndim = 1, .shape = {0}, .data = w1},
			{.name = "u2.w", .dtype = ZS_F32, .ndim = 1, .shape = {0}, .data = big},
			{.name = "u3.w", .dtype = ZS_F32, .ndim = 1, .shape = {0}, .data = big},
		};
		snprintf(spec.name, sizeof spec.name, "exd");
		spec.layout.aliases = calloc(1, sizeof *spec.layout.aliases);
		spec.layout.n_aliases = 1;
		spec.layout.aliases[0] = (struct zs_alias){1, 0, "tied.w"};
		create_job(&spec);
		for (uint32_t u = 0; u < 4; u++) {
			tt[u].shape[0] = spec.layout.units[u].numel;
			tt[u].bytes = spec.layout.units[u].numel * 4;
		}
		assert_true(spec.layout.units[1].numel == 1 && spec.layout.units[2].numel <= 5000);
		snprintf(tied, sizeof tied, "%s/tied.safetensors", C.dir);
		snprintf(back, sizeof back, "%s/tied-back.safetensors", C.dir);
		assert_int_equal(st_write(tied, tt, 4, NULL, 0, NULL, NULL), ZS_OK);
		import_export("exd", tied, back);
		assert_int_equal(st_open(back, &fc, NULL), ZS_OK);
		assert_non_null(tw = st_find(&fc, "u1.w"));
		assert_memory_equal(tw->data, w1, 4);
		st_close(&fc);
	}
	zs_trainer_close(x[0].t);
	zs_job_spec_release(&spec);
}


/* One step of every unit at step, its gradient oracle_grad's of gstep
 * (another job may be at another step with the same gradients). */
static void one_step(zs_trainer *t, uint64_t step, uint64_t gstep)
{
	zs_op *ops[4];
	void *bufs[4];

	for (unsigned u = 0; u < 4; u++) {
		unsigned long long n = zs_unit_numel(t, u);
		float *p = malloc(n * 4);
		bufs[u] = malloc(n * 4);
		if (fetch(t, u, step, p))
			fail_msg("gather: %s", zs_trainer_error(t));
		for (unsigned long long i = 0; i < n; i++)
			p[i] = oracle_grad(p[i], u, i, 0, gstep);
		zs_convert_from_f32(bufs[u], (enum zs_dtype)zs_unit_dtype(t, u), p, n);
		free(p);
		if (zs_push(t, u, step, bufs[u], &ops[u]))
			fail_msg("push: %s", zs_trainer_error(t));
	}
	for (unsigned u = 0; u < 4; u++) {
		if (zs_op_wait(ops[u], 20000))
			fail_msg("push: %s", zs_trainer_error(t));
		free(bufs[u]);
	}
}

/* Whether a's units at step sa are b's at sb, bit for bit. */
static bool same_params(zs_trainer *a, uint64_t sa, zs_trainer *b, uint64_t sb)
{
	bool same = true;
	for (unsigned u = 0; u < 4; u++) {
		unsigned long long n = zs_unit_numel(a, u);
		float *pa = malloc(n * 4), *pb = malloc(n * 4);
		if (fetch(a, u, sa, pa) || fetch(b, u, sb, pb))
			fail_msg("gather: %s / %s", zs_trainer_error(a), zs_trainer_error(b));
		same = same && !memcmp(pa, pb, n * 4);
		free(pa);
		free(pb);
	}
	return same;
}

/* A job of spec's layout named name, steps_taken as given, created. */
static void create_as(struct zs_job_spec *spec, const char *name, uint64_t taken)
{
	snprintf(spec->name, sizeof spec->name, "%s", name);
	spec->optim.steps_taken = taken;
	create_job(spec);
}

/* zshardctl import JOB FILE --optimizer; its exit status, errs kept in why */
static int import_opt(const char *job, const char *file, char *why, size_t cap)
{
	char *out, *errs;
	int rc = ctl(&out, &errs, "import", job, file, "--optimizer", NULL);
	snprintf(why, cap, "%s", errs ? errs : "");
	free(out);
	free(errs);
	return rc;
}

/*
 * An optimizer's state travels with its step: job A trains 2 steps and is
 * exported with --optimizer; job B, created with steps_taken 2, imports
 * the file with its state (and job F the same through zs_init_unit_state);
 * one more step on each with the same gradients ends bitwise equal, for
 * AdamW (its moments and bias correction) and SGD with momentum in bf16
 * (its buffer, not new at B's step 0). Without the state (a job importing
 * the parameters alone) the step ends elsewhere: the test can tell. A job
 * whose steps_taken is not the file's, or 0, is refused and left empty;
 * the API refuses an array the optimizer has not, and a state before its
 * parameters; a push of step 0 is refused until every array is in.
 */
static void test_import_optimizer_state(void **st)
{
	static const struct { enum zs_optim_kind kind; enum zs_dtype dt; } cases[] = {
		{ZS_ADAMW, ZS_F32}, {ZS_SGD, ZS_BF16}};
	(void)st;
	for (unsigned c = 0; c < 2; c++) {
		struct zs_job_spec spec;
		zs_trainer *a, *b, *e, *f;
		struct st_file sf;
		char file[1024], back[1024], name[8][16], why[4096], *out, *errs;
		const char *meta;
		int rc;

		for (unsigned i = 0; i < 8; i++)
			snprintf(name[i], sizeof name[i], "os%u%c", c, 'a' + i);
		snprintf(file, sizeof file, "%s/os%u.safetensors", C.dir, c);
		snprintf(back, sizeof back, "%s/os%u-back.safetensors", C.dir, c);
		oracle_spec(&spec, name[0], 1, cases[c].kind, cases[c].dt);
		create_job(&spec);
		a = join(name[0], 0, "tcp");
		upload_init(a);
		{
			struct rank_ctx x[1] = {{.t = a}};
			train_ranks(x, 1, 0, 2);
		}
		rc = ctl(&out, &errs, "export", name[0], "--out", file, "--optimizer");
		if (rc)
			fail_msg("export: %s", errs);
		free(out);
		free(errs);
		assert_int_equal(st_open(file, &sf, NULL), ZS_OK);
		assert_non_null(meta = st_meta(&sf, "optimizer_steps"));
		assert_string_equal(meta, "2");
		st_close(&sf);

		/* refused: no steps taken, another step; nothing uploaded */
		create_as(&spec, name[2], 0);
		assert_int_equal(import_opt(name[2], file, why, sizeof why), 1);
		assert_non_null(strstr(why, "steps_taken"));
		create_as(&spec, name[3], 3);
		assert_int_equal(import_opt(name[3], file, why, sizeof why), 1);
		assert_non_null(strstr(why, "at step 2"));
		rc = ctl(&out, &errs, "export", name[3], "--out", back, NULL);
		assert_int_equal(rc, 1); /* still no parameters */
		assert_non_null(strstr(errs, "no parameters yet"));
		free(out);
		free(errs);

		/* imported with its state: the next step is A's */
		create_as(&spec, name[1], 2);
		if (import_opt(name[1], file, why, sizeof why))
			fail_msg("import --optimizer: %s", why);
		rc = ctl(&out, &errs, "job", "show", name[1], NULL, NULL);
		assert_int_equal(rc, 0);
		assert_non_null(strstr(out, "optimizer state imported after 2 steps"));
		free(out);
		free(errs);
		b = join(name[1], 0, "shm");
		/* the parameters alone: the same start, another step */
		create_as(&spec, name[4], 0);
		import_export(name[4], file, back);
		e = join(name[4], 0, "tcp");
		/* through the API, from the export's tensors */
		create_as(&spec, name[5], 2);
		f = join(name[5], 0, "shm"); /* its buffers in the server's region */
		assert_int_equal(st_open(file, &sf, NULL), ZS_OK);
		for (unsigned u = 0; u < 4; u++) {
			unsigned long long n = zs_unit_numel(f, u);
			float *v = malloc(n * 4);
			for (unsigned k = 0; k < 3; k++) {
				char tn[64];
				const struct st_tensor *tt;
				snprintf(tn, sizeof tn, "u%u.w%s", u,
					 zs_optim_state_suffix(cases[c].kind, k));
				if (k && !*zs_optim_state_suffix(cases[c].kind, k))
					continue;
				assert_non_null(tt = st_find(&sf, tn));
				zs_convert_to_f32(v, tt->data, tt->dtype, n);
				if (k == 1) /* an array the optimizer has not; after the parameters */
					assert_int_equal(zs_init_unit_state(f, u, 3, v), ZS_EINVAL);
				if (k ? zs_init_unit_state(f, u, k, v) : zs_init_unit(f, u, v))
					fail_msg("upload of unit %u array %u: %s", u, k,
						 zs_trainer_error(f));
			}
			free(v);
		}
		st_close(&sf);
		{ /* a state before its parameters: refused */
			zs_trainer *g;
			float one = 0.0f;
			create_as(&spec, name[6], 2);
			g = join(name[6], 0, "tcp");
			assert_int_equal(zs_init_unit_state(g, 1, 1, &one), ZS_ESTATE);
			assert_non_null(strstr(zs_trainer_error(g), "no parameters yet"));
			/* the parameters without (all of) the state: no step 0,
			 * which would update from zeros as step 3 */
			for (unsigned u = 0; u < 4; u++) {
				float *z = calloc(zs_unit_numel(g, u), 4);
				assert_int_equal(zs_init_unit(g, u, z), ZS_OK);
				free(z);
			}
			for (unsigned k = 1; k <= 2; k++) {
				uint8_t grad[8] = {0};
				zs_op *op;
				int want = k <= zs_optim_state_arrays(&spec.optim) ? ZS_ESTATE : ZS_OK;
				assert_int_equal(zs_push(g, 1, 0, grad, &op), ZS_OK);
				assert_int_equal(zs_op_wait(op, 20000), want);
				if (want == ZS_ESTATE) {
					assert_non_null(strstr(zs_trainer_error(g), "optimizer state"));
					assert_int_equal(zs_init_unit_state(g, 1, k, &one), ZS_OK);
				}
			}
			zs_trainer_close(g);
		}

		assert_true(same_params(a, 2, b, 0));
		one_step(a, 2, 2);
		one_step(b, 0, 2);
		one_step(e, 0, 2);
		one_step(f, 0, 2);
		if (!same_params(a, 3, b, 1))
			fail_msg("%s: the imported job's step differs from the exported one's",
				 zs_optim_name(cases[c].kind));
		if (!same_params(a, 3, f, 1))
			fail_msg("%s: the state uploaded through the API gave another step",
				 zs_optim_name(cases[c].kind));
		if (same_params(a, 3, e, 1))
			fail_msg("%s: a fresh optimizer state gave the same step: this test cannot tell",
				 zs_optim_name(cases[c].kind));
		one_step(a, 3, 3);
		one_step(b, 1, 3);
		assert_true(same_params(a, 4, b, 2));
		zs_trainer_close(a);
		zs_trainer_close(b);
		zs_trainer_close(e);
		zs_trainer_close(f);
		zs_job_spec_release(&spec);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_export_import),
		cmocka_unit_test(test_import_optimizer_state),
	};
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests_name("transfer", tests, group_setup, group_teardown);
}
