/* test_util.c - argument parsing: sizes, addresses, bounded integers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "model/model.h"
#include "base/util.h"

static void test_sizes(void **st)
{
	static const struct { const char *s; uint64_t v; } ok[] = {
		{"0", 0}, {"10", 10}, {"1K", 1024}, {"1k", 1024}, {"2KiB", 2048},
		{"512M", 512ULL << 20}, {"8G", 8ULL << 30}, {"8GB", 8ULL << 30},
		{"3T", 3ULL << 40}, {"1P", 1ULL << 50}, {"100B", 100},
	};
	static const char *const bad[] = {"", "G", "-1", "8X", "1.5G", "8G8",
					  "99999999999P", "18446744073709551616"};
	struct zs_error err = {0};
	uint64_t v;

	(void)st;
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		assert_int_equal(zs_parse_size(ok[i].s, &v, NULL), ZS_OK);
		assert_int_equal(v, ok[i].v);
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		v = 77;
		assert_int_equal(zs_parse_size(bad[i], &v, &err), ZS_EINVAL);
		assert_int_equal(v, 77); /* output untouched on failure */
		assert_true(strlen(err.msg) > 0);
	}
}

static void test_advertise(void **st)
{
	struct zs_error err = {0};
	char out[ZS_ADDR_MAX];

	(void)st;
	/* nothing to advertise: the bound address, unless it is a wildcard */
	assert_int_equal(zs_advertise_addr(NULL, "127.0.0.1:7401", false, out, sizeof out, "control",
					   &err), ZS_OK);
	assert_string_equal(out, "127.0.0.1:7401");
	assert_int_equal(zs_advertise_addr(NULL, "0.0.0.0:7401", false, out, sizeof out, "control",
					   &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "the control address 0.0.0.0:7401 is a wildcard"));
	assert_non_null(strstr(err.msg, "--advertise"));
	assert_int_equal(zs_advertise_addr(NULL, "[::]:7401", false, out, sizeof out, "data-plane",
					   &err), ZS_EINVAL);
	/* a host keeps the bound port; HOST:PORT maps it, unless host_only */
	assert_int_equal(zs_advertise_addr("node-3.cluster", "0.0.0.0:7401", false, out, sizeof out,
					   "control", &err), ZS_OK);
	assert_string_equal(out, "node-3.cluster:7401");
	assert_int_equal(zs_advertise_addr("203.0.113.9:30401", "0.0.0.0:7401", false, out,
					   sizeof out, "control", &err), ZS_OK);
	assert_string_equal(out, "203.0.113.9:30401");
	assert_int_equal(zs_advertise_addr("203.0.113.9:30401", "0.0.0.0:7402", true, out,
					   sizeof out, "data-plane", &err), ZS_OK);
	assert_string_equal(out, "203.0.113.9:7402");
	assert_int_equal(zs_advertise_addr("[fd00::5]", "[::]:7401", false, out, sizeof out,
					   "control", &err), ZS_OK);
	assert_string_equal(out, "[fd00::5]:7401");
	assert_int_equal(zs_advertise_addr("[fd00::5]:9", "[::]:7401", false, out, sizeof out,
					   "control", &err), ZS_OK);
	assert_string_equal(out, "[fd00::5]:9");
	/* bad ones are refused with the flag named */
	strcpy(out, "untouched");
	assert_int_equal(zs_advertise_addr("host:0", "0.0.0.0:7401", false, out, sizeof out,
					   "control", &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "--advertise 'host:0'"));
	assert_int_equal(zs_advertise_addr("host:99999", "0.0.0.0:7401", false, out, sizeof out,
					   "control", &err), ZS_EINVAL);
	assert_int_equal(zs_advertise_addr("[fd00::5", "0.0.0.0:7401", false, out, sizeof out,
					   "control", &err), ZS_EINVAL);
	assert_string_equal(out, "untouched");
}

