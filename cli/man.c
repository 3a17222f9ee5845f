/*
 * man.c - zshardctl man PROGRAM: the manual page of zshard-server,
 * zshard-coordinator or zshardctl in roff (man -l - reads it), made from
 * the tables the programs parse and check their flags with (base/opts.h),
 * the environment's (base/env.h) and zshardctl's commands, around the
 * prose below. make writes build/man/PROGRAM.1 with it and make install
 * installs them; a wheel's user has them through zshardctl man.
 * tests/lib/check-man.sh holds every flag, key and job spec key to a page.
 */
#include <stdio.h>
#include <string.h>

#include "base/env.h"
#include "base/opts.h"
#include "base/version.h"
#include "cli/cli.h"

/* roff text: '-' and '\' escaped */
static void put(const char *s)
{
	for (; *s; s++) {
		if (*s == '-' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

static void head(const char *prog, const char *what)
{
	char up[64];
	size_t i;

	for (i = 0; prog[i] && i < sizeof up - 1; i++)
		up[i] = (char)(prog[i] >= 'a' && prog[i] <= 'z' ? prog[i] - 32 : prog[i]);
	up[i] = '\0';
	printf(".TH %s 1 \"\" \"zshard %s\" \"zshard manual\"\n.SH NAME\n", up, ZS_VERSION);
	put(prog);
	printf(" \\- ");
	put(what);
	printf("\n");
}

/* the environment variables prog reads (base/env.h's table) */
static void environment(const char *prog)
{
	printf(".SH ENVIRONMENT\n");
	for (const struct zs_env_var *v = zs_env_vars; v->name; v++) {
		if (!strstr(v->readers, prog) && !strstr(v->readers, "every program"))
			continue;
		printf(".TP\n.B %s\n\\&", v->name);
		put(v->doc);
		printf(" (default: ");
		put(v->deflt);
		printf(")\n");
	}
}

static const char see_also[] =
	".SH SEE ALSO\n"
	".BR zshard\\-server (1),\n"
	".BR zshard\\-coordinator (1),\n"
	".BR zshardctl (1),\n"
	".BR zshard\\-local (1).\n"
	"The guides (docs/ in the source tree): operations.md (deployment, TLS and roles,\n"
	"metrics and alerts, recovery, upgrades, runbooks), pytorch.md, c-api.md,\n"
	"readers.md, gpus.md, performance.md and DESIGN.md.\n";

static const char daemon_common[] =
	".SH CONFIGURATION\n"
	"A launch configuration (\\fB\\-\\-config\\fR \\fIFILE\\fR) holds \\fIkey\\fR = "
	"\\fIvalue\\fR lines ('#' starts a comment). Each flag above that names a key may be "
	"set there; these keys are everyone's (the daemons, the trainers through "
	"\\fB$ZSHARD_CONFIG\\fR, zshardctl); flags on the command line win. "
	"\\fBzshardctl config check\\fR \\fIFILE\\fR checks a file as the programs do "
	"and says every mistake at once; \\fBzshardctl config keys\\fR lists the keys.\n";

static const char signals[] =
	".SH SIGNALS\n"
	".TP\n.B SIGTERM, SIGINT\n"
	"A clean stop: what is in flight is finished or refused, state is flushed, and "
	"the process exits 0.\n"
	".SH EXIT STATUS\n"
	"0 after a clean stop, \\-\\-help or \\-\\-version; 2 for a bad flag or "
	"configuration (the message names it); 1 when it cannot start (a port taken, "
	"a directory it cannot use, no coordinator within its timeout).\n";

static void server(void)
{
	head("zshard-server", "a zshard shard server");
	printf(".SH SYNOPSIS\n.B zshard\\-server\n\\-\\-coordinator \\fIADDR\\fR "
	       "\\-\\-data\\-dir \\fIDIR\\fR [\\fIoptions\\fR]\n"
	       ".SH DESCRIPTION\n"
	       "A shard server holds the shards of the parameters, gradients and optimizer "
	       "state of the jobs the coordinator assigns it: fp32 masters and optimizer "
	       "state in memory (or on NVMe past \\-\\-memory\\-budget, or on a CUDA device "
	       "with \\-\\-gpu), the exact order\\-independent reduction of every rank's "
	       "push, the optimizer's update, and checkpoints in LMDB under \\fIDIR\\fR. "
	       "Trainers reach it on its data plane (tcp; shared memory on the same host; "
	       "RDMA where both ends have a device); the coordinator and zshardctl on its "
	       "control plane (gRPC). It registers with the coordinator, renews its lease, "
	       "and restores what it held from \\fIDIR\\fR when it starts again.\n"
	       ".SH OPTIONS\n");
	zs_opts_man(stdout, zs_opts_server, "server.");
	printf("%s", daemon_common);
	zs_opts_man_keys(stdout, zs_opts_common, "");
	printf("%s", signals);
	environment("zshard-server");
	printf(".SH FILES\n.TP\n.I DIR/\nthe shards' LMDB (checkpoints, restored state), "
	       "\\fIDIR\\fR/tier (the optimizer state past \\-\\-memory\\-budget), the "
	       "server's identity.\n%s", see_also);
}

static void coordinator(void)
{
	head("zshard-coordinator", "the zshard coordinator");
	printf(".SH SYNOPSIS\n.B zshard\\-coordinator\n\\-\\-data\\-dir \\fIDIR\\fR "
	       "[\\fIoptions\\fR]\n.br\n.B zshard\\-coordinator\n\\-\\-etcd "
	       "\\fIHOST:PORT,...\\fR [\\fIoptions\\fR]\n"
	       ".SH DESCRIPTION\n"
	       "The coordinator keeps the cluster's catalog: the shard servers and their "
	       "leases, the jobs (their specs, incarnations, placement and ZeRO stage), the "
	       "trainers' ranks and leases, and the checkpoints, which it commits when every "
	       "server of a job is durable. It rolls a job back to its last committed "
	       "checkpoint when state was lost, has a lost rank's replacement redo its step, "
	       "and moves a job's state when it is rebalanced. Its catalog lives in LMDB "
	       "under \\fIDIR\\fR and survives restarts; with \\-\\-etcd it lives in etcd, "
	       "where several coordinators share it: one leads, the others stand by and take "
	       "over within a lease when it is lost. Clients take the list of all of them.\n"
	       ".SH OPTIONS\n");
	zs_opts_man(stdout, zs_opts_coordinator, "coordinator.");
	printf("%s", daemon_common);
	zs_opts_man_keys(stdout, zs_opts_common, "");
	printf("%s", signals);
	environment("zshard-coordinator");
	printf(".SH FILES\n.TP\n.I DIR/\nthe catalog (LMDB) and \\fIDIR\\fR/secret.key, the key "
	       "its job tokens are sealed with: back it up with the catalog, apart from it.\n%s",
	       see_also);
}

/* The job spec's keys, for zshardctl job create (model/spec_json.c
 * refuses any other; tests/lib/check-man.sh holds its key lists to this) */
static const char job_spec[] =
	".SH JOB SPEC\n"
	"\\fBzshardctl job create\\fR takes a job as JSON:\n"
	".PP\n.nf\n"
	"{\"name\": \"demo\", \"stage\": 3, \"world_size\": 2, \"compute_dtype\": \"bf16\",\n"
	" \"optimizer\": {\"kind\": \"adamw\", \"lr\": 1e\\-3, \"weight_decay\": 0.01,\n"
	"               \"clip_norm\": 1.0, \"groups\": [{}, {\"weight_decay\": 0}]},\n"
	" \"units\": [{\"name\": \"embed\", \"dtype\": \"f32\",\n"
	"            \"tensors\": [{\"name\": \"wte\", \"shape\": [256, 64]},\n"
	"                        {\"name\": \"ln.bias\", \"shape\": [64], \"group\": 1}]}]}\n"
	".fi\n.PP\n"
	"Any other key is refused, so that a typo never becomes a default.\n"
	".TP\n.B name\n1 to 63 of A\\-Z a\\-z 0\\-9 . _ \\- (not starting with '.').\n"
	".TP\n.B stage\nThe ZeRO stage: 1, 2 or 3 (the configuration's \\fBstage\\fR when left "
	"out).\n"
	".TP\n.B world_size\nThe trainer ranks, 1 to 65536.\n"
	".TP\n.B compute_dtype\nf32, bf16 or f16: what trainers gather and push (masters are "
	"fp32).\n"
	".TP\n.B align_bytes\nShard alignment in bytes (default 256).\n"
	".TP\n.B optimizer\n\\fBkind\\fR (adamw, adam, sgd, adagrad), \\fBlr\\fR, "
	"\\fBweight_decay\\fR, \\fBbeta1\\fR, \\fBbeta2\\fR, \\fBeps\\fR, \\fBmomentum\\fR, "
	"\\fBclip_norm\\fR (global\\-norm clipping; 0: off), \\fBsteps_taken\\fR (an imported "
	"state's steps) and \\fBgroups\\fR (torch's param_groups: a list of objects of lr, "
	"weight_decay, beta1, beta2, eps, momentum; a key left out takes the top level's).\n"
	".TP\n.B units\nThe units trainers gather and push as one: \\fBname\\fR, \\fBdtype\\fR "
	"and \\fBtensors\\fR, each a \\fBname\\fR, a \\fBshape\\fR (at most 8 dimensions), "
	"its optimizer \\fBgroup\\fR, \\fBfrozen\\fR (held, never updated) and "
	"\\fBaliases\\fR (other names of a tied tensor, which exports write too).\n"
	".TP\n.B keep_checkpoints\nCommitted checkpoints kept (default 3, at most 1000).\n"
	".TP\n.B checkpoint_every\nSteps between automatic checkpoints (0: none).\n"
	".TP\n.B collective\n\"nccl\": the trainers reduce among themselves over NCCL and push "
	"their slice's sum; \"none\" (the default).\n"
	".TP\n.B rank_hosts\nA collective job: the host of each rank.\n"
	".TP\n.B replicas\nCopies of each shard on distinct servers, 1 to 3: a lost server "
	"costs no step.\n"
	".TP\n.B rank_lost\nWhat a rank lost and not replaced within \\fBrank_wait_ms\\fR "
	"does: wait (the default), shrink (the world goes on without it) or rollback.\n"
	".TP\n.B rank_wait_ms\nHow long a lost rank is waited for (default 30000).\n"
	".TP\n.B data_tls\ntrue: the tcp data plane encrypted (TLS 1.3 records keyed by the "
	"job's token).\n"
	".TP\n.B readers\n\\fBpins\\fR (live versions weight readers may pin at once) and "
	"\\fBidle_ms\\fR (a pin untouched this long is dropped).\n"
	".TP\n.B buffers\nThe model's persistent buffers (zshard.torch says): an export of a "
	"step whose checkpoint holds none of them notes they are missing.\n";

static void zshardctl(void)
{
	head("zshardctl", "the zshard operator CLI");
	printf(".SH SYNOPSIS\n.B zshardctl\n[\\-\\-coordinator \\fIHOST:PORT\\fR] "
	       "[\\-\\-timeout\\-ms \\fIMS\\fR] [\\-\\-tls\\-ca \\fIFILE\\fR \\-\\-tls\\-cert "
	       "\\fIFILE\\fR \\-\\-tls\\-key \\fIFILE\\fR] [\\-\\-config \\fIFILE\\fR] "
	       "\\fICOMMAND\\fR [\\fIARGS\\fR]\n"
	       ".SH DESCRIPTION\n"
	       "zshardctl shows and steers a zshard cluster: servers, jobs and their placement, "
	       "trainers, checkpoints, exports and imports, step reports, memory plans, "
	       "metrics targets. Each command is one or a few coordinator calls and a table "
	       "(or \\-\\-json). With no coordinator given it takes \\fB$ZSHARD_COORDINATOR\\fR, "
	       "then the launch configuration's, then the local cluster's "
	       "(\\fBzshard\\-local\\fR(1)).\n"
	       ".SH OPTIONS\n"
	       ".TP\n.B \\-\\-coordinator \\fIHOST:PORT[,...]\\fR\nThe coordinator (or a group's list).\n"
	       ".TP\n.B \\-\\-timeout\\-ms \\fIMS\\fR\nEach call's bound (default 10000); it bounds "
	       "a command's waits too.\n"
	       ".TP\n.B \\-\\-tls\\-ca, \\-\\-tls\\-cert, \\-\\-tls\\-key \\fIFILE\\fR\nMutual TLS "
	       "(default \\fB$ZSHARD_TLS_CA\\fR, _CERT, _KEY).\n"
	       ".TP\n.B \\-\\-config \\fIFILE\\fR\nA launch configuration (default "
	       "\\fB$ZSHARD_CONFIG\\fR): its coordinator, tls_* and stage.\n"
	       ".TP\n.B \\-\\-version\nPrints the version.\n"
	       ".SH COMMANDS\n");
	for (const struct cmd *const *c = cli_cmds; *c; c++) {
		printf(".SS \"%s ", (*c)->name);
		put((*c)->args);
		printf("\"\n\\&");
		for (const char *p = (*c)->help; *p; p++) {
			if (*p == '\n') { /* a line break of --help, kept where it starts a list */
				putchar(p[1] == ' ' ? '\n' : ' ');
				if (p[1] == ' ')
					printf(".br\n\\&");
				continue;
			}
			if (*p == '-' || *p == '\\')
				putchar('\\');
			putchar(*p);
		}
		printf("\n");
		if ((*c)->flags && (*c)->flags[0].name)
			zs_opts_man(stdout, (*c)->flags, NULL);
	}
	printf("%s", job_spec);
	printf(".SH CONFIGURATION\nzshardctl reads a launch configuration's "
	       "\\fBcoordinator\\fR, \\fBtls_*\\fR and \\fBstage\\fR; \\fBconfig check\\fR "
	       "checks every key of one. The keys of everyone:\n");
	zs_opts_man_keys(stdout, zs_opts_common, "");
	printf(".PP\nThe daemons' keys are \\fBserver.\\fR\\fIKEY\\fR and "
	       "\\fBcoordinator.\\fR\\fIKEY\\fR, one per flag, listed in their pages.\n"
	       ".SH EXIT STATUS\n0 on success; 1 with one line on stderr when the coordinator "
	       "says no or cannot be reached; 2 for bad usage.\n");
	environment("zshardctl");
	printf("%s", see_also);
}

static int c_man(struct ctx *x, int argc, char **argv)
{
	struct cli_args ca;
	int r;

	(void)x;
	if ((r = cli_parse(&cmd_man, argc, argv, 1, &ca)))
		return r < 0 ? 0 : r;
	if (ca.n_pos != 1)
		return cli_usage_err("man", "want one program: zshard-server, zshard-coordinator "
					    "or zshardctl");
	if (!strcmp(ca.pos[0], "zshard-server"))
		server();
	else if (!strcmp(ca.pos[0], "zshard-coordinator"))
		coordinator();
	else if (!strcmp(ca.pos[0], "zshardctl"))
		zshardctl();
	else
		return cli_usage_err("man", "no page for '%s' (zshard-server, zshard-coordinator, "
					    "zshardctl; zshard-local's is installed beside it)",
				     ca.pos[0]);
	return 0;
}

const struct cmd cmd_man = {"man", "zshard-server | zshard-coordinator | zshardctl",
	"Print a program's manual page (roff): zshardctl man zshard-server | man -l -.\n"
	"Made from the tables the programs check their flags with.", c_man, NULL};
