/*
 * test_frozen.c - frozen tensors cost no gradient and no optimizer state.
 *
 * Placement cuts a unit where frozen and trained tensors meet, so that no
 * shard mixes them (a unit without frozen tensors is placed as before); a
 * frozen shard holds its master alone, which the engine's byte count and
 * the placement's charge both say; a push of it is a one-element step mark
 * (a whole gradient is refused, saying so), which advances it without
 * changing a parameter; an exporter reads its optimizer state as zeros.
 * Training through such shards against the reference, bit for bit, is
 * test_engine's oracle matrix (with_groups = 2).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/placement.h"
#include "tests/oracle.h"
#include "tests/unit/engine_cluster.h"

/* Whether shard sh of spec covers frozen (*f) and trained (*t) elements. */
static void kinds_in(const struct zs_job_spec *spec, const struct zs_shard *sh, bool *f,
		     bool *t)
{
	const struct zs_unit *un = &spec->layout.units[sh->unit];

	*f = *t = false;
	for (uint32_t i = 0; i < un->n_tensors; i++) {
		const struct zs_tensor *te = &un->tensors[i];
		if (te->offset >= sh->offset + sh->length || te->offset + te->numel <= sh->offset)
			continue;
		*f |= te->frozen;
		*t |= !te->frozen;
	}
}

/* Placement: no shard mixes; frozen shards are marked and charged less;
 * units without frozen tensors are placed as if nothing were frozen. */
static void test_placement_cuts(void **st)
{
	struct zs_job frozen, plain;
	uint32_t n_marks = 0, covered[8] = {0};

	(void)st;
	with_groups = 2;
	make_job(&frozen, 3, 2, ZS_ADAMW, ZS_BF16);
	with_groups = 1;
	make_job(&plain, 3, 2, ZS_ADAMW, ZS_BF16);
	with_groups = 0;
	for (uint32_t i = 0; i < frozen.placement.n_shards; i++) {
		const struct zs_shard *sh = &frozen.placement.shards[i];
		bool f, t;
		kinds_in(&frozen.spec, sh, &f, &t);
		if (f && t)
			fail_msg("unit %u shard %u [%llu, +%llu) mixes frozen and trained elements",
				 sh->unit, sh->index, (unsigned long long)sh->offset,
				 (unsigned long long)sh->length);
		assert_int_equal(zs_shard_marks(&frozen.spec, sh), f);
		assert_int_equal(zs_shard_push_len(&frozen.spec, sh), f ? ZS_MARK_LEN : sh->length);
		if (f) {
			enum zs_dtype d = frozen.spec.layout.units[sh->unit].dtype;
			n_marks++;
			/* master alone (and the copy gathers read when not
			 * f32), and the mark's reduction */
			assert_int_equal(zs_shard_state_bytes(&frozen.spec, sh),
					 sh->padded * (4 + (d == ZS_F32 ? 0 : zs_dtype_size(d))) +
						 ZS_REDUCE_BYTES + 4);
		} else {
			assert_int_equal(zs_shard_state_bytes(&frozen.spec, sh),
					 sh->padded * zs_server_bytes_per_elem(
							      &frozen.spec,
							      &frozen.spec.layout.units[sh->unit]));
		}
		covered[sh->unit] += (uint32_t)sh->length;
	}
	assert_true(n_marks >= 2); /* units 0 and 2 each have a frozen tensor */
	for (uint32_t u = 0; u < frozen.spec.layout.n_units; u++)
		assert_int_equal(covered[u], frozen.spec.layout.units[u].numel);
	/* unit 1 has no frozen tensor: its shards are those without any */
	{
		uint32_t a = 0, b = 0;
		for (uint32_t i = 0; i < frozen.placement.n_shards; i++)
			if (frozen.placement.shards[i].unit == 1) {
				while (plain.placement.shards[b].unit != 1)
					b++;
				assert_memory_equal(&frozen.placement.shards[i],
						    &plain.placement.shards[b], sizeof(struct zs_shard));
				a++;
				b++;
			}
		assert_true(a > 0);
	}
	zs_job_release(&frozen);
	zs_job_release(&plain);
}

