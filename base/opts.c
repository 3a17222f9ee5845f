/*
 * opts.c - the settings' tables and their one check (see base/opts.h).
 */
#include "base/opts.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

#define MS_DAY 86400000ULL

#define TLS_HELP(which, env)                                                              \
	which " (PEM; default\n$ZSHARD_TLS_" env "): mutual TLS on the control\n"            \
	"plane, all three or none (plaintext)"

/* what both daemons take alike: the TLS identity's three files; the log
 * level, --version and --help, which end each table */
#define TLS_OPTS                                                                           \
	{"tls-ca", ZS_OPT_FILE, .val = 1, .arg = "FILE",                                   \
	 .help = TLS_HELP("the CA every peer's certificate\nmust be signed by", "CA")},     \
	{"tls-cert", ZS_OPT_FILE, .val = 2, .arg = "FILE",                                 \
	 .help = TLS_HELP("this daemon's certificate", "CERT")},                            \
	{"tls-key", ZS_OPT_FILE, .val = 3, .arg = "FILE", .help = TLS_HELP("its key", "KEY")}
#define METRICS_CLIENTS                                                                    \
	{"metrics-clients", ZS_OPT_CHOICE, .choices = "any|certified", .config = true,     \
	 .val = 12, .arg = "WHO",                                                          \
	 .help = "with mutual TLS: who the https metrics endpoint\nanswers: any client "     \
		 "(the default), or only one\nwith a certificate of --tls-ca (others: 403)"}
#define DAEMON_TAIL                                                                        \
	{"log-level", ZS_OPT_CHOICE, .choices = "debug|info|warn|error", .config = true,   \
	 .val = 'v', .arg = "LEVEL", .help = "debug, info, warn, error (default info)"},    \
	{"version", ZS_OPT_FLAG, .val = 'V', .help = "print the version and exit"},         \
	{"help", ZS_OPT_FLAG, .val = 'h', .help = "print this and exit"}

