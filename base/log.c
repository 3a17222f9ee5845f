/* log.c - the one-line event log (see log.h). */
#include "base/log.h"
#include "base/env.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static const char *component = "zshard";
static enum zs_log_level level = ZS_LOG_INFO;

int zs_log_parse_level(const char *name, enum zs_log_level *out)
{
	static const char *const names[] = {"debug", "info", "warn", "error"};

	for (int i = 0; name && i < 4; i++)
		if (!strcmp(name, names[i])) {
			*out = (enum zs_log_level)i;
			return 0;
		}
	return -1;
}

int zs_log_level_option(const char *prog, const char *arg)
{
	enum zs_log_level lv;

	if (zs_log_parse_level(arg, &lv)) {
		fprintf(stderr, "%s: --log-level: '%s' is not one of debug, info, warn, error\n",
			prog, arg);
		return 2;
	}
	zs_log_set_level(lv);
	return 0;
}

void zs_log_init(const char *name)
{
	component = name;
	zs_log_parse_level(zs_env("ZSHARD_LOG"), &level);
}

void zs_log_set_level(enum zs_log_level lvl) { level = lvl; }

void zs_log(enum zs_log_level lvl, const char *fmt, ...)
{
	static const char *const tag[] = {"DEBUG", "INFO", "WARN", "ERROR"};
	char line[1024], ts[32];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	int n;

	if (lvl < level)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof line, "%s.%03ldZ %-5s %s: ", ts,
		     (long)(tv.tv_usec / 1000), tag[lvl], component);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	/* one fputs per line, so concurrent threads never interleave */
	strncat(line, "\n", sizeof line - strlen(line) - 1);
	fputs(line, stderr);
}
