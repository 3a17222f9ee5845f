/*
 * main.c - zshard-sim: runs the deterministic simulator's worlds by seed.
 *
 *   zshard-sim [--seeds N] [--from S] [--budget-s T]   N seeds (or T s of them), a summary
 *   zshard-sim --seed S [--trace]                       one seed, its trace
 *   zshard-sim --regressions FILE                       the seeds kept in FILE (each with
 *                                                       its bug's mutant, in a mutant build)
 *   zshard-sim --mutants [--seeds N] [--budget-s T]     (a mutant build) each planted bug found?
 *   zshard-sim --mutant NAME ...                        (a mutant build) with one planted bug
 *   zshard-sim --fleet [--runs N] ...                   goodput at a fleet's failure rate
 *
 * A batch ends with one line: seeds, faults injected by kind, invariants
 * checked, seeds per minute, and every failing seed with why (replay one
 * with --seed S --trace: the same trace every time). Exit 0 when every
 * seed held, 1 when one did not, 2 for a usage error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/mutant.h"
#include "sim/world.h"

int sim_run(uint64_t seed, bool tracing, struct sim_stats *st, char *why, size_t why_n)
{
	int rc = live_run(seed, tracing, st, why, why_n);

	if (!rc)
		rc = step_run(seed, tracing, st, why, why_n);
	if (!rc)
		rc = ckpt_run(seed, tracing, st, why, why_n);
	if (!rc)
		rc = norms_run(seed, tracing, st, why, why_n);
	if (!rc)
		rc = readers_run(seed, tracing, st, why, why_n);
	if (!rc)
		rc = bounds_run(seed, tracing, st, why, why_n);
	if (!rc)
		rc = losses_run(seed, tracing, st, why, why_n);
	st->seeds++;
	if (rc)
		st->failed++;
	return rc;
}

static double secs(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* the batch's pace only; never a run's */
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void summary(const char *what, const struct sim_stats *st, double took)
{
	printf("sim %s: %" PRIu64 " seeds, %" PRIu64 " failed; faults:", what, st->seeds,
	       st->failed);
	for (int k = 0; k < SF_COUNT; k++)
		printf(" %s %" PRIu64, sim_fault_name(k), st->faults[k]);
	printf("; %" PRIu64 " invariant checks (%" PRIu64 " gone, %" PRIu64
	       " lapsed verdicts; %" PRIu64 " deaths taken for gone within the bound, %" PRIu64
	       " seen by the lease alone); %" PRIu64 " events; %.0f seeds/min\n",
	       st->checks, st->verdicts_gone, st->verdicts_lapsed, st->fast_checked, st->lease_only,
	       st->events, took > 0 ? (double)st->seeds * 60.0 / took : 0.0);
	printf("sim %s, the step world: %" PRIu64 " steps applied, %" PRIu64 " pushes taken (%" PRIu64
	       " in already), %" PRIu64 " steps redone by a replacement, %" PRIu64
	       " hyperparameter tables set, %" PRIu64 " copies placed back on their server started"
	       " again empty (%" PRIu64 " seeded whole)\n",
	       what, st->steps, st->pushes, st->again, st->redos, st->tables, st->placed_back,
	       st->seeded_back);
	printf("sim %s, the checkpoint world: %" PRIu64 " checkpoints taken, %" PRIu64
	       " committed, %" PRIu64 " rollbacks, %" PRIu64 " restores found bad and fallen back from\n",
	       what, st->ckpts, st->commits, st->restores, st->fallbacks);
	printf("sim %s, the norm world: %" PRIu64 " steps clipped alike everywhere, %" PRIu64
	       " settled reports, %" PRIu64 " exchanges failed (a diverged copy's), %" PRIu64
	       " rollbacks; %" PRIu64 " exchanges failed by the bound (a server answered, then lost, before a new coordinator collected)\n",
	       what, st->clipped, st->settled_reports, st->exchange_fails, st->norm_rollbacks,
	       st->norm_gaps);
	printf("sim %s, the reader world: %" PRIu64 " versions read whole\n", what, st->reads);
	printf("sim %s, the boundary world: %" PRIu64 " steps begun on a boundary's answer, %" PRIu64
	       " boundaries past their bound (the call made again), %" PRIu64 " resizes named\n",
	       what, st->bounds, st->bound_timeouts, st->resizes);
	printf("sim %s, the loss world: %" PRIu64 " ranks told to resume, %" PRIu64
	       " ops failed (their rank cut off from the coordinator past the bound), %" PRIu64
	       " servers marked down unheard since the coordinator's start\n",
	       what, st->loss_resumes, st->loss_failures, st->loss_unheard);
}