const struct zs_opt zs_opts_server[] = {
	{"coordinator", ZS_OPT_ADDRS, .val = 'c', .arg = "ADDR",
	 .help = "coordinator HOST:PORT, or a list HOST:PORT,...\n(default $ZSHARD_COORDINATOR)"},
	{"listen", ZS_OPT_ADDR, .config = true, .val = 'l', .arg = "HOST:PORT",
	 .help = "control address (default 127.0.0.1:0, a free port)"},
	{"data-dir", ZS_OPT_PATH, .config = true, .val = 'd', .arg = "DIR",
	 .help = "state directory (created if missing)"},
	{"capacity", ZS_OPT_SIZE, 1, 0, .config = true, .val = 'C', .arg = "BYTES",
	 .help = "memory offered for shards, e.g. 512M, 8G\n(default: half of physical memory)"},
	{"data-listen", ZS_OPT_ADDR, .config = true, .val = 'D', .arg = "HOST:PORT",
	 .help = "data-plane (tcp) address (default: the control\naddress's host, a free port); "
		 "same-host trainers\nalso get shared memory"},
	{"memory-budget", ZS_OPT_SIZE, .config = true, .val = 'M', .arg = "BYTES",
	 .help = "masters and optimizer state beyond this stay in\nO_DIRECT files under DIR/tier, "
		 "streamed for each\nupdate (default: all in memory)"},
	{"gpu", ZS_OPT_GPU, .config = true, .val = 'G', .arg = "N|emulated",
	 .help = "keep the shards' fp32 masters, optimizer state and\nreduction on CUDA device N, "
		 "reduced and updated by\nits kernels, bitwise as on the host (emulated: the\nsame "
		 "path on host memory, for tests); --capacity\nshould then be what the device holds"},
	{"gpu-budget", ZS_OPT_SIZE, 1, 0, .config = true, .val = 'B', .arg = "BYTES",
	 .help = "masters and optimizer state beyond this stay in host\nmemory (and past "
		 "--memory-budget, in the tier)"},
	{"landing-budget", ZS_OPT_SIZE, 1, 0, .config = true, .val = 'L', .arg = "BYTES",
	 .help = "room for pushes in flight (each lands whole, then\ngoes into the reduction): "
		 "more waits (default\n256M; one push always lands); beside --capacity"},
	{"reader-budget", ZS_OPT_SIZE, 0, 0, .config = true, .val = 'P', .arg = "BYTES",
	 .help = "room for readers' pinned copies that readers on this\nhost (shm) and rdma readers "
		 "take without this\nserver's CPU (default 256M; past it they are\nmalloc'd and read "
		 "over tcp); beside --capacity"},
	{"step-timeout-ms", ZS_OPT_NUM, 100, MS_DAY, .config = true, .val = 'T', .arg = "MS",
	 .help = "a gather waiting longer for the other ranks fails,\nnaming the ranks it waits "
		 "for (default 60000); a\npush waits as long for landing room"},
	{"advertise", ZS_OPT_WORD, .config = true, .val = 'a', .arg = "HOST[:PORT]",
	 .help = "the address peers reach this server at, when it is\nnot the one it listens on "
		 "(NAT, containers, pods,\n--listen 0.0.0.0:PORT): HOST keeps the bound ports\n(of "
		 "the data plane and metrics too); HOST:PORT maps\nthe control port"},
	{"data-advertise", ZS_OPT_WORD, .config = true, .val = 'A', .arg = "HOST[:PORT]",
	 .help = "the same for the data plane (default: --advertise's\nhost, the bound data port)"},
	{"shm-group", ZS_OPT_WORD, .config = true, .val = 9, .arg = "GROUP",
	 .help = "shared-memory trainers of this group (name or id,\ntheir primary group) may connect "
		 "besides this\nserver's user and root"},
	TLS_OPTS,
	{"config", ZS_OPT_FILE, .val = 4, .arg = "FILE",
	 .help = "a launch configuration (zshardctl config --help):\nits server.* keys, coordinator "
		 "and tls_*; flags win"},
	{"port-file", ZS_OPT_PATH, .val = 'p', .arg = "FILE",
	 .help = "also write the bound HOST:PORT to FILE"},
	{"coordinator-timeout-ms", ZS_OPT_NUM, 0, MS_DAY, .config = true, .val = 'w', .arg = "MS",
	 .help = "how long to wait for the coordinator at start\n(default 300000)"},
	{"metrics", ZS_OPT_ADDR, .config = true, .val = 'm', .arg = "HOST:PORT",
	 .help = "serve Prometheus metrics at HOST:PORT/metrics: https\nwith --tls-*, else http "
		 "(port 0: a free one; the\ncoordinator lists it)"},
	METRICS_CLIENTS,
	{"rdma", ZS_OPT_CHOICE, .choices = "auto|on|off", .config = true, .val = 'R',
	 .arg = "auto|on|off",
	 .help = "offer the rdma data path: auto (default) where an RDMA\ndevice works, on "
		 "(refuse to start without one), off"},
	DAEMON_TAIL,
	{NULL},
};

