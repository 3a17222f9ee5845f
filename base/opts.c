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

const struct zs_opt zs_opts_server[] = {
	{"coordinator", ZS_OPT_ADDRS},
	{"listen", ZS_OPT_ADDR, .config = true},
	{"data-listen", ZS_OPT_ADDR, .config = true},
	{"advertise", ZS_OPT_WORD, .config = true},
	{"data-advertise", ZS_OPT_WORD, .config = true},
	{"data-dir", ZS_OPT_PATH, .config = true},
	{"capacity", ZS_OPT_SIZE, 1, 0, .config = true},
	{"memory-budget", ZS_OPT_SIZE, .config = true},
	{"gpu", ZS_OPT_GPU, .config = true},
	{"gpu-budget", ZS_OPT_SIZE, 1, 0, .config = true},
	{"landing-budget", ZS_OPT_SIZE, 1, 0, .config = true},
	{"metrics", ZS_OPT_ADDR, .config = true},
	{"step-timeout-ms", ZS_OPT_NUM, 100, MS_DAY, .config = true},
	{"coordinator-timeout-ms", ZS_OPT_NUM, 0, MS_DAY, .config = true},
	{"rdma", ZS_OPT_CHOICE, .choices = "auto|on|off", .config = true},
	{"log-level", ZS_OPT_CHOICE, .choices = "debug|info|warn|error", .config = true},
	{"port-file", ZS_OPT_PATH},
	{"config", ZS_OPT_FILE},
	{"tls-ca", ZS_OPT_FILE},
	{"tls-cert", ZS_OPT_FILE},
	{"tls-key", ZS_OPT_FILE},
	{NULL},
};

const struct zs_opt zs_opts_coordinator[] = {
	{"listen", ZS_OPT_ADDR, .config = true},
	{"advertise", ZS_OPT_WORD, .config = true},
	{"data-dir", ZS_OPT_PATH, .config = true},
	{"metrics", ZS_OPT_ADDR, .config = true},
	{"lease-ms", ZS_OPT_NUM, 100, 3600000, .config = true},
	{"trainer-lease-ms", ZS_OPT_NUM, 3000, 3600000, .config = true},
	{"etcd", ZS_OPT_URLS, .config = true},
	{"etcd-prefix", ZS_OPT_WORD, .config = true},
	{"etcd-lease-s", ZS_OPT_NUM, 1, 3600, .config = true},
	{"log-level", ZS_OPT_CHOICE, .choices = "debug|info|warn|error", .config = true},
	{"port-file", ZS_OPT_PATH},
	{"config", ZS_OPT_FILE},
	{"tls-ca", ZS_OPT_FILE},
	{"tls-cert", ZS_OPT_FILE},
	{"tls-key", ZS_OPT_FILE},
	{NULL},
};

/* keys without a program: config = true for all */
const struct zs_opt zs_opts_common[] = {
	{"coordinator", ZS_OPT_ADDRS, .config = true},
	{"tls-ca", ZS_OPT_FILE, .config = true},
	{"tls-cert", ZS_OPT_FILE, .config = true},
	{"tls-key", ZS_OPT_FILE, .config = true},
	/* the stage of jobs zshardctl creates from a spec that names none */
	{"stage", ZS_OPT_NUM, 1, 3, .config = true},
	{"transport", ZS_OPT_CHOICE, .choices = "auto|tcp|shm|rdma", .config = true},
	{"prefetch", ZS_OPT_NUM, 0, 64, .config = true},
	{"push-depth", ZS_OPT_NUM, 0, 64, .config = true},
	{"max-live-bytes", ZS_OPT_SIZE, .config = true},
	{NULL},
};

const char *zs_opt_kind_name(enum zs_opt_kind k)
{
	static const char *const n[] = {"HOST:PORT", "HOST:PORT,...", "[http[s]://]HOST:PORT,...",
					"SIZE", "N", "WORD", "DIR", "FILE", "CHOICE", "N|emulated"};
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
		if (zs_parse_hostport(s, host, &port, &e) || !port) {
			snprintf(why, len, "%.200s", port ? e.msg : "an address of a list needs a real port");
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
		return true;
	}
	snprintf(why, len, "unknown kind");
	return false;
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
