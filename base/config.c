/*
 * config.c - the launch configuration file (see base/config.h): parsing,
 * per-key checks, and a daemon's flags from it.
 */
#include "base/config.h"
#include "base/env.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/opts.h"
#include "base/util.h"

/* A key: PROGRAM.KEY from that program's table, KEY from the common one
 * (base/opts.h): the daemons check their flags with the same entries. */
static const struct zs_opt *find_key(const char *k)
{
	const char *dot = strchr(k, '.');
	const struct zs_opt *o;

	if (strchr(k, '-'))
		return NULL; /* keys are written with '_' */
	if (!dot)
		return zs_opt_find(zs_opts_common, k);
	if (!strncmp(k, "server.", 7))
		o = zs_opt_find(zs_opts_server, k + 7);
	else if (!strncmp(k, "coordinator.", 12))
		o = zs_opt_find(zs_opts_coordinator, k + 12);
	else
		return NULL;
	/* a daemon's setting a file may give */
	return o && o->config ? o : NULL;
}

/* Keys that exclude each other: the first given wins the complaint. */
static const char *const exclusive[][2] = {
	{"coordinator.data_dir", "coordinator.etcd"},
};
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

enum zs_status zs_config_load(const char *path, struct zs_config *c, struct zs_error *err)
{
	char line[1024], why[256];
	FILE *f;
	int ln = 0;

	struct stat sb;
	char base[512] = "";

	memset(c, 0, sizeof *c);
	if (path && !stat(path, &sb) && S_ISDIR(sb.st_mode))
		return zs_fail(err, ZS_EINVAL, "config %s: is a directory, not a file", path);
	if (!path || !(f = fopen(path, "r")))
		return zs_fail(err, ZS_EINVAL, "config %s: cannot read it", path ? path : "(none)");
	snprintf(c->path, sizeof c->path, "%s", path);
	/* relative paths in it are the file's folder's */
	if (strrchr(path, '/'))
		snprintf(base, sizeof base, "%.*s/", (int)(strrchr(path, '/') - path), path);
	while (fgets(line, sizeof line, f)) {
		char *s, *eq, *k, *v;
		const struct zs_opt *key;
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
		char rel[1024];
		if ((key->kind == ZS_OPT_FILE || key->kind == ZS_OPT_PATH) && *v && *v != '/' && base[0]) {
			snprintf(rel, sizeof rel, "%s%s", base, v);
			v = rel;
		}
		if (strlen(v) >= sizeof c->e[0].value || !zs_opt_check(key, v, why, sizeof why)) {
			zs_fail(err, ZS_EINVAL, "%s:%d: %s: %s", path, ln, k,
				strlen(v) >= sizeof c->e[0].value ? "the value is too long" : why);
			goto fail;
		}
		for (size_t x = 0; x < sizeof exclusive / sizeof exclusive[0]; x++) {
			const char *other = !strcmp(k, exclusive[x][0])   ? exclusive[x][1]
					    : !strcmp(k, exclusive[x][1]) ? exclusive[x][0]
									 : NULL;
			if (other && zs_config_get(c, other)) {
				zs_fail(err, ZS_EINVAL, "%s:%d: %s: not with %s (line %d): one or the other",
					path, ln, k, other, zs_config_line(c, other));
				goto fail;
			}
		}
		if (!(g = realloc(c->e, (c->n + 1) * sizeof *g))) {
			zs_fail(err, ZS_ENOMEM, "out of memory");
			goto fail;
		}
		c->e = g;
		snprintf(g[c->n].key, sizeof g[c->n].key, "%s", k);
		snprintf(g[c->n].value, sizeof g[c->n].value, "%.*s", (int)sizeof g[c->n].value - 1, v);
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

int zs_config_line(const struct zs_config *c, const char *key)
{
	for (size_t i = 0; c && i < c->n; i++)
		if (!strcmp(c->e[i].key, key))
			return c->e[i].line;
	return 0;
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

const char *zs_local_coordinator(char *buf, size_t len, char *dir, size_t dlen)
{
	const char *d = zs_env("ZSHARD_LOCAL_DIR"), *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char path[4096];
	FILE *f;
	size_t l;

	if (d && *d)
		snprintf(dir, dlen, "%s", d);
	else if (state && *state)
		snprintf(dir, dlen, "%s/zshard/local", state);
	else
		snprintf(dir, dlen, "%s/.local/state/zshard/local", home && *home ? home : "/root");
	snprintf(path, sizeof path, "%s/run/coordinator.pid", dir);
	if (access(path, F_OK))
		return NULL; /* none started, or stopped (stop removes the pid file) */
	snprintf(path, sizeof path, "%s/coordinator.listen", dir);
	if (!(f = fopen(path, "r")))
		return NULL;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	for (l = strlen(buf); l && isspace((unsigned char)buf[l - 1]); l--)
		buf[l - 1] = '\0';
	return buf[0] ? buf : NULL;
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