const struct zs_opt zs_opts_coordinator[] = {
	{"listen", ZS_OPT_ADDR, .config = true, .val = 'l', .arg = "HOST:PORT",
	 .help = "address to serve on (default 127.0.0.1:7400;\nport 0 picks a free port)"},
	{"data-dir", ZS_OPT_PATH, .config = true, .val = 'd', .arg = "DIR",
	 .help = "catalog directory (created if missing)"},
	{"etcd", ZS_OPT_URLS, .config = true, .val = 5, .arg = "HOST:PORT,...",
	 .help = "the catalog in this etcd cluster (its client URLs;\nhttps://HOST:PORT: TLS with "
		 "this daemon's --tls-*),\nwith leader election instead of DIR"},
	{"etcd-prefix", ZS_OPT_WORD, .config = true, .val = 6, .arg = "P",
	 .help = "the keys' prefix in etcd (default /zshard): one\nprefix per zshard cluster "
		 "sharing an etcd"},
	{"etcd-lease-s", ZS_OPT_NUM, 1, 3600, .config = true, .val = 7, .arg = "S",
	 .help = "the leader's etcd lease (default 5): a lost leader\nis replaced within about S "
		 "seconds"},
	{"port-file", ZS_OPT_PATH, .val = 'p', .arg = "FILE",
	 .help = "also write the bound HOST:PORT to FILE"},
	{"lease-ms", ZS_OPT_NUM, 100, 3600000, .config = true, .val = 'L', .arg = "MS",
	 .help = "a server silent this long is marked down (default 10000)"},
	{"trainer-lease-ms", ZS_OPT_NUM, 3000, 3600000, .config = true, .val = 'T', .arg = "MS",
	 .help = "a trainer silent this long loses its rank and its\njob rolls back to its latest "
		 "checkpoint (default 10000)"},
	{"trainer-gone-ms", ZS_OPT_NUM, 1500, 3600000, .config = true, .val = 'G', .arg = "MS",
	 .help = "a trainer whose data connections to a server all\nended and that has not "
		 "renewed its lease for this long\nis gone: its job rolls back then, not at the "
		 "lease's\nend (default 3000; trainers renew every second;\nas long as the lease: "
		 "the lease alone)"},
	{"advertise", ZS_OPT_WORD, .config = true, .val = 'a', .arg = "HOST[:PORT]",
	 .help = "the address to report (zshardctl status, the metrics\nendpoint's host) when "
		 "peers reach this one under\nanother (NAT, containers, --listen 0.0.0.0)"},
	TLS_OPTS,
	{"tls-roles", ZS_OPT_CHOICE, .choices = "optional|required", .config = true, .val = 8,
	 .arg = "MODE",
	 .help = "with TLS: whether a client certificate must name its\nrole (a URI "
		 "zshard:role:NAME or its OU: admin,\noperator, trainer, reader, server); "
		 "optional (the\ndefault): one that names none is an admin's"},
	{"secret-key", ZS_OPT_FILE, .config = true, .val = 9, .arg = "FILE",
	 .help = "the key (32 bytes, or 64 hex digits; mode 0600,\n0400 or 0440) the catalog's "
		 "job tokens are\nsealed with (AES-256-GCM); default: DIR/secret.key,\nmade at the "
		 "first start;\n"
		 "with --etcd: the same file on every coordinator\n(without it the tokens stay "
		 "unsealed in etcd)"},
	{"data-tls", ZS_OPT_CHOICE, .choices = "off|on", .config = true, .val = 10,
	 .arg = "MODE",
	 .help = "on: every job's tcp data plane encrypted (TLS 1.3\nrecords keyed by the job's "
		 "token; a job spec's\ndata_tls, for all jobs); off (the default): each\njob's "
		 "spec says"},
	{"config", ZS_OPT_FILE, .val = 4, .arg = "FILE",
	 .help = "a launch configuration (zshardctl config --help):\nits coordinator.* keys and "
		 "tls_*; flags win"},
	{"metrics", ZS_OPT_ADDR, .config = true, .val = 'm', .arg = "HOST:PORT",
	 .help = "serve Prometheus metrics at HOST:PORT/metrics: https\nwith --tls-*, else http "
		 "(port 0: a free one;\nzshardctl status shows it)"},
	METRICS_CLIENTS,
	DAEMON_TAIL,
	{NULL},
};

/* keys without a program: config = true for all */
const struct zs_opt zs_opts_common[] = {
	{"coordinator", ZS_OPT_ADDRS, .config = true, .arg = "HOST:PORT,...",
	 .help = "everyone: the coordinator, or the list of a coordinator\ngroup (the daemons' "
		 "--coordinator, $ZSHARD_COORDINATOR)"},
	{"tls-ca", ZS_OPT_FILE, .config = true, .arg = "FILE",
	 .help = "everyone: the CA of mutual TLS on the control plane\n(with tls_cert and "
		 "tls_key: all three or none)"},
	{"tls-cert", ZS_OPT_FILE, .config = true, .arg = "FILE",
	 .help = "everyone: this program's certificate"},
	{"tls-key", ZS_OPT_FILE, .config = true, .arg = "FILE",
	 .help = "everyone: its key"},
	{"stage", ZS_OPT_NUM, 1, 3, .config = true, .arg = "1|2|3",
	 .help = "zshardctl job create: the stage of a spec that names\nnone"},
	{"transport", ZS_OPT_CHOICE, .choices = "auto|tcp|shm|rdma", .config = true,
	 .arg = "auto|tcp|shm|rdma", .help = "trainers: the data plane (default auto)"},
	{"prefetch", ZS_OPT_NUM, 0, 64, .config = true, .arg = "N",
	 .help = "trainers' step driver: units gathered ahead (default 1)"},
	{"push-depth", ZS_OPT_NUM, 0, 64, .config = true, .arg = "N",
	 .help = "trainers' step driver: pushes in flight (0: as many\nas memory allows)"},
	{"max-live-bytes", ZS_OPT_SIZE, .config = true, .arg = "BYTES",
	 .help = "trainers' step driver: gathered parameters held at\nonce (0: no bound)"},
	{NULL},
};

