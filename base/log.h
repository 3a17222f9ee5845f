/*
 * log.h - one line per event: UTC timestamp, level, component, message,
 * on stderr. Info is for events an operator wants (start, stop, a server
 * up or down); per-request detail goes to debug. Thread-safe.
 */
#ifndef ZS_LOG_H
#define ZS_LOG_H

enum zs_log_level { ZS_LOG_DEBUG, ZS_LOG_INFO, ZS_LOG_WARN, ZS_LOG_ERROR };

/* Sets the component name printed on each line (kept by pointer). */
void zs_log_init(const char *component);

/* Lowest level printed; also read from $ZSHARD_LOG (debug|info|warn|error). */
void zs_log_set_level(enum zs_log_level lvl);

/* "debug", "info", "warn" or "error" into *out: 0; anything else (NULL
 * too): -1 and *out unchanged. */
int zs_log_parse_level(const char *name, enum zs_log_level *out);
/* A daemon's --log-level ARG: sets the level and returns 0, or says on
 * stderr what is wrong (prefixed with prog) and returns 2, the exit status
 * of bad usage. */
int zs_log_level_option(const char *prog, const char *arg);

void zs_log(enum zs_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define zs_debug(...) zs_log(ZS_LOG_DEBUG, __VA_ARGS__)
#define zs_info(...) zs_log(ZS_LOG_INFO, __VA_ARGS__)
#define zs_warn(...) zs_log(ZS_LOG_WARN, __VA_ARGS__)
#define zs_error(...) zs_log(ZS_LOG_ERROR, __VA_ARGS__)

#endif
