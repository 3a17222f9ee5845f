/* test_config.c - the launch configuration: parsing, checks, a daemon's flags. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "base/config.h"

static char path[64];

static void write_conf(const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **st)
{
	int fd;
	(void)st;
	snprintf(path, sizeof path, "/tmp/zshard-config-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **st)
{
	(void)st;
	unlink(path);
	return 0;
}

static void test_good_file_and_daemon_flags(void **st)
{
	struct zs_config c;
	struct zs_error err = {0};
	char *argv[] = {"zshard-server", "--config", path, "--capacity", "1G", NULL}, **v;
	int n;

	(void)st;
	write_conf("# cluster\n"
		   "coordinator = 10.0.0.1:7400, 10.0.0.2:7400\n"
		   "  server.capacity=64G   # per server\n"
		   "server.data_dir = /var/lib/zshard/s0\n"
		   "server.step_timeout_ms = 5000\n"
		   "coordinator.lease_ms = 3000\n"
		   "tls_ca = /etc/hostname\n"
		   "prefetch = 2\n\n");
	assert_int_equal(zs_config_load(path, &c, &err), ZS_OK);
	assert_int_equal(c.n, 7);
	assert_string_equal(zs_config_get(&c, "server.capacity"), "64G");
	assert_string_equal(zs_config_get(&c, "coordinator"), "10.0.0.1:7400, 10.0.0.2:7400");
	assert_null(zs_config_get(&c, "server.gpu"));
	assert_string_equal(zs_config_flag(5, argv), path);
	/* the server's flags: the file's first (its keys, the coordinator
	 * list, TLS), then the command line's, which win */
	assert_int_equal(zs_config_argv(&c, "server", 5, argv, &v, &n, &err), ZS_OK);
	assert_int_equal(n, 8);
	assert_string_equal(v[0], "zshard-server");
	assert_string_equal(v[1], "--coordinator=10.0.0.1:7400,10.0.0.2:7400");
	assert_string_equal(v[2], "--capacity=64G");
	assert_string_equal(v[3], "--data-dir=/var/lib/zshard/s0");
	assert_string_equal(v[4], "--step-timeout-ms=5000");
	assert_string_equal(v[5], "--tls-ca=/etc/hostname");
	assert_string_equal(v[6], "--capacity");
	assert_string_equal(v[7], "1G");
	assert_null(v[8]);
	free(v);
	assert_int_equal(zs_config_argv(&c, "coordinator", 1, argv, &v, &n, &err), ZS_OK);
	assert_int_equal(n, 3);
	assert_string_equal(v[1], "--lease-ms=3000");
	assert_string_equal(v[2], "--tls-ca=/etc/hostname");
	free(v);
	zs_config_release(&c);
}

static void test_bad_files_name_the_line(void **st)
{
	static const struct { const char *text, *why; } bad[] = {
		{"server.capacty = 8G\n", ":1: unknown key 'server.capacty'"},
		{"# ok\n\nserver.capacity = 8X\n", ":3: server.capacity: '8X' is not a size"},
		{"coordinator = nowhere\n", ":1: coordinator:"},
		{"coordinator = h:7400,h:0\n", "an address of a list needs a real port"},
		{"prefetch = 65\n", ":1: prefetch:"},
		{"prefetch = 1\nprefetch = 2\n", ":2: 'prefetch' is set twice"},
		{"server.gpu = 0 1\n", "'0 1' is not a device number (0-1023) or 'emulated'"},
		{"server.gpu = banana\n", ":1: server.gpu: 'banana' is not a device number"},
		{"server.rdma = maybe\n", ":1: server.rdma: 'maybe' is not one of auto|on|off"},
		{"transport = udp\n", ":1: transport: 'udp' is not one of auto|tcp|shm|rdma"},
		{"server.capacity = 0\n", ":1: server.capacity: must be at least 1 bytes"},
		{"coordinator.etcd_lease_s = 0\n", ":1: coordinator.etcd_lease_s:"},
		{"coordinator.trainer_lease_ms = 100\n", ":1: coordinator.trainer_lease_ms:"},
		{"coordinator.data_dir = /x\ncoordinator.etcd = e:2379\n",
		 ":2: coordinator.etcd: not with coordinator.data_dir (line 1)"},
		{"tls_cert = /nonexistent/cert.pem\n", ":1: tls_cert: /nonexistent/cert.pem is not there"},
		{"tls_key = /tmp\n", ":1: tls_key: /tmp is not a file"},
		{"just words\n", ":1: want KEY = VALUE"},
		{"server.metrics =\n", ":1: server.metrics: no value"},
		{"coordinator.etcd = e1:2379,e2\n", ":1: coordinator.etcd:"},
		{"coordinator.etcd_lease_s = 3601\n", ":1: coordinator.etcd_lease_s:"},
		{"stage = 0\n", ":1: stage:"},
		{"stage = 4\n", ":1: stage:"},
		/* the daemon's own bound (the file took 50 before, the server not) */
		{"server.step_timeout_ms = 50\n", ":1: server.step_timeout_ms: 50 is out of range"},
		{"server-gpu = 0\n", ":1: unknown key 'server-gpu'"},
		{"server.port_file = /x\n", ":1: unknown key 'server.port_file'"},
	};
	struct zs_config c;
	struct zs_error err = {0};

	(void)st;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_conf(bad[i].text);
		assert_int_equal(zs_config_load(path, &c, &err), ZS_EINVAL);
		if (!strstr(err.msg, bad[i].why) || !strstr(err.msg, path))
			fail_msg("'%s': %s", bad[i].text, err.msg);
		assert_int_equal(c.n, 0);
	}
	assert_int_equal(zs_config_load("/nonexistent/zshard.conf", &c, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "cannot read it"));
	assert_int_equal(zs_config_load("/tmp", &c, &err), ZS_EINVAL);
	assert_non_null(strstr(err.msg, "is a directory"));
}