const char *zs_opt_kind_name(enum zs_opt_kind k)
{
	static const char *const n[] = {"HOST:PORT", "HOST:PORT,...", "[http[s]://]HOST:PORT,...",
					"SIZE", "N", "WORD", "DIR", "FILE", "CHOICE", "N|emulated",
					"(no value)"};
	return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "?";
}

const struct zs_opt *zs_opt_find(const struct zs_opt *table, const char *name)
{
	for (const struct zs_opt *o = table; o->name; o++) {
		size_t i;
		for (i = 0; o->name[i] && name[i]; i++)
			if (o->name[i] != name[i] && !(o->name[i] == '-' && name[i] == '_'))
				break;
		if (!o->name[i] && !name[i])
			return o;
	}
	return NULL;
}

/* each item of a comma-separated list a host:port with a real port, after
 * an optional scheme when urls */
static bool list_ok(const char *v, bool urls, char *why, size_t len)
{
	struct zs_error e = {0};
	char host[ZS_HOST_MAX], one[512];
	uint16_t port;

	for (const char *p = v; *p;) {
		size_t l = strcspn(p, ",");
		char *s = one, *end;
		snprintf(one, sizeof one, "%.*s", (int)l, p);
		while (isspace((unsigned char)*s))
			s++;
		for (end = s + strlen(s); end > s && isspace((unsigned char)end[-1]);)
			*--end = '\0';
		if (urls && !strncmp(s, "https://", 8))
			s += 8;
		else if (urls && !strncmp(s, "http://", 7))
			s += 7;
		/* (port is set only by a parse that succeeds) */
		if (zs_parse_hostport(s, host, &port, &e)) {
			snprintf(why, len, "%.200s", e.msg);
			return false;
		}
		if (!port) {
			snprintf(why, len, "'%.100s': an address of a list needs a real port "
				 "(HOST:PORT)", s);
			return false;
		}
		p += l + (p[l] == ',');
	}
	return true;
}

bool zs_opt_check(const struct zs_opt *o, const char *v, char *why, size_t len)
{
	struct zs_error e = {0};
	char host[ZS_HOST_MAX];
	uint16_t port;
	uint64_t n;

	if (!*v) {
		snprintf(why, len, "no value");
		return false;
	}
	switch (o->kind) {
	case ZS_OPT_ADDR:
		if (zs_parse_hostport(v, host, &port, &e)) {
			snprintf(why, len, "%.200s", e.msg);
			return false;
		}
		return true;
	case ZS_OPT_ADDRS:
	case ZS_OPT_URLS:
		return list_ok(v, o->kind == ZS_OPT_URLS, why, len);
	case ZS_OPT_SIZE:
		if (zs_parse_size(v, &n, &e)) {
			snprintf(why, len, "%.200s", e.msg);
			return false;
		}
		if (n < o->min || (o->max && n > o->max)) {
			if (o->max)
				snprintf(why, len, "must be %llu to %llu bytes", o->min, o->max);
			else
				snprintf(why, len, "must be at least %llu bytes", o->min);
			return false;
		}
		return true;
	case ZS_OPT_NUM:
		if (zs_parse_u64(v, o->min, o->max ? o->max : ~0ULL, &n, &e)) {
			snprintf(why, len, "%.200s", e.msg);
			return false;
		}
		return true;
	case ZS_OPT_CHOICE: {
		size_t l = strlen(v);
		for (const char *p = o->choices; *p;) {
			size_t w = strcspn(p, "|");
			if (w == l && !strncmp(p, v, l))
				return true;
			p += w + (p[w] == '|');
		}
		snprintf(why, len, "'%.64s' is not one of %s", v, o->choices);
		return false;
	}
	case ZS_OPT_GPU:
		if (!strcmp(v, "emulated") || !zs_parse_u64(v, 0, 1023, &n, NULL))
			return true;
		snprintf(why, len, "'%.64s' is not a device number (0-1023) or 'emulated'", v);
		return false;
	case ZS_OPT_FILE: {
		struct stat sb;
		if (stat(v, &sb) || !S_ISREG(sb.st_mode) || access(v, R_OK)) {
			snprintf(why, len, "%.200s is %s", v,
				 stat(v, &sb) ? "not there" : S_ISREG(sb.st_mode) ? "not readable"
										   : "not a file");
			return false;
		}
		return true;
	}
	case ZS_OPT_WORD:
		for (const char *p = v; *p; p++)
			if (isspace((unsigned char)*p)) {
				snprintf(why, len, "one word expected");
				return false;
			}
		return true;
	case ZS_OPT_PATH:
	case ZS_OPT_FLAG:
		return true;
	}
	snprintf(why, len, "unknown kind");
	return false;
}