static void test_hostport(void **st)
{
	char host[ZS_HOST_MAX];
	uint16_t port;
	struct zs_error err = {0};

	(void)st;
	assert_int_equal(zs_parse_hostport("127.0.0.1:0", host, &port, NULL), ZS_OK);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 0);
	assert_int_equal(zs_parse_hostport("node-7:65535", host, &port, NULL), ZS_OK);
	assert_string_equal(host, "node-7");
	assert_int_equal(port, 65535);
	assert_int_equal(zs_parse_hostport("[::1]:80", host, &port, NULL), ZS_OK);
	assert_string_equal(host, "::1");
	assert_int_equal(zs_parse_hostport("127.0.0.1", host, &port, &err), ZS_EINVAL);
	assert_int_equal(zs_parse_hostport(":80", host, &port, &err), ZS_EINVAL);
	assert_int_equal(zs_parse_hostport("h:65536", host, &port, &err), ZS_EINVAL);
	assert_int_equal(zs_parse_hostport("h:8x", host, &port, &err), ZS_EINVAL);
	assert_int_equal(zs_parse_hostport("[::1]80", host, &port, &err), ZS_EINVAL);
	assert_int_equal(zs_parse_hostport("", host, &port, &err), ZS_EINVAL);
}

static void test_u64(void **st)
{
	uint64_t v;
	(void)st;
	assert_int_equal(zs_parse_u64("3", 1, 3, &v, NULL), ZS_OK);
	assert_int_equal(v, 3);
	assert_int_equal(zs_parse_u64("4", 1, 3, &v, NULL), ZS_EINVAL);
	assert_int_equal(zs_parse_u64("0", 1, 3, &v, NULL), ZS_EINVAL);
	assert_int_equal(zs_parse_u64("1a", 0, 9, &v, NULL), ZS_EINVAL);
	assert_int_equal(zs_parse_u64("-1", 0, 9, &v, NULL), ZS_EINVAL);
}

/* zs_take_front: the first few out, the rest to the front, in order. */
static void test_take_front(void **st)
{
	uint32_t v[5] = {1, 2, 3, 4, 5}, out[8] = {0}, n = 5;
	(void)st;

	assert_int_equal(zs_take_front(v, &n, sizeof *v, out, 2), 2);
	assert_int_equal(n, 3);
	assert_int_equal(out[0], 1);
	assert_int_equal(out[1], 2);
	assert_int_equal(v[0], 3);
	assert_int_equal(v[2], 5);
	assert_int_equal(zs_take_front(v, &n, sizeof *v, out, 8), 3);
	assert_int_equal(n, 0);
	assert_int_equal(out[2], 5);
	assert_int_equal(zs_take_front(v, &n, sizeof *v, out, 8), 0);
}

static void test_names_and_dtypes(void **st)
{
	enum zs_dtype d;
	enum zs_optim_kind k;
	char buf[64];

	(void)st;
	assert_true(zs_job_name_valid("gpt2-small_v1.2"));
	assert_false(zs_job_name_valid(""));
	assert_false(zs_job_name_valid(".hidden"));
	assert_false(zs_job_name_valid("a/b"));
	assert_false(zs_job_name_valid("a b"));
	assert_int_equal(zs_dtype_parse("bfloat16", &d, NULL), ZS_OK);
	assert_int_equal(d, ZS_BF16);
	assert_int_equal(zs_dtype_parse("fp16", &d, NULL), ZS_OK);
	assert_int_equal(d, ZS_F16);
	assert_int_equal(zs_dtype_parse("int8", &d, NULL), ZS_EINVAL);
	assert_int_equal(zs_optim_parse("AdamW", &k, NULL), ZS_OK);
	assert_int_equal(k, ZS_ADAMW);
	assert_int_equal(zs_optim_parse("lamb", &k, NULL), ZS_EINVAL);
	assert_string_equal(zs_transports_fmt(ZS_TRANSPORT_TCP | ZS_TRANSPORT_RDMA, buf,
					      sizeof buf), "tcp,rdma");
	assert_string_equal(zs_transports_fmt(0, buf, sizeof buf), "none");
	assert_string_equal(zs_fmt_bytes(1536, buf, sizeof buf), "1.50 KiB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_hostport),
		cmocka_unit_test(test_advertise),
		cmocka_unit_test(test_u64),
		cmocka_unit_test(test_names_and_dtypes),
		cmocka_unit_test(test_take_front),
	};
	return cmocka_run_group_tests_name("util", tests, NULL, NULL);
}
