/*
 * cli.h - what zshardctl's files share, internal to cli/: the context every
 * command gets, the command table's entry (each command file defines its
 * own cmd_NAME next to its handler), and the helpers of common.c.
 *
 * Exit status, for every command: 0 on success, 1 with one line on stderr
 * when the coordinator says no or cannot be reached, 2 for bad usage.
 */
#ifndef ZS_CLI_H
#define ZS_CLI_H

#include <jansson.h>
#include <stdio.h>

#include "base/opts.h"
#include "ctrl/coord_client.h"
#include "model/model.h"

struct ctx {
	const char *coordinator;
	int timeout_ms;
	bool timeout_set; /* --timeout-ms given: it bounds a command's waits too */
	unsigned stage; /* the configuration's stage for specs without one (0: none) */
	struct zs_coord_client *c; /* opened by cli_open_coord, closed by main */
};

struct cmd {
	const char *name;
	const char *args; /* its usage line after the name */
	const char *help;
	int (*fn)(struct ctx *, int, char **);
	/* its flags (base/opts.h's kinds and checks; a NULL name ends them;
	 * NULL: none): what cli_parse takes and --help lists */
	const struct zs_opt *flags;
};

/* What a command's line gave (cli_parse): each flag of its table by its
 * place there (NULL: not given; "" for a flag without a value), and the
 * positionals in order. */
#define CLI_MAX_FLAGS 24
#define CLI_MAX_POS 4
struct cli_args {
	const char *val[CLI_MAX_FLAGS];
	char *pos[CLI_MAX_POS];
	int n_pos;
};

/* The commands, one file per group. */
extern const struct cmd cmd_servers, cmd_status, cmd_rdma, cmd_gpu;        /* cluster.c */
extern const struct cmd cmd_scrape_targets;                                /* scrape.c */
extern const struct cmd cmd_config;                                        /* config.c */
extern const struct cmd cmd_env;                                           /* env.c */
extern const struct cmd cmd_readers;                                       /* readers.c */
extern const struct cmd cmd_jobs, cmd_job, cmd_placement, cmd_stage, cmd_trainers,
	cmd_rebalance;                                                       /* jobs.c */
extern const struct cmd cmd_stats;                                         /* stats.c */
extern const struct cmd cmd_checkpoint;                                    /* checkpoint.c */
extern const struct cmd cmd_export, cmd_import;                            /* transfer.c */
extern const struct cmd cmd_plan;                                          /* plan.c */
extern const struct cmd cmd_man;                                           /* man.c */
/* every command, in zshardctl --help's order, ended by NULL (main.c) */
extern const struct cmd *const cli_cmds[];

/* "zshardctl: " and the message on stderr; returns 1. */
int cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* what a command that needs a coordinator says when none was found */
#define CLI_NO_COORDINATOR                                                                \
	"no coordinator: give --coordinator HOST:PORT, set ZSHARD_COORDINATOR, or start a " \
	"local cluster (zshard-local start)"
/* A usage error of cmd on stderr, pointing at its --help; returns 2. */
int cli_usage_err(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Connects x->c to the coordinator: 0, or 1 after saying why. */
int cli_open_coord(struct ctx *x);
/*
 * Parses a command's line (argv[0] its name) against cmd->flags: each flag
 * "--NAME VALUE" or "--NAME=VALUE", its value checked as the daemons check
 * theirs (zs_opt_check: a number's bounds, a size's suffix, a choice); a
 * lone "-" and anything else not starting with '-' a positional, at most
 * max_pos. 0; -1 after --help or -h (cli_help); 2 after a usage error.
 */
int cli_parse(const struct cmd *cmd, int argc, char **argv, int max_pos, struct cli_args *a);
/* The usage line, the help and the table's flags, on stdout. */
void cli_help(const struct cmd *cmd);
/* Flag name's value (NULL: not given, "" given without a value). */
const char *cli_get(const struct cmd *cmd, const struct cli_args *a, const char *name);
/* A NUM or SIZE flag's value, dflt when not given. */
uint64_t cli_get_u64(const struct cmd *cmd, const struct cli_args *a, const char *name,
		     uint64_t dflt);
/* Common flags of the tables: --json. */
#define CLI_FLAG_JSON {"json", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL, "print JSON"}
/* Prints j indented on stdout and releases it. */
void cli_json_print(json_t *j);
const char *cli_state_name(const struct zs_server_info *s);
/* A wall-clock time in ms as "YYYY-MM-DDTHH:MM:SSZ" into buf; returns buf. */
const char *cli_time(int64_t ms, char *buf, size_t len);

#endif