size_t zs_opts_getopt(const struct zs_opt *t, struct option *out, size_t cap)
{
	size_t n = 0;

	for (const struct zs_opt *o = t; o->name && n + 1 < cap; o++)
		out[n++] = (struct option){o->name, o->kind == ZS_OPT_FLAG ? no_argument
									 : required_argument,
					   NULL, o->val};
	out[n] = (struct option){0};
	return n;
}

void zs_opts_usage(FILE *f, const struct zs_opt *t)
{
	for (const struct zs_opt *o = t; o->name; o++) {
		char head[64];
		int w = snprintf(head, sizeof head, "  --%s%s%s", o->name, o->arg ? " " : "",
				 o->arg ? o->arg : "");
		const char *h = o->help ? o->help : "";
		/* the help from column 24, on the flag's line when it fits */
		if (w <= 22)
			fprintf(f, "%-23s", head);
		else
			fprintf(f, "%s\n%23s", head, "");
		for (const char *p = h;;) {
			size_t l = strcspn(p, "\n");
			fprintf(f, "%.*s\n", (int)l, p);
			if (!p[l])
				break;
			p += l + 1;
			fprintf(f, "%23s", "");
		}
	}
}

/* s for roff: '-' and '\' escaped; a line break of the help a space */
static void roff_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '-' || *s == '\\')
			fputc('\\', f);
		fputc(*s == '\n' ? ' ' : *s, f);
	}
}

void zs_opts_man(FILE *f, const struct zs_opt *t, const char *prefix)
{
	for (const struct zs_opt *o = t; o->name; o++) {
		fputs(".TP\n.B \\-\\-", f);
		roff_text(f, o->name);
		if (o->arg) {
			fputs(" \\fI", f);
			roff_text(f, o->arg);
			fputs("\\fR", f);
		}
		fputs("\n\\&", f);
		roff_text(f, o->help ? o->help : "");
		fputs("\n", f);
		if (prefix && (o->config || zs_opt_find(zs_opts_common, o->name))) {
			/* its program's key, or everyone's (coordinator, tls_*) */
			fputs(".br\nIn a launch configuration: \\fB", f);
			zs_opt_key(f, o->config ? prefix : "", o->name);
			fputs("\\fR\n", f);
		}
	}
}

void zs_opts_man_keys(FILE *f, const struct zs_opt *t, const char *prefix)
{
	for (const struct zs_opt *o = t; o->name; o++) {
		if (!o->config)
			continue;
		fputs(".TP\n.B ", f);
		zs_opt_key(f, prefix, o->name);
		fputs(" = \\fI", f);
		roff_text(f, o->arg ? o->arg : zs_opt_kind_name(o->kind));
		fputs("\\fR\n\\&", f);
		roff_text(f, o->help ? o->help : "");
		fputs("\n", f);
	}
}

void zs_opt_key(FILE *f, const char *prefix, const char *name)
{
	fputs(prefix ? prefix : "", f);
	for (const char *p = name; *p; p++)
		fputc(*p == '-' ? '_' : *p, f);
}

int zs_opt_flag(const char *prog, const struct zs_opt *table, const char *name, const char *v)
{
	const struct zs_opt *o = zs_opt_find(table, name);
	char why[256];

	if (!o || !v || zs_opt_check(o, v, why, sizeof why))
		return 0;
	fprintf(stderr, "%s: --%s: %s\n", prog, name, why);
	return 2;
}