/* Seeds from..from+n-1 (or until budget seconds pass): the failing ones
 * named as they come. Returns how many failed. */
static uint64_t batch(uint64_t from, uint64_t n, double budget, struct sim_stats *st,
		      uint64_t *first_bad, char *first_why, size_t why_n, bool quiet)
{
	double t0 = secs();
	char why[512];
	uint64_t bad = 0;

	for (uint64_t i = 0; i < n; i++) {
		if (budget > 0 && secs() - t0 > budget)
			break;
		if (!sim_run(from + i, false, st, why, sizeof why))
			continue;
		if (!bad++ && first_bad) {
			*first_bad = from + i;
			snprintf(first_why, why_n, "%s", why);
		}
		if (!quiet)
			printf("sim: seed %" PRIu64 " FAILED: %s\n  replay: make sim-replay SEED=%" PRIu64
			       "\n",
			       from + i, why, from + i);
		if (quiet)
			break;
	}
	return bad;
}

/*
 * The seeds kept in path, a line each: "SEED MUTANT  # what it found". Each
 * found a bug, since fixed, that the mutant MUTANT plants again: the seed
 * must hold every invariant here, and (a mutant build) break one with its
 * mutant planted, or the world no longer reaches that bug's interleaving
 * from it (the world changed: find the mutant's seed again, make
 * sim-mutants, and keep that one).
 */
static int regressions(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[512], why[512], name[64];
	struct sim_stats st = {0};
	int bad = 0, n = 0;

	if (!f) {
		fprintf(stderr, "zshard-sim: cannot open %s\n", path);
		return 2;
	}
	while (fgets(line, sizeof line, f)) {
		char *end;
		uint64_t seed = strtoull(line, &end, 10);
		if (end == line) /* a comment, a blank */
			continue;
		line[strcspn(line, "\n")] = 0;
		n++;
		if (sim_run(seed, false, &st, why, sizeof why)) {
			printf("sim: regression seed %" PRIu64 " FAILED: %s\n  (%s)\n", seed, why, line);
			bad++;
		}
#ifdef ZS_MUTANTS
		if (sscanf(end, " %63s", name) == 1 && name[0] != '#') {
			int k;
			for (k = 1; zs_mutant_name(k) && strcmp(zs_mutant_name(k), name); k++)
				;
			if (!zs_mutant_name(k)) {
				printf("sim: regression seed %" PRIu64 " names no mutant '%s'\n", seed, name);
				bad++;
				continue;
			}
			zs_mutant = k;
			if (!sim_run(seed, false, &st, why, sizeof why)) {
				printf("sim: regression seed %" PRIu64 " no longer finds mutant %s (the world changed: make sim-mutants finds a seed that does)\n",
				       seed, name);
				bad++;
			}
			zs_mutant = 0;
		}
#else
		(void)name;
#endif
	}
	fclose(f);
	printf("sim regressions: %d seeds kept in %s, %d failed\n", n, path, bad);
	return bad ? 1 : 0;
}

#ifdef ZS_MUTANTS
/* Planted bugs whose interleaving the world reaches too rarely for a
 * search (about one seed in 300,000): their kept seed in sim/regressions
 * finds each (--regressions, in a mutant build), and is the check. */
static bool rare(int k)
{
	return k == ZS_MUT_SEEDED_SENDS_NOTHING;
}

/* Each planted bug must be found within n seeds from from (and budget
 * seconds, when given): the seed that finds it named. */
