/*
 * config.c - the launch configuration file (see base/config.h): parsing,
 * per-key checks, and a daemon's flags from it.
 */
#include "base/config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

enum kind { ADDR, ADDRS, SIZE, NUM, WORD, PATH };

static const struct key {
	const char *key;
	enum kind kind;
	unsigned long long max; /* NUM */
	unsigned long long min; /* NUM */
} keys[] = {
	{"coordinator", ADDRS, 0},
	/* the stage of jobs zshardctl creates from a spec that names none */
	{"stage", NUM, 3, 1},
	{"tls_ca", PATH, 0},
	{"tls_cert", PATH, 0},
	{"tls_key", PATH, 0},
	{"transport", WORD, 0},
	{"prefetch", NUM, 64},
	{"push_depth", NUM, 64},
	{"max_live_bytes", SIZE, 0},
	{"server.listen", ADDR, 0},
	{"server.data_listen", ADDR, 0},
	{"server.advertise", WORD, 0},
	{"server.data_advertise", WORD, 0},
	{"server.data_dir", PATH, 0},
	{"server.capacity", SIZE, 0},
	{"server.memory_budget", SIZE, 0},
	{"server.gpu", WORD, 0},
	{"server.gpu_budget", SIZE, 0},
	{"server.landing_budget", SIZE, 0},
	{"server.metrics", ADDR, 0},
	{"server.step_timeout_ms", NUM, 86400000},
	{"server.rdma", WORD, 0},
	{"coordinator.listen", ADDR, 0},
	{"coordinator.advertise", WORD, 0},
	{"coordinator.data_dir", PATH, 0},
	{"coordinator.metrics", ADDR, 0},
	{"coordinator.lease_ms", NUM, 3600000},
	{"coordinator.trainer_lease_ms", NUM, 3600000},
	{"coordinator.etcd", ADDRS, 0},
	{"coordinator.etcd_prefix", WORD, 0},
	{"coordinator.etcd_lease_s", NUM, 3600},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

static const struct key *find_key(const char *k)
{
	for (size_t i = 0; i < N_KEYS; i++)
		if (!strcmp(keys[i].key, k))
			return &keys[i];
	return NULL;
}

static char *trim(char *s)
{
	char *e;
	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

/* Checks one value of its kind; the reason into why. */
static bool value_ok(const struct key *k, const char *v, char *why, size_t len)
{
	struct zs_error e = {0};
	char host[ZS_HOST_MAX], one[512];
	uint16_t port;
	uint64_t n;

	if (!*v) {
		snprintf(why, len, "no value");
		return false;
	}
	switch (k->kind) {
	case ADDR:
		if (zs_parse_hostport(v, host, &port, &e)) {
			snprintf(why, len, "%.200s", e.msg);
			return false;
		}
		return true;
	case ADDRS:
		for (const char *p = v; *p;) {
			size_t l = strcspn(p, ",");
			snprintf(one, sizeof one, "%.*s", (int)l, p);
			if (zs_parse_hostport(trim(one), host, &port, &e) || !port) {
				snprintf(why, len, "%.200s", port ? e.msg : "an address of a list needs a real port");
				return false;
			}
			p += l + (p[l] == ',');
		}
		return true;
	case SIZE:
		if (zs_parse_size(v, &n, &e)) {
			snprintf(why, len, "%.200s", e.msg);
			return false;
		}
		return true;
	case NUM:
		if (zs_parse_u64(v, k->min, k->max, &n, &e)) {
			snprintf(why, len, "%.200s", e.msg);
			return false;
		}
		return true;
	case WORD:
		for (const char *p = v; *p; p++)
			if (isspace((unsigned char)*p)) {
				snprintf(why, len, "one word expected");
				return false;
			}
		return true;
	case PATH:
		return true;
	}
	return false;
}

enum zs_status zs_config_load(const char *path, struct zs_config *c, struct zs_error *err)
{
	char line[1024], why[256];
	FILE *f;
	int ln = 0;

	memset(c, 0, sizeof *c);
	if (!path || !(f = fopen(path, "r")))
		return zs_fail(err, ZS_EINVAL, "config %s: cannot read it", path ? path : "(none)");
	snprintf(c->path, sizeof c->path, "%s", path);
	while (fgets(line, sizeof line, f)) {
		char *s, *eq, *k, *v;
		const struct key *key;
		struct zs_config_entry *g;
		ln++;
		if (!strchr(line, '\n') && !feof(f)) {
			zs_fail(err, ZS_EINVAL, "%s:%d: the line is too long", path, ln);
			goto fail;
		}
		if ((s = strchr(line, '#')))
			*s = '\0';
		s = trim(line);
		if (!*s)
			continue;
		if (!(eq = strchr(s, '='))) {
			zs_fail(err, ZS_EINVAL, "%s:%d: want KEY = VALUE", path, ln);
			goto fail;
		}
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		if (!(key = find_key(k))) {
			zs_fail(err, ZS_EINVAL, "%s:%d: unknown key '%.48s' (see zshardctl config --help)",
				path, ln, k);
			goto fail;
		}
		if (zs_config_get(c, k)) {
			zs_fail(err, ZS_EINVAL, "%s:%d: '%s' is set twice", path, ln, k);
			goto fail;
		}
		if (strlen(v) >= sizeof c->e[0].value || !value_ok(key, v, why, sizeof why)) {
			zs_fail(err, ZS_EINVAL, "%s:%d: %s: %s", path, ln, k,
				strlen(v) >= sizeof c->e[0].value ? "the value is too long" : why);
			goto fail;
		}
		if (!(g = realloc(c->e, (c->n + 1) * sizeof *g))) {
			zs_fail(err, ZS_ENOMEM, "out of memory");
			goto fail;
		}
		c->e = g;
		snprintf(g[c->n].key, sizeof g[c->n].key, "%s", k);
		snprintf(g[c->n].value, sizeof g[c->n].value, "%s", v);
		g[c->n++].line = ln;
	}
	fclose(f);
	return ZS_OK;
fail:
	fclose(f);
	zs_config_release(c);
	return err ? err->code : ZS_EINVAL;
}

void zs_config_release(struct zs_config *c)
{
	free(c->e);
	c->e = NULL;
	c->n = 0;
}

const char *zs_config_get(const struct zs_config *c, const char *key)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (!strcmp(c->e[i].key, key))
			return c->e[i].value;
	return NULL;
}

const char *zs_config_coordinator(const struct zs_config *c, char *buf, size_t len)
{
	const char *v = zs_config_get(c, "coordinator");
	size_t l;

	if (!v)
		return NULL;
	/* the list without its spaces: every client follows a list */
	l = 0;
	for (; *v && l + 1 < len; v++)
		if (!isspace((unsigned char)*v))
			buf[l++] = *v;
	buf[l] = '\0';
	return buf;
}

const char *zs_config_flag(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			return argv[i + 1];
		if (!strncmp(argv[i], "--config=", 9))
			return argv[i] + 9;
	}
	return NULL;
}

