/*
 * opts.h - every setting of the daemons and of the trainers' launch
 * configuration in one table per program: its flag, its kind, its bounds,
 * whether a launch configuration may set it, its --help. A daemon's
 * getopt_long table and --help lines are made from its table
 * (zs_opts_getopt, zs_opts_usage); it checks each flag's value with
 * zs_opt_check against the table as it parses it, and
 * zshardctl config check checks each key of a file with the same call and
 * the same table, so a value one takes the other takes (tests/integration/
 * options.sh holds them to it, value by value); zshardctl config keys
 * lists the tables.
 */
#ifndef ZS_BASE_OPTS_H
#define ZS_BASE_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* ADDR host:port; ADDRS a comma-separated list of them (real ports); URLS
 * the same, each optionally http:// or https:// (etcd's form); SIZE bytes
 * with an optional K/M/G/T suffix; NUM an integer; WORD one word; PATH a
 * directory to be; FILE a readable file; CHOICE one of the words of
 * choices ("a|b|c"); GPU a device number or "emulated" */
enum zs_opt_kind {
	ZS_OPT_ADDR, ZS_OPT_ADDRS, ZS_OPT_URLS, ZS_OPT_SIZE, ZS_OPT_NUM, ZS_OPT_WORD,
	ZS_OPT_PATH, ZS_OPT_FILE, ZS_OPT_CHOICE, ZS_OPT_GPU, ZS_OPT_FLAG /* no value */
};

struct zs_opt {
	const char *name;           /* the flag without "--"; its key has '_' for '-' */
	enum zs_opt_kind kind;
	unsigned long long min, max; /* NUM, SIZE (max 0: none) */
	const char *choices;        /* CHOICE */
	bool config;                /* a launch configuration's PROGRAM.KEY may set it */
	int val;                    /* what getopt_long returns for it */
	const char *arg, *help;     /* --help: the value's name, and lines ('\n') */
};

/* The tables, each ended by a NULL name: zshard-server's and
 * zshard-coordinator's flags that take a value, and the keys without a
 * program (everyone's: coordinator, tls_*; the trainers' and zshardctl's:
 * stage, transport, prefetch, push_depth, max_live_bytes). */
extern const struct zs_opt zs_opts_server[], zs_opts_coordinator[], zs_opts_common[];

const char *zs_opt_kind_name(enum zs_opt_kind k);
/* name as a flag ("data-dir") or a key ("data_dir"); NULL if not there */
const struct zs_opt *zs_opt_find(const struct zs_opt *table, const char *name);
/* Whether v is a value of o; why it is not into why. */
bool zs_opt_check(const struct zs_opt *o, const char *v, char *why, size_t len);
/* A program's getopt_long table from its own (at most cap entries, the
 * last all zero); the number of options. */
size_t zs_opts_getopt(const struct zs_opt *t, struct option *out, size_t cap);
/* Its --help lines: each flag, its value's name, its help. */
void zs_opts_usage(FILE *f, const struct zs_opt *t);
/* The same as a manual page's OPTIONS (roff: .TP per flag), each flag a
 * launch configuration may set followed by its key (prefix: "server.",
 * "coordinator."; NULL: none said). */
void zs_opts_man(FILE *f, const struct zs_opt *t, const char *prefix);
/* The keys of t a launch configuration may set, as a manual page lists
 * them (roff), each with its value's name and its help. */
void zs_opts_man_keys(FILE *f, const struct zs_opt *t, const char *prefix);
/* An option's configuration key: prefix, then name with '_' for '-'. */
void zs_opt_key(FILE *f, const char *prefix, const char *name);
/* A daemon's check of one flag (long name, value) against its table: 0,
 * or 2 after "PROG: --NAME: why" on stderr. A name not in the table
 * passes (a flag without a value). */
int zs_opt_flag(const char *prog, const struct zs_opt *table, const char *name, const char *v);

#endif
