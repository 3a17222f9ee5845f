/*
 * common.c - what every zshardctl command shares: errors and usage errors
 * (exit 1 and 2), the coordinator connection, a command's flags, JSON.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

int cli_die(const char *fmt, ...)
{
	va_list ap;
	fputs("zshardctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int cli_usage_err(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "zshardctl %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see zshardctl %s --help)\n", cmd);
	return 2;
}

int cli_open_coord(struct ctx *x)
{
	struct zs_error err = {0};

	if (!x->coordinator)
		return cli_die(CLI_NO_COORDINATOR);
	if (zs_coord_open(x->coordinator, x->timeout_ms, 0, &x->c, &err))
		return cli_die("%s", err.msg);
	return 0;
}

/* Parses a command's own flags: --json and --help; returns the positionals. */
void cli_json_print(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', stdout);
	json_decref(j);
}

const char *cli_time(int64_t ms, char *buf, size_t len)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&sec, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

const char *cli_state_name(const struct zs_server_info *s)
{
	return !s->up ? "down" : s->health[0] ? "unwell" : "up";
}
