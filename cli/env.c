/*
 * env.c - zshardctl env: the environment variables zshard's programs read
 * and the tests' fault points, from base/env.c's list (README's table is
 * its --markdown, checked by make check).
 */
#include <stdio.h>
#include <string.h>

#include "base/env.h"
#include "cli/cli.h"

static void markdown(void)
{
	printf("| variable | default | read by | what it does |\n|---|---|---|---|\n");
	for (const struct zs_env_var *v = zs_env_vars; v->name; v++)
		printf("| `%s` | %s | %s | %s |\n", v->name, v->deflt, v->readers, v->doc);
	printf("\n| `ZSHARD_FAULT` point | what it does |\n|---|---|\n");
	for (const struct zs_fault_point *p = zs_fault_points; p->name; p++)
		printf("| `%s` | %s |\n", p->name, p->doc);
}

static const struct zs_opt env_flags[] = {
	{"markdown", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL, "README's tables"},
	{"names", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL, "the variables' names, one a line"},
	{"faults", ZS_OPT_FLAG, 0, 0, NULL, false, 0, NULL, "the fault points' names, one a line"},
	{0},
};

static int c_env(struct ctx *x, int argc, char **argv)
{
	struct cli_args ca;
	int r, n = 0;

	(void)x;
	if ((r = cli_parse(&cmd_env, argc, argv, 0, &ca)))
		return r < 0 ? 0 : r;
	for (int k = 0; k < 3; k++)
		n += ca.val[k] != NULL;
	if (n > 1)
		return cli_usage_err("env", "one of --markdown, --names and --faults");
	if (ca.val[0]) {
		markdown();
		return 0;
	}
	if (ca.val[1] || ca.val[2]) {
		if (ca.val[1])
			for (const struct zs_env_var *v = zs_env_vars; v->name; v++)
				printf("%s\n", v->name);
		else
			for (const struct zs_fault_point *p = zs_fault_points; p->name; p++)
				printf("%s\n", p->name);
		return 0;
	}
	for (const struct zs_env_var *v = zs_env_vars; v->name; v++)
		printf("%s\n    %s\n    default: %s; read by %s\n", v->name, v->doc, v->deflt,
		       v->readers);
	printf("\nZSHARD_FAULT's points (tests):\n");
	for (const struct zs_fault_point *p = zs_fault_points; p->name; p++)
		printf("  %-20s %s\n", p->name, p->doc);
	return 0;
}

const struct cmd cmd_env = {"env", "[--markdown | --names | --faults]",
	"Lists the environment variables zshard's programs and its Python package\n"
	"read, with their defaults, and the fault points $ZSHARD_FAULT names in\n"
	"the tests (--markdown: README's tables; --names, --faults: one a line).\n",
	c_env, env_flags};
