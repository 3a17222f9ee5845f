/* log.c - the one-line event log (see log.h). */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static const char *component = "zshard";
static enum zs_log_level level = ZS_LOG_INFO;

void zs_log_init(const char *name)
{
	const char *env = getenv("ZSHARD_LOG");

	component = name;
	if (!env)
		return;
	if (!strcmp(env, "debug"))
		level = ZS_LOG_DEBUG;
	else if (!strcmp(env, "warn"))
		level = ZS_LOG_WARN;
	else if (!strcmp(env, "error"))
		level = ZS_LOG_ERROR;
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
