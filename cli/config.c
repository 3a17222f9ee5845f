/*
 * config.c - zshardctl config check FILE: reads a launch configuration as
 * every program would (base/config.h) and says what each takes from it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/opts.h"
#include "cli/cli.h"
#include "net/transport.h"

/* zshardctl config keys: every key a file may set, from the tables the
 * programs check their settings with */
static void print_keys(const char *prefix, const struct zs_opt *t, const char *who)
{
	for (const struct zs_opt *o = t; o->name; o++) {
		char key[64], range[160] = "", max[24] = "";
		if (!o->config)
			continue;
		snprintf(key, sizeof key, "%s%s", prefix, o->name);
		for (char *p = key; *p; p++)
			*p = *p == '-' ? '_' : *p;
		if (o->kind == ZS_OPT_CHOICE)
			snprintf(range, sizeof range, " %s", o->choices);
		else if ((o->kind == ZS_OPT_NUM || o->kind == ZS_OPT_SIZE) && (o->min || o->max)) {
			if (o->max)
				snprintf(max, sizeof max, "%llu", o->max);
			snprintf(range, sizeof range, " %llu..%s", o->min, max);
		}
		printf("%-32.32s %s%s  (%s)\n", key, zs_opt_kind_name(o->kind), range, who);
	}
}

static void say(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "zshardctl: %s\n", msg);
}

static int c_config(struct ctx *x, int argc, char **argv)
{
	struct zs_error err = {0};
	unsigned problems;
	struct zs_config c;
	const char *who[] = {"server", "coordinator"};
	const char *tr;
	struct cli_args ca;
	const char *file;
	int r;

	(void)x;
	if ((r = cli_parse(&cmd_config, argc, argv, 2, &ca)))
		return r < 0 ? 0 : r;
	if (ca.n_pos == 1 && !strcmp(ca.pos[0], "keys")) {
		print_keys("", zs_opts_common, "everyone");
		print_keys("server.", zs_opts_server, "zshard-server --FLAG");
		print_keys("coordinator.", zs_opts_coordinator, "zshard-coordinator --FLAG");
		return 0;
	}
	if (ca.n_pos != 2 || strcmp(ca.pos[0], "check"))
		return cli_usage_err("config", "want: config check FILE, or config keys");
	file = ca.pos[1];
	/* every mistake of the file at once, each on a line of its own */
	problems = zs_config_check(file, &c, say, NULL);
	if ((tr = zs_config_get(&c, "transport")) && zs_transport_check_name(tr, &err)) {
		fprintf(stderr, "zshardctl: %s:%d: transport: %s\n", file,
			zs_config_line(&c, "transport"), err.msg);
		problems++;
	}
	int tls = !!zs_config_get(&c, "tls_ca") + !!zs_config_get(&c, "tls_cert") +
		  !!zs_config_get(&c, "tls_key");
	if (tls && tls != 3) {
		fprintf(stderr, "zshardctl: %s: TLS needs all of tls_ca, tls_cert and tls_key (%s%s%s"
				"missing)\n", file, zs_config_get(&c, "tls_ca") ? "" : "tls_ca ",
			zs_config_get(&c, "tls_cert") ? "" : "tls_cert ",
			zs_config_get(&c, "tls_key") ? "" : "tls_key ");
		problems++;
	}
	if (problems) {
		zs_config_release(&c);
		fprintf(stderr, "zshardctl: %s: %u mistake%s\n", file, problems,
			problems == 1 ? "" : "s");
		return 1;
	}
	printf("%s: %zu settings, all valid\n", file, c.n);
	for (int w = 0; w < 2; w++) {
		char **v;
		int n;
		char *a0 = (char *)(w ? "zshard-coordinator" : "zshard-server");
		if (zs_config_argv(&c, who[w], 1, &a0, &v, &n, &err))
			return cli_die("%s", err.msg);
		printf("  %s takes:", a0);
		for (int i = 1; i < n; i++)
			printf(" %s", strncmp(v[i], "--tls-key=", 10) ? v[i] : "--tls-key=(a file)");
		printf("%s\n", n > 1 ? "" : " nothing");
		free(v);
	}
	printf("  trainers (ZSHARD_CONFIG) and zshardctl take:");
	for (size_t i = 0; i < c.n; i++)
		if (!strchr(c.e[i].key, '.'))
			printf(" %s=%s", c.e[i].key, c.e[i].value);
	printf("\n");
	zs_config_release(&c);
	return 0;
}

const struct cmd cmd_config = {"config", "check FILE | keys",
	 "Checks a launch configuration: \"key = value\" lines, '#' comments, each\n"
	 "value checked as the program that takes it checks its flag (one table\n"
	 "per program), every mistake of the file said at once (an unknown key with\n"
	 "the one it looks like), then what each program takes from it. keys lists\n"
	 "every key with its kind and bounds: everyone's (coordinator, tls_ca,\n"
	 "tls_cert, tls_key; the trainers' transport, prefetch, push_depth,\n"
	 "max_live_bytes; zshardctl's stage), and server.KEY and coordinator.KEY\n"
	 "for each daemon flag (--KEY, '-' written '_'; man zshard-server).\n"
	 "The daemons read it with --config FILE, trainers (libzshard, Python) and\n"
	 "zshardctl with $ZSHARD_CONFIG (zshardctl also --config); flags and the\n"
	 "environment win over the file. Exit 0 when valid, 1 after every FILE:LINE: why.",
	 c_config, NULL};