/* The engine: bytes held, a whole push refused, a mark taken, nothing
 * changed, optimizer state read as zeros. */
static void test_marks(void **st)
{
	struct cluster c;
	struct zs_conn *conn[MAXS];
	struct zs_req *r;
	struct zs_error err = {0};
	const struct zs_shard *fz = NULL;
	uint64_t want[MAXS] = {0};
	char why[512];

	(void)st;
	with_groups = 2;
	start(&c, 2, 1, ZS_ADAMW, ZS_F32, &zs_tcp_transport);
	with_groups = 0;
	for (uint32_t i = 0; i < c.job.placement.n_shards; i++) {
		const struct zs_shard *sh = &c.job.placement.shards[i];
		want[sh->server_id - 1] += zs_shard_state_bytes(&c.job.spec, sh);
		if (!fz && zs_shard_marks(&c.job.spec, sh) && sh->length > ZS_MARK_LEN)
			fz = sh;
	}
	assert_non_null(fz);
	for (int s = 0; s < c.S; s++) {
		struct engine_stats es;
		engine_stats(c.e[s], &es);
		assert_int_equal(es.bytes, want[s]); /* exactly what placement charged */
		conn[s] = conn_to(&c, s, 0);
	}
	if (upload_init(&c, conn, why))
		fail_msg("init: %s", why);
	{
		struct zs_conn *cn = conn[fz->server_id - 1];
		float *g = calloc(fz->length, 4), *p = calloc(fz->length, 4);
		float mark = 0.0f;
		uint64_t ver = 99;
		struct zs_xfer x = {.unit = fz->unit, .offset = fz->offset, .length = fz->length,
				    .step = 0, .dtype = ZS_F32};
		for (uint64_t i = 0; i < fz->length; i++)
			g[i] = 1.0f;
		/* a whole gradient: refused, naming the mark */
		assert_int_equal(zs_post_write(cn, &x, g, &r, &err), ZS_OK);
		assert_int_equal(zs_req_wait(r, 5000, &err), ZS_EINVAL);
		assert_non_null(strstr(err.msg, "frozen tensors only"));
		assert_non_null(strstr(err.msg, "step mark"));
		/* the mark: step 0 done, step 1 is there, the same values */
		x.length = ZS_MARK_LEN;
		assert_int_equal(zs_post_write(cn, &x, &mark, &r, &err), ZS_OK);
		assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
		x.length = fz->length;
		x.step = 1;
		assert_int_equal(zs_post_read(cn, &x, p, &r, &err), ZS_OK);
		assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
		for (uint64_t i = 0; i < fz->length; i++)
			if (p[i] != oracle_init(fz->unit, fz->offset + i))
				fail_msg("element %llu of a frozen shard changed",
					 (unsigned long long)(fz->offset + i));
		/* an exporter's read of its optimizer state: zeros, at step 1 */
		x = (struct zs_xfer){.unit = fz->unit, .offset = fz->offset, .length = fz->length,
				     .dtype = ZS_F32, .state_read = true, .state = 1,
				     .version = &ver};
		for (uint64_t i = 0; i < fz->length; i++)
			p[i] = 7.0f;
		assert_int_equal(zs_post_read(cn, &x, p, &r, &err), ZS_OK);
		assert_int_equal(zs_req_wait(r, 5000, &err), ZS_OK);
		assert_int_equal(ver, 1);
		for (uint64_t i = 0; i < fz->length; i++)
			assert_true(p[i] == 0.0f);
		free(g);
		free(p);
	}
	for (int s = 0; s < c.S; s++)
		zs_conn_close(conn[s]);
	stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_placement_cuts),
		cmocka_unit_test(test_marks),
	};
	return cmocka_run_group_tests_name("frozen", tests, NULL, NULL);
}