enum zs_status zs_config_daemon(const char *who, int *argc, char ***argv, struct zs_error *err)
{
	static struct zs_config file; /* the process's: what the new argv points into */
	static char **v;
	const char *path = zs_config_flag(*argc, *argv);
	enum zs_status st;

	if (!path)
		return ZS_OK;
	if ((st = zs_config_load(path, &file, err)) ||
	    (st = zs_config_argv(&file, who, *argc, *argv, &v, argc, err)))
		return st;
	*argv = v;
	return ZS_OK;
}

enum zs_status zs_config_argv(const struct zs_config *c, const char *who, int argc, char **argv,
			      char ***out, int *out_argc, struct zs_error *err)
{
	size_t wl = strlen(who), need = (size_t)(argc + (int)c->n + 1) * sizeof(char *), text = 0;
	char **v, *buf;
	int n = 0;

	/* the vector and its "--flag=value" strings in one allocation */
	for (size_t i = 0; i < c->n; i++)
		text += strlen(c->e[i].key) + strlen(c->e[i].value) + 4;
	if (!(v = malloc(need + text)))
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	buf = (char *)(v + argc + (int)c->n + 1);
	v[n++] = argv[0];
	for (size_t i = 0; i < c->n; i++) {
		const char *k = c->e[i].key, *val = c->e[i].value;
		char first[sizeof c->e[i].value];
		if (!strncmp(k, who, wl) && k[wl] == '.')
			k += wl + 1;
		else if (strncmp(k, "tls_", 4) && (strcmp(k, "coordinator") || strcmp(who, "server")))
			continue; /* another program's key */
		if (!strcmp(k, "coordinator"))
			val = zs_config_coordinator(c, first, sizeof first);
		v[n++] = buf;
		buf += sprintf(buf, "--%s=%s", k, val) + 1;
		for (char *p = v[n - 1] + 2; *p != '='; p++)
			if (*p == '_')
				*p = '-';
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc) {
			i++;
			continue;
		}
		if (!strncmp(argv[i], "--config=", 9))
			continue;
		v[n++] = argv[i];
	}
	v[n] = NULL;
	*out = v;
	*out_argc = n;
	return ZS_OK;
}