static int mutants(uint64_t from, uint64_t n, double budget)
{
	int survived = 0, n_rare = 0;

	for (int k = 1; k < ZS_MUT_COUNT; k++) {
		struct sim_stats st = {0};
		uint64_t seed = 0;
		char why[512] = "";
		double t0 = secs();
		if (rare(k)) {
			printf("mutant %-22s rare: not searched; its kept seed (sim/regressions) finds it\n",
			       zs_mutant_name(k));
			n_rare++;
			continue;
		}
		zs_mutant = k;
		if (batch(from, n, budget, &st, &seed, why, sizeof why, true)) {
			printf("mutant %-22s found by seed %" PRIu64 " after %" PRIu64
			       " seeds (%.1f s): %s\n",
			       zs_mutant_name(k), seed, st.seeds, secs() - t0, why);
		} else {
			printf("mutant %-22s SURVIVED %" PRIu64 " seeds (%.0f s)\n", zs_mutant_name(k),
			       st.seeds, secs() - t0);
			survived++;
		}
	}
	zs_mutant = 0;
	printf("sim mutants: %d planted, %d found, %d survived, %d rare (found by their kept seed)\n",
	       ZS_MUT_COUNT - 1, ZS_MUT_COUNT - 1 - survived - n_rare, survived, n_rare);
	return survived ? 1 : 0;
}
#endif

static int usage(void)
{
	fprintf(stderr,
		"usage: zshard-sim [--seeds N] [--from S] [--budget-s T]\n"
		"       zshard-sim --seed S [--trace]\n"
		"       zshard-sim --regressions FILE\n"
		"       zshard-sim --mutants [--seeds N] [--budget-s T]   (a mutant build: make sim-mutants)\n"
		"       zshard-sim --mutant NAME ...          (a mutant build)\n"
		"       zshard-sim --fleet [--runs N] [--seed S] [--steps N] [--rate-x F]\n"
		"                                             goodput at a fleet's failure rate (sim/fleet.c)\n"
		"       zshard-sim --fleet --check-start-s T  the model's times for the fault matrix's cluster\n");
	return 2;
}

int main(int argc, char **argv)
{
	uint64_t n = 1000, from = 1, one = 0;
	bool have_one = false, trace = false, muts = false;
	double budget = 0;
	const char *reg = NULL, *mutant = NULL;

	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--fleet"))
			return fleet_main(argc, argv);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--trace"))
			trace = true;
		else if (!strcmp(a, "--mutants"))
			muts = true;
		else if (!v)
			return usage();
		else if (!strcmp(a, "--seeds"))
			n = strtoull(v, NULL, 10), i++;
		else if (!strcmp(a, "--from"))
			from = strtoull(v, NULL, 10), i++;
		else if (!strcmp(a, "--seed"))
			one = strtoull(v, NULL, 10), have_one = true, i++;
		else if (!strcmp(a, "--budget-s"))
			budget = strtod(v, NULL), i++;
		else if (!strcmp(a, "--regressions"))
			reg = v, i++;
		else if (!strcmp(a, "--mutant"))
			mutant = v, i++;
		else
			return usage();
	}
#ifdef ZS_MUTANTS
	if (mutant) {
		for (zs_mutant = 1; zs_mutant_name(zs_mutant) && strcmp(zs_mutant_name(zs_mutant), mutant);
		     zs_mutant++)
			;
		if (!zs_mutant_name(zs_mutant)) {
			fprintf(stderr, "zshard-sim: no mutant '%s'; they are:", mutant);
			for (int k = 1; zs_mutant_name(k); k++)
				fprintf(stderr, " %s", zs_mutant_name(k));
			fprintf(stderr, "\n");
			return 2;
		}
	}
	if (muts)
		return mutants(from, n, budget);
#else
	if (mutant || muts) {
		fprintf(stderr, "zshard-sim: this build plants no bugs: make sim-mutants builds one that does\n");
		return 2;
	}
#endif
	if (reg)
		return regressions(reg);
	if (have_one) {
		struct sim_stats st = {0};
		char why[512];
		int r = sim_run(one, trace, &st, why, sizeof why);
		printf("sim: seed %" PRIu64 " %s%s\n", one, r ? "FAILED: " : "held every invariant",
		       r ? why : "");
		return r;
	}
	{
		struct sim_stats st = {0};
		double t0 = secs();
		uint64_t bad = batch(from, n, budget, &st, NULL, NULL, 0, false);
		summary("every world", &st, secs() - t0);
		return bad ? 1 : 0;
	}
}
