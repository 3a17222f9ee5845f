/*
 * config.c - the launch configuration file (see base/config.h): parsing,
 * per-key checks, and a daemon's flags from it.
 */
#include "base/config.h"
#include "base/env.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
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

/* Levenshtein distance of a and b, '-' and '_' alike (keys are short) */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64], prev, tmp;

	if (la >= 63 || lb >= 63)
		return 64;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			char x = a[i - 1] == '-' ? '_' : (char)tolower((unsigned char)a[i - 1]);
			char y = b[j - 1] == '-' ? '_' : b[j - 1];
			size_t best = prev + (x != y);
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			tmp = row[j];
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb];
}

/* The known key k is most likely a misspelling of, into out ("" if none
 * is close): a key's name in any table, with its program's prefix. */
static void suggest(const char *k, char *out, size_t len)
{
	static const struct {
		const char *prefix;
		const struct zs_opt *t;
	} tables[3] = {{"", zs_opts_common}, {"server.", zs_opts_server},
		       {"coordinator.", zs_opts_coordinator}};
	size_t best = (size_t)-1, limit = strlen(k) / 4 + 2;

	out[0] = '\0';
	for (int t = 0; t < 3; t++)
		for (const struct zs_opt *o = tables[t].t; o->name; o++) {
			char key[96];
			size_t d;
			if (!o->config)
				continue;
			snprintf(key, sizeof key, "%s%s", tables[t].prefix, o->name);
			for (char *p = key; *p; p++)
				*p = *p == '-' ? '_' : *p;
			d = distance(k, key);
			/* a daemon's key without its program: the prefix is missing */
			if (!strchr(k, '.') && d > 0 && !distance(k, key + strlen(tables[t].prefix)))
				d = 1;
			if (d <= limit && d < best) {
				best = d;
				snprintf(out, len, "'%s'", key);
			} else if (d <= limit && d == best && strlen(out) + strlen(key) + 8 < len) {
				/* as close: both said (data_dir: the server's or the coordinator's) */
				strcat(out, " or '");
				strcat(out, key);
				strcat(out, "'");
			}
		}
}

/*
 * Reads path into c, checking each line. say NULL: stops at the first
 * problem (into err: what the daemons and libzshard do); otherwise says
 * each problem and goes on past it (zshardctl config check). The number of
 * problems.
 */
static unsigned parse(const char *path, FILE *given, struct zs_config *c, struct zs_error *err,
		      void (*say)(void *, const char *), void *arg)
{
	char line[1024], why[256], msg[ZS_ERRMSG_MAX];
	unsigned problems = 0;
	FILE *f = given;
	int ln = 0;

	struct stat sb;
	char base[512] = "";

/* one problem: said and passed (say), or the load's error */
#define PROBLEM(...)                                                                      \
	do {                                                                              \
		snprintf(msg, sizeof msg, __VA_ARGS__);                                   \
		problems++;                                                               \
		if (!say) {                                                               \
			zs_fail(err, ZS_EINVAL, "%s", msg);                               \
			goto fail;                                                        \
		}                                                                         \
		say(arg, msg);                                                            \
	} while (0)

	memset(c, 0, sizeof *c);
	if (!f && path && !stat(path, &sb) && S_ISDIR(sb.st_mode)) {
		PROBLEM("config %s: is a directory, not a file", path);
		return problems;
	}
	if (!f && (!path || !(f = fopen(path, "r")))) {
		PROBLEM("config %s: cannot read it: %s", path ? path : "(none)",
			path ? strerror(errno) : "no file named");
		return problems;
	}
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
			PROBLEM("%s:%d: the line is too long", path, ln);
			while (fgets(line, sizeof line, f) && !strchr(line, '\n'))
				;
			continue;
		}
		if ((s = strchr(line, '#')))
			*s = '\0';
		s = trim(line);
		if (!*s)
			continue;
		if (!(eq = strchr(s, '='))) {
			PROBLEM("%s:%d: want KEY = VALUE", path, ln);
			continue;
		}
		*eq = '\0';
		k = trim(s);
		v = trim(eq + 1);
		if (!(key = find_key(k))) {
			char near[160];
			suggest(k, near, sizeof near);
			if (near[0])
				PROBLEM("%s:%d: unknown key '%.48s': did you mean %s? (zshardctl config "
					"keys lists them)", path, ln, k, near);
			else
				PROBLEM("%s:%d: unknown key '%.48s' (zshardctl config keys lists them)",
					path, ln, k);
			continue;
		}
		if (zs_config_get(c, k)) {
			PROBLEM("%s:%d: '%s' is set twice (first on line %d)", path, ln, k,
				zs_config_line(c, k));
			continue;
		}
		char rel[1024];
		if ((key->kind == ZS_OPT_FILE || key->kind == ZS_OPT_PATH) && *v && *v != '/' && base[0]) {
			snprintf(rel, sizeof rel, "%s%s", base, v);
			v = rel;
		}
		if (strlen(v) >= sizeof c->e[0].value || !zs_opt_check(key, v, why, sizeof why)) {
			PROBLEM("%s:%d: %s: %s", path, ln, k,
				strlen(v) >= sizeof c->e[0].value ? "the value is too long" : why);
			continue;
		}
		bool clash = false;
		for (size_t x = 0; x < sizeof exclusive / sizeof exclusive[0]; x++) {
			const char *other = !strcmp(k, exclusive[x][0])   ? exclusive[x][1]
					    : !strcmp(k, exclusive[x][1]) ? exclusive[x][0]
									 : NULL;
			if (other && zs_config_get(c, other)) {
				PROBLEM("%s:%d: %s: not with %s (line %d): one or the other", path, ln,
					k, other, zs_config_line(c, other));
				clash = true;
			}
		}
		if (clash)
			continue;
		if (!(g = realloc(c->e, (c->n + 1) * sizeof *g))) {
			zs_fail(err, ZS_ENOMEM, "out of memory");
			problems++;
			goto fail;
		}
		c->e = g;
		snprintf(g[c->n].key, sizeof g[c->n].key, "%s", k);
		snprintf(g[c->n].value, sizeof g[c->n].value, "%.*s", (int)sizeof g[c->n].value - 1, v);
		g[c->n++].line = ln;
	}
#undef PROBLEM
	if (f != given)
		fclose(f);
	return problems;
fail:
	if (f && f != given)
		fclose(f);
	zs_config_release(c);
	return problems;
}

enum zs_status zs_config_load(const char *path, struct zs_config *c, struct zs_error *err)
{
	struct zs_error e = {0};

	if (!parse(path, NULL, c, err ? err : &e, NULL, NULL))
		return ZS_OK;
	return err ? err->code : e.code;
}

unsigned zs_config_check(const char *path, struct zs_config *c,
			 void (*say)(void *arg, const char *msg), void *arg)
{
	return parse(path, NULL, c, NULL, say, arg);
}

unsigned zs_config_check_stream(FILE *f, const char *name, struct zs_config *c,
				void (*say)(void *arg, const char *msg), void *arg)
{
	return parse(name, f, c, NULL, say, arg);
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