/* Relative paths in a file are its folder's, wherever the program runs. */
static void test_relative_paths(void **st)
{
	char dir[64], conf[128], ca[128];
	struct zs_config c;
	struct zs_error err = {0};
	FILE *f;

	(void)st;
	snprintf(dir, sizeof dir, "/tmp/zshard-confdir-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(conf, sizeof conf, "%s/zshard.conf", dir);
	snprintf(ca, sizeof ca, "%s/ca.pem", dir);
	assert_non_null(f = fopen(ca, "w"));
	fclose(f);
	assert_non_null(f = fopen(conf, "w"));
	fputs("tls_ca = ca.pem\nserver.data_dir = state/s0\n", f);
	fclose(f);
	assert_int_equal(chdir("/"), 0);
	if (zs_config_load(conf, &c, &err))
		fail_msg("%s", err.msg);
	assert_string_equal(zs_config_get(&c, "tls_ca"), ca);
	assert_true(!strncmp(zs_config_get(&c, "server.data_dir"), dir, strlen(dir)));
	assert_string_equal(zs_config_get(&c, "server.data_dir") + strlen(dir), "/state/s0");
	zs_config_release(&c);
	unlink(ca);
	unlink(conf);
	rmdir(dir);
}

static void put(const char *dir, const char *name, const char *text)
{
	char p[256];
	FILE *f;

	snprintf(p, sizeof p, "%s/%s", dir, name);
	assert_non_null(f = fopen(p, "w"));
	fputs(text, f);
	fclose(f);
}

/* The local cluster's coordinator, where zshard-local start without --dir
 * keeps it: found while its pid file says it runs, not once stopped (stop
 * removes the pid file), nor from an empty address; the folder named
 * either way, from $ZSHARD_LOCAL_DIR, else $XDG_STATE_HOME, else $HOME. */
static void test_local_cluster(void **st)
{
	char dir[64], sub[128], buf[64], at[512], want[256], home[256];

	(void)st;
	snprintf(home, sizeof home, "%s", getenv("HOME") ? getenv("HOME") : "/root");
	snprintf(dir, sizeof dir, "/tmp/zshard-local-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(sub, sizeof sub, "%s/run", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	setenv("ZSHARD_LOCAL_DIR", dir, 1);
	assert_null(zs_local_coordinator(buf, sizeof buf, at, sizeof at)); /* none started */
	assert_string_equal(at, dir);
	put(dir, "coordinator.listen", "127.0.0.1:7400\n");
	assert_null(zs_local_coordinator(buf, sizeof buf, at, sizeof at)); /* not running */
	put(dir, "run/coordinator.pid", "1\n");
	assert_string_equal(zs_local_coordinator(buf, sizeof buf, at, sizeof at), "127.0.0.1:7400");
	put(dir, "coordinator.listen", "  \n");
	assert_null(zs_local_coordinator(buf, sizeof buf, at, sizeof at)); /* no address */
	unsetenv("ZSHARD_LOCAL_DIR");
	setenv("XDG_STATE_HOME", dir, 1);
	zs_local_coordinator(buf, sizeof buf, at, sizeof at);
	snprintf(want, sizeof want, "%s/zshard/local", dir);
	assert_string_equal(at, want);
	unsetenv("XDG_STATE_HOME");
	setenv("HOME", dir, 1);
	zs_local_coordinator(buf, sizeof buf, at, sizeof at);
	snprintf(want, sizeof want, "%s/.local/state/zshard/local", dir);
	assert_string_equal(at, want);
	setenv("HOME", home, 1);
	snprintf(sub, sizeof sub, "%s/run/coordinator.pid", dir);
	unlink(sub);
	snprintf(sub, sizeof sub, "%s/coordinator.listen", dir);
	unlink(sub);
	snprintf(sub, sizeof sub, "%s/run", dir);
	rmdir(sub);
	rmdir(dir);
}

/* The coordinators sharing etcd: their keys become the coordinator's
 * flags; the server gets the whole coordinator list. */
static void test_etcd_keys(void **st)
{
	struct zs_config c;
	struct zs_error err = {0};
	char *argv[] = {"zshard-coordinator", NULL};
	char **v;
	int n;

	(void)st;
	write_conf("coordinator = a:7400 , b:7400\n"
		   "coordinator.etcd = e1:2379, e2:2379,e3:2379\n"
		   "coordinator.etcd_prefix = /prod\n"
		   "coordinator.etcd_lease_s = 3\n");
	assert_int_equal(zs_config_load(path, &c, &err), ZS_OK);
	assert_int_equal(zs_config_argv(&c, "coordinator", 1, argv, &v, &n, &err), ZS_OK);
	assert_int_equal(n, 4);
	assert_string_equal(v[1], "--etcd=e1:2379, e2:2379,e3:2379");
	assert_string_equal(v[2], "--etcd-prefix=/prod");
	assert_string_equal(v[3], "--etcd-lease-s=3");
	free(v);
	argv[0] = "zshard-server";
	assert_int_equal(zs_config_argv(&c, "server", 1, argv, &v, &n, &err), ZS_OK);
	assert_int_equal(n, 2);
	assert_string_equal(v[1], "--coordinator=a:7400,b:7400");
	free(v);
	zs_config_release(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good_file_and_daemon_flags, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_files_name_the_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_etcd_keys, setup, teardown),
		cmocka_unit_test(test_relative_paths),
		cmocka_unit_test(test_local_cluster),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
