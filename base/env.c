/* env.c - the environment variables and the fault points (see env.h). */
#include "base/env.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"

const struct zs_env_var zs_env_vars[] = {
	{"ZSHARD_COORDINATOR", "the launch configuration's, else the local cluster's",
	 "libzshard, zshardctl, zshard-server, python",
	 "the coordinator's address (host:port, or several, comma-separated, for a coordinator "
	 "group) when none is given"},
	{"ZSHARD_CONFIG", "none", "libzshard (and so python), zshardctl",
	 "a launch configuration file (zshardctl config keys lists what it may set)"},
	{"ZSHARD_LOCAL_DIR", "$XDG_STATE_HOME/zshard/local, else ~/.local/state/zshard/local",
	 "libzshard, zshardctl, zshard-local",
	 "the directory of the local cluster (zshard-local start) whose coordinator is the last "
	 "default"},
	{"ZSHARD_LOG", "info", "every program and libzshard",
	 "the log level: debug, info, warn or error (a daemon's --log-level wins)"},
	{"ZSHARD_TLS_CA", "none", "libzshard, zshardctl",
	 "the CA file a client trusts for the coordinator and the servers' control plane (mutual "
	 "TLS, with ZSHARD_TLS_CERT and ZSHARD_TLS_KEY)"},
	{"ZSHARD_TLS_CERT", "none", "libzshard, zshardctl", "the client's certificate file"},
	{"ZSHARD_TLS_KEY", "none", "libzshard, zshardctl", "the client certificate's key file"},
	{"ZSHARD_RDMA_DEV", "the first device with an active port", "libzshard, zshard-server",
	 "the RDMA device to use (an ibv_devices name)"},
	{"ZSHARD_RDMA_PORT", "1", "libzshard, zshard-server", "the RDMA device's port, 1 to 255"},
	{"ZSHARD_RDMA_GID", "the first RoCE v2 IPv4 GID, else index 0", "libzshard, zshard-server",
	 "the GID index, 0 to 1023"},
	{"ZSHARD_RDMA_DEPTH", "128", "libzshard, zshard-server (its forwards to replicas)",
	 "work requests in flight per RDMA connection, 1 to 16384"},
	{"ZSHARD_RDMA_CHUNK", "1048576", "libzshard, zshard-server (its forwards to replicas)",
	 "bytes per RDMA write or read of a transfer, 4096 to 1 GiB"},
	{"ZSHARD_COPY_CHUNK", "8388608", "libzshard",
	 "device mode: bytes per piece of a staged copy between host and device"},
	{"ZSHARD_DEVICE_PUSH", "1", "libzshard",
	 "device mode: 0 sends pushes through host staging even to a server on the rank's own "
	 "device"},
	{"ZSHARD_GPU_LIB", "libzsgpu.so (the loader's search)", "libzshard",
	 "the CUDA kernels' library collective jobs' trainers add with"},
	{"ZSHARD_DEV_EMU_DELAY_US", "300", "libzshard, zshard-server",
	 "the emulated device (tests): the largest random delay of each copy, in microseconds (0: "
	 "none)"},
	{"ZSHARD_KTLS", "1", "libzshard, zshard-server",
	 "an encrypted data plane's records (data_tls): 1, in the kernel (kernel TLS) where it has "
	 "them, else in user space; 0, always in user space (a comparison)"},
	{"ZSHARD_TLS_RECORDS_PER_KEY", "16777216 (2^24)", "libzshard, zshard-server",
	 "an encrypted data plane's records sealed under one key before it is renewed (a TLS 1.3 "
	 "KeyUpdate; RFC 8446 5.5 bounds AES-GCM at 2^24.5), 2 to 2^24: tests lower it"},
	{"ZSHARD_FAULT", "none", "zshard-server, zshard-coordinator",
	 "tests only: a fault point to act at (zshardctl env lists them)"},
	{"ZSHARD_LIB", "the wheel's libzshard, else $ZSHARD_BUILD's, else the loader's", "python",
	 "the libzshard.so.0 the Python package loads"},
	{"ZSHARD_BUILD", "the source tree's build/", "python",
	 "a source tree's build directory, where the Python package finds libzshard"},
	{"ZSHARD_BIN", "the wheel's commands, else the source tree's build/bin",
	 "python, zshard-local", "where the Python package and zshard-local find zshardctl and "
	 "the daemons (zshard-local: beside itself by default)"},
	{NULL, NULL, NULL, NULL},
};

const struct zs_fault_point zs_fault_points[] = {
	{"ckpt-mid-write", "zshard-server: dies (SIGKILL) with a checkpoint's records written, "
			   "not committed"},
	{"ckpt-before-report", "zshard-server: dies (SIGKILL) with a checkpoint's records "
			       "durable, not reported"},
	{"coord-before-commit", "zshard-coordinator: dies (SIGKILL) when a checkpoint's last "
				"report arrives, before recording it committed"},
	{"coord-norm-forget", "zshard-coordinator: the first clipped step two servers wait for "
			      "is answered to one and forgotten (as by a leader that dies "
			      "between the answers); the others' calls break"},
	{"repl-one-copy", "zshard-server: a primary sends a step to its last copy alone, waits "
			  "until applied, then dies"},
	{"repl-refuse", "zshard-server: a replica refuses forwards from step 2 on"},
	{NULL, NULL},
};

static bool known(const char *name)
{
	for (const struct zs_env_var *v = zs_env_vars; v->name; v++)
		if (!strcmp(v->name, name))
			return true;
	zs_error("environment variable %s is not in base/env.c's list (a bug)", name);
	return false;
}

const char *zs_env(const char *name)
{
	const char *v;

	if (!known(name))
		return NULL;
	v = getenv(name);
	return v && *v ? v : NULL;
}

unsigned zs_env_uint(const char *name, unsigned def, unsigned lo, unsigned hi)
{
	const char *v = zs_env(name);
	char *end;
	unsigned long x;

	if (!v)
		return def;
	x = strtoul(v, &end, 10);
	return *end || x < lo || x > hi ? def : (unsigned)x;
}

bool zs_fault(const char *point)
{
	const char *f;

	for (const struct zs_fault_point *p = zs_fault_points; p->name; p++)
		if (!strcmp(p->name, point)) {
			f = zs_env("ZSHARD_FAULT");
			return f && !strcmp(f, point);
		}
	zs_error("fault point %s is not in base/env.c's list (a bug)", point);
	return false;
}
