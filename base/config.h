/*
 * config.h - the launch configuration: one file of "key = value" lines
 * ('#' starts a comment) that the daemons (--config FILE), libzshard
 * ($ZSHARD_CONFIG) and zshardctl (--config FILE or $ZSHARD_CONFIG) read,
 * each taking its keys; `zshardctl config check FILE` validates it all.
 *
 * The keys are those of base/opts.h's tables: everyone's (coordinator,
 * tls_*, the trainers' transport and step driver, zshardctl's stage), and
 * server.KEY / coordinator.KEY for each daemon flag a file may set
 * (--KEY, '_' for '-'). zshardctl config keys and the manual pages list
 * them from the tables; nothing lists them by hand.
 *
 * Flags given on a command line win over the file.
 */
#ifndef ZS_BASE_CONFIG_H
#define ZS_BASE_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#include "base/status.h"

struct zs_config_entry {
	char key[48];
	char value[512];
	int line;
};

struct zs_config {
	char path[512];
	struct zs_config_entry *e;
	size_t n;
};

/*
 * Reads and checks path: every line a known key once, each value of its
 * kind and within the bounds the daemons take (an address, a size, a
 * number, one of a few words, a device, a file that is there), no two
 * keys that exclude each other. Fails with ZS_EINVAL and "PATH:LINE:
 * what" for the first problem; *c is empty then. Relative paths are taken
 * from the file's folder.
 */
enum zs_status zs_config_load(const char *path, struct zs_config *c, struct zs_error *err);
/*
 * The same checks, going on past each problem: say(arg, "PATH:LINE: what")
 * for every one (an unknown key with the known one it looks like), *c
 * holding the lines that passed (release it). How many problems (0: the
 * file is valid). zshardctl config check.
 */
unsigned zs_config_check(const char *path, struct zs_config *c,
			 void (*say)(void *arg, const char *msg), void *arg);
/* The same over an open stream named name (its relative paths taken from
 * name's folder): the fuzzer's. */
unsigned zs_config_check_stream(FILE *f, const char *name, struct zs_config *c,
				void (*say)(void *arg, const char *msg), void *arg);
void zs_config_release(struct zs_config *c);
/* The value of key, or NULL (a relative path is the file's folder's). */
const char *zs_config_get(const struct zs_config *c, const char *key);
/* The line key was set on, or 0. */
int zs_config_line(const struct zs_config *c, const char *key);
/* The coordinator list ("HOST:PORT,...", spaces dropped) into buf (len
 * bytes); NULL when the file names none. */
const char *zs_config_coordinator(const struct zs_config *c, char *buf, size_t len);

/*
 * The local cluster's coordinator (zshard-local start without --dir): the
 * address in DIR/coordinator.listen into buf while DIR/run/coordinator.pid
 * says it runs, where DIR is $ZSHARD_LOCAL_DIR, else
 * ${XDG_STATE_HOME:-$HOME/.local/state}/zshard/local; NULL when none runs.
 * dir (dlen bytes) gets DIR either way, for a message. What every client
 * falls back on when neither its caller, the environment nor a launch
 * configuration names a coordinator.
 */
const char *zs_local_coordinator(char *buf, size_t len, char *dir, size_t dlen);

/*
 * A daemon's command line with the file's flags first: "server" or
 * "coordinator" picks its keys (and the shared coordinator and TLS keys
 * it takes). argv[0] stays first; --config FILE is dropped from what
 * follows, so the command line's flags come after and win. The result
 * (*out, *out_argc) is malloc'd: free(*out) (its strings live in c).
 */
enum zs_status zs_config_argv(const struct zs_config *c, const char *who, int argc, char **argv,
			      char ***out, int *out_argc, struct zs_error *err);

/* The --config FILE (or --config=FILE) of argv, or NULL. */
const char *zs_config_flag(int argc, char **argv);

/*
 * For a daemon's main: when argv has --config FILE, replaces *argc, *argv
 * with zs_config_argv's (kept for the process's life); else changes
 * nothing. who: "server" or "coordinator".
 */
enum zs_status zs_config_daemon(const char *who, int *argc, char ***argv, struct zs_error *err);

#endif
