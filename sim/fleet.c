/*
 * fleet.c - scale by simulation: a time model of a whole training run at a
 * fleet's failure rate, and the goodput each way of recovering gives it
 * (zshard-sim --fleet). Not the protocol (the worlds prove that): its
 * costs, as times, drawn run after run from a seed.
 *
 * The job: S servers, T trainer ranks (one GPU each, G per host, a host
 * running one shard server beside its ranks), N steps of step_s each (its
 * compute and communication overlapped: the link benchmark measured the
 * step within 1.05x of the larger). Failures arrive as a Poisson process
 * at a per-GPU rate (Llama 3's published one by default: 419 unexpected
 * interruptions in 54 days on 16,384 GPUs); a share of them takes a whole
 * host (its server and its G ranks: Llama 3 counts 78% hardware, most of
 * it one GPU; host-wide here: network, host and power), the rest one rank.
 *
 * Recovery, each way:
 *   checkpoint-restart  every rank restarted on any failure (PyTorch
 *                       FSDP, DeepSpeed): detection, the job's relaunch,
 *                       its checkpoint read, the steps since it computed
 *                       again; checkpoints every K steps (async, a staging
 *                       stall each), K Young/Daly's optimum for the rate
 *   zshard redo         a lost rank's replacement redoes its one step
 *                       (detected in gone_s); a lost host's server fails
 *                       over to its replicas (its lease), its ranks
 *                       replaced on a spare host; its copies seeded again
 *                       in the background; a second host lost while that
 *                       seeding runs, holding the other copy of a shard
 *                       (a neighbour: 2 of S-1 hosts), rolls the job back
 *                       to its last checkpoint (servers' NVMe, a capture
 *                       stall each)
 *   zshard shrink       the same without spare hosts: the job shrinks
 *                       by the ranks lost (rank_lost: shrink) and goes on
 *                       with fewer until the host is repaired (its work
 *                       per step in proportion)
 *   zshard, one copy    redo for ranks; a lost server rolls back
 *
 * Goodput: the useful step time (N full steps) over the wall time.
 *
 * --fleet-check prints the model's times for the fault matrix's cluster
 * (tests/faults/faults.py: 2 servers, 2 ranks, steps of 10-20 ms, a
 * checkpoint every 10) beside which bench/fleet.sh puts bench/recovery.py's
 * measured ones: the time model validated at small scale.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/world.h"

struct fmodel {
	uint32_t servers, trainers, per_host;
	uint64_t steps;
	double step_s;
	double gpu_rate;  /* interruptions per GPU-second */
	double host_frac; /* the share that takes a host */
	/* zshard */
	double gone_s;    /* a dead rank seen (its connections ended; --trainer-gone-ms) */
	double lease_s;   /* a dead host's server seen (--lease-ms) */
	double restart_s; /* a process replaced, to ready (a spare host's, at scale) */
	double resume_s;  /* ranks back on a new timeline (reconnect, rejoin) */
	double restore_s; /* a checkpoint restored onto the servers */
	double capture_s; /* a checkpoint's stall (a snapshot captured between steps) */
	double reseed_s;  /* a lost server's copies seeded again elsewhere */
	double repair_s;  /* a lost host back (shrink) */
	/* checkpoint-restart */
	double cr_detect_s, cr_restart_s, cr_load_s, cr_stall_s;
};

/* The fleet: 1,024 hosts of 8 GPUs, a 70 B-parameter model (16 bytes a
 * parameter of parameters and Adam state: 1.12 TB, 1.1 GB a server). */
