/*
 * args.c - a command's line parsed against its table of flags (struct
 * zs_opt, base/opts.h, as the daemons' flags are): each value checked as
 * zshard-server checks its own (zs_opt_check), --help printed from the
 * command's usage, its help and the table, the rest positionals.
 */
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "cli/cli.h"

static int find(const struct zs_opt *t, const char *name, size_t len)
{
	for (int k = 0; t && t[k].name; k++)
		if (strlen(t[k].name) == len && !strncmp(t[k].name, name, len))
			return k;
	return -1;
}

void cli_help(const struct cmd *cmd)
{
	printf("usage: zshardctl %s %s\n\n%s\n", cmd->name, cmd->args, cmd->help);
	if (cmd->flags && cmd->flags[0].name) {
		printf("\nflags:\n");
		zs_opts_usage(stdout, cmd->flags);
	}
}

int cli_parse(const struct cmd *cmd, int argc, char **argv, int max_pos, struct cli_args *a)
{
	memset(a, 0, sizeof *a);
	for (int k = 0; cmd->flags && cmd->flags[k].name; k++)
		if (k == CLI_MAX_FLAGS) /* a bug: its later flags would be refused */
			return cli_usage_err(cmd->name, "has more than %d flags (CLI_MAX_FLAGS, cli/cli.h)",
					     CLI_MAX_FLAGS);
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *eq, *v;
		char why[256];
		int k;
		if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
			cli_help(cmd);
			return -1;
		}
		if (arg[0] != '-' || !arg[1]) { /* "-": a positional (stdin) */
			if (a->n_pos == max_pos || a->n_pos == CLI_MAX_POS)
				return cli_usage_err(cmd->name, "unexpected argument '%s'", arg);
			a->pos[a->n_pos++] = argv[i];
			continue;
		}
		eq = strchr(arg, '=');
		k = arg[1] == '-' ? find(cmd->flags, arg + 2, eq ? (size_t)(eq - arg - 2)
							       : strlen(arg + 2))
				  : -1;
		if (k < 0 || k >= CLI_MAX_FLAGS)
			return cli_usage_err(cmd->name, "unknown option '%s'", arg);
		if (cmd->flags[k].kind == ZS_OPT_FLAG) {
			if (eq)
				return cli_usage_err(cmd->name, "--%s takes no value",
						     cmd->flags[k].name);
			a->val[k] = "";
			continue;
		}
		if (!(v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL))
			return cli_usage_err(cmd->name, "--%s wants a value", cmd->flags[k].name);
		if (!zs_opt_check(&cmd->flags[k], v, why, sizeof why))
			return cli_usage_err(cmd->name, "--%s: %s", cmd->flags[k].name, why);
		a->val[k] = v;
	}
	return 0;
}

const char *cli_get(const struct cmd *cmd, const struct cli_args *a, const char *name)
{
	int k = find(cmd->flags, name, strlen(name));

	return k < 0 || k >= CLI_MAX_FLAGS ? NULL : a->val[k];
}

uint64_t cli_get_u64(const struct cmd *cmd, const struct cli_args *a, const char *name,
		     uint64_t dflt)
{
	const char *v = cli_get(cmd, a, name);
	uint64_t n = dflt;

	if (v && zs_parse_size(v, &n, NULL)) /* checked as it was parsed */
		n = dflt;
	return n;
}