static const struct fmodel FLEET = {
	.servers = 1024, .trainers = 8192, .per_host = 8, .steps = 10000, .step_s = 10.0,
	.gpu_rate = 419.0 / (54.0 * 86400.0 * 16384.0), .host_frac = 0.22,
	.gone_s = 3.0, .lease_s = 10.0, .restart_s = 60.0, .resume_s = 5.0,
	.restore_s = 1.1e9 / 2e9 + 2.0, /* 1.1 GB a server at 2 GB/s, and the restore's tasks */
	.capture_s = 1.1e9 / 10e9,       /* host memory copy of a server's state */
.reseed_s = 1.1e9 / 12.5e9 * 4, /* 100 Gbit/s, 4x for the load */
	.repair_s = 4 * 3600.0,
	.cr_detect_s = 60.0, .cr_restart_s = 180.0,
	.cr_load_s = 1.12e12 / 200e9, /* 1.12 TB at 200 GB/s of shared storage */
	.cr_stall_s = 1.1e9 / 10e9,
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double uni(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 9007199254740992.0;
}

static double expo(uint64_t *s, double rate)
{
	return -log(1.0 - uni(s)) / rate;
}

enum fway { FW_CR, FW_REDO, FW_SHRINK, FW_ONE_COPY, FW_COUNT };
static const char *const way_name[FW_COUNT] = {
	"checkpoint-restart of every rank", "zshard: replicas 2, redo, spare hosts",
	"zshard: replicas 2, redo, elastic shrink", "zshard: one copy, redo (a server lost rolls back)"};

/* Young/Daly: the interval that minimises checkpoint and rework time, for
 * a checkpoint's stall and the rate of failures that roll back. */
static uint64_t young_daly(const struct fmodel *m, double stall_s, double rate)
{
	double k = sqrt(2.0 * stall_s / rate) / m->step_s;
	return k < 1 ? 1 : (uint64_t)k;
}

static uint64_t cr_every(const struct fmodel *m)
{
	return young_daly(m, m->cr_stall_s, m->gpu_rate * m->trainers);
}

/* zshard's: a rollback takes a server lost (one copy), or two (replicas) */
static uint64_t zs_every(const struct fmodel *m)
{
	return young_daly(m, m->capture_s, m->gpu_rate * m->trainers * m->host_frac);
}

struct frun {
	double wall, useful;
	uint64_t failures, rollbacks;
};

/* One run of the job, the way w, its failures drawn from seed. */
static struct frun run(const struct fmodel *m, enum fway w, uint64_t seed)
{
	uint64_t rs = seed, done = 0, last_ckpt = 0;
	uint64_t every = w == FW_CR ? cr_every(m) : zs_every(m);
	double rate = m->gpu_rate * m->trainers, t = 0, next = expo(&rs, rate);
	double reseed_end = -1, shrink_until = -1, useful = 0, useful_ckpt = 0;
	uint32_t shrunk = 0;
	struct frun out = {0};

	while (done < m->steps) {
		double stall = (done && done % every == 0 && done != last_ckpt)
				       ? (w == FW_CR ? m->cr_stall_s : m->capture_s)
				       : 0;
		if (stall) {
			t += stall;
			last_ckpt = done;
			useful_ckpt = useful;
		}
		if (w == FW_SHRINK && shrunk && t >= shrink_until)
			shrunk = 0; /* repaired: the world grows back */
		if (t + m->step_s <= next) { /* a step, whole */
			t += m->step_s;
			useful += m->step_s * (double)(m->trainers - shrunk) / m->trainers;
			done++;
			continue;
		}
		/* a failure mid-step: what it costs, this way */
		t = next;
		out.failures++;
		bool host = uni(&rs) < m->host_frac;
		switch (w) {
		case FW_CR:
			t += m->cr_detect_s + m->cr_restart_s + m->cr_load_s;
			done = last_ckpt;
			out.rollbacks++;
			break;
		case FW_ONE_COPY:
			if (host) {
				t += m->lease_s + m->restart_s + m->restore_s + m->resume_s;
				done = last_ckpt;
				out.rollbacks++;
			} else {
				t += fmax(m->gone_s, m->restart_s) + m->step_s;
			}
			break;
		case FW_REDO:
		case FW_SHRINK:
			if (host && t < reseed_end && uni(&rs) < 2.0 / (m->servers - 1)) {
				t += m->restore_s + m->resume_s; /* both copies of a shard lost */
				done = last_ckpt;
				useful = useful_ckpt;
				out.rollbacks++;
				break;
			}
			if (host)
				reseed_end = t + fmax(m->lease_s, m->gone_s) + m->reseed_s;
			if (w == FW_REDO) {
				t += (host ? fmax(m->lease_s, fmax(m->gone_s, m->restart_s))
					   : fmax(m->gone_s, m->restart_s)) + m->step_s;
			} else { /* shrink: lost ranks' places taken, the step redone */
				t += (host ? fmax(m->lease_s, m->gone_s) : m->gone_s) + m->resume_s +
				     m->step_s;
				shrunk += host ? m->per_host : 1;
				if (shrunk >= m->trainers)
					shrunk = m->trainers - 1;
				shrink_until = t + m->repair_s;
			}
			break;
		default:
			break;
		}
		next = t + expo(&rs, rate);
	}
	out.wall = t;
	out.useful = w == FW_SHRINK ? useful : (double)m->steps * m->step_s;
	return out;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void fleet(const struct fmodel *m, int runs, uint64_t seed)
{
	double *g = malloc((size_t)runs * sizeof *g);

	if (!g)
		return;
	printf("fleet: %u servers, %u ranks (%u a host), %llu steps of %.1f s; %.2f failures a day (%.2e per GPU-second, %.0f%% a whole host); %d runs each from seed %llu\n",
	       m->servers, m->trainers, m->per_host, (unsigned long long)m->steps, m->step_s,
	       m->gpu_rate * m->trainers * 86400, m->gpu_rate, m->host_frac * 100, runs,
	       (unsigned long long)seed);
	printf("| recovery | goodput (median) | goodput p10 | failures a run (mean) | rollbacks a run (mean) | wall h (median) |\n");
	printf("|---|---|---|---|---|---|\n");
	for (int w = 0; w < FW_COUNT; w++) {
		double fails = 0, rolls = 0, *wall = malloc((size_t)runs * sizeof *wall);
		if (!wall)
			break;
		for (int r = 0; r < runs; r++) {
			struct frun o = run(m, (enum fway)w, seed + (uint64_t)r * 7919);
			g[r] = o.useful / o.wall;
			wall[r] = o.wall / 3600;
			fails += (double)o.failures;
			rolls += (double)o.rollbacks;
		}
		qsort(g, (size_t)runs, sizeof *g, cmp_d);
		qsort(wall, (size_t)runs, sizeof *wall, cmp_d);
		printf("| %s | %.4f | %.4f | %.2f | %.2f | %.2f |\n", way_name[w], g[runs / 2],
		       g[runs / 10], fails / runs, rolls / runs, wall[runs / 2]);
		free(wall);
	}
	printf("(checkpoints every %llu steps for checkpoint-restart, every %llu for zshard: Young/Daly's optimum for each)\n",
	       (unsigned long long)cr_every(m), (unsigned long long)zs_every(m));
	free(g);
}

/*
 * The fault matrix's cluster (bench/recovery.py): what one fault costs
 * from the kill until rank 0 is three steps past the step it had
 * finished, by the model: the harness's configuration (faults.py: its
 * supervisor restarts a process 0.3 s after it dies; --lease-ms 2000, so
 * the coordinator's sweep ticks every 500 ms and a server heartbeats every
 * 667 ms; --trainer-gone-ms 1500; a checkpoint every 10 steps of 10-20
 * ms), the client's fixed periods (a renewal a second, a join retried
 * every 200 ms, a failover or verdict polled every 100 ms, a resume's
 * restore every 50 ms), each waited for half its period on average, and
 * one measured input: start_s, a process started to ready (bench/fleet.py
 * measures a server's).
 */
static void check(double start_s)
{
	const double step = 0.015, sup = 0.3, every = 10;
	const double gone = 1.5, renew = 1.0, sweep = 0.5, hb = 2.0 / 3, join = 0.2, poll = 0.1,
		     restore_poll = 0.05;
	/* a dead rank: judged gone gone_ms after its last renewal (a uniform
	 * phase before the kill), at the sweep's tick; its replacement,
	 * started meanwhile, joins at its next try and redoes the step */
	double t_gone = gone - renew / 2 + sweep / 2;
	double trainer = fmax(t_gone, sup + start_s) + join / 2 + 4 * step;
	/* one copy: the server restarted registers, the job rolls back; the
	 * restore reaches the servers at their heartbeat and is done at the
	 * next; the ranks, polling for the verdict, resume once it is, and
	 * compute again the steps since the checkpoint */
	double server = sup + start_s + hb / 2 + hb / 2 + poll / 2 + restore_poll / 2 +
			(every / 2 + 3) * step;
	/* two copies: failed over as it registers; the ranks take the new
	 * placement at their next poll, the servers at their heartbeat */
	double replicated = sup + start_s + poll / 2 + hb / 2 + 3 * step;

	printf("fleet-check: trainer %.2f s\n", trainer);
	printf("fleet-check: server %.2f s\n", server);
	printf("fleet-check: replicated %.2f s\n", replicated);
}

int fleet_main(int argc, char **argv)
{
	struct fmodel m = FLEET;
	int runs = 200;
	uint64_t seed = 1;
	double start_s = -1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--fleet"))
			continue;
		if (!v) {
			fprintf(stderr, "zshard-sim --fleet: %s wants a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--runs"))
			runs = atoi(v);
		else if (!strcmp(a, "--seed"))
			seed = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--steps"))
			m.steps = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--rate-x"))
			m.gpu_rate *= strtod(v, NULL);
		else if (!strcmp(a, "--check-start-s"))
			start_s = strtod(v, NULL);
		else {
			fprintf(stderr, "zshard-sim --fleet: unknown option %s\n", a);
			return 2;
		}
		i++;
	}
	if (runs < 1) {
		fprintf(stderr, "zshard-sim --fleet: --runs must be at least 1\n");
		return 2;
	}
	if (start_s >= 0) {
		check(start_s);
		return 0;
	}
	fleet(&m, runs, seed);
	return 0;
}
