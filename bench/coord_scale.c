/*
 * coord_scale.c - the coordinator at cluster scale, through real RPCs: a
 * load generator starts a coordinator of its own (a fresh data dir), then
 *
 *  1. registers S servers (default 1000; fake addresses, 1 TiB each);
 *  2. places a job of U units (default 10,000, bf16, 64 Ki elements each)
 *     over them, in process (place_job, what CreateJob runs) and through
 *     CreateJob (placement, the LMDB commit, the reply);
 *  3. joins R ranks (default 10,000; many per connection) as trainers do;
 *  4. for SECONDS, offers what such a cluster sends: every server's
 *     heartbeat each second, every rank's lease renewal each second (what
 *     libzshard's lease thread sends) and one step report per rank per
 *     second, from THREADS
 *     threads each on its own connection, and times every call;
 *
 * and prints each call's median and p99 latency, the rate offered against
 * the rate achieved, and the coordinator's resident memory per server +
 * rank. Goals (issue 14): placement < 50 ms; heartbeat and step report < 1
 * ms median, < 10 ms p99 under that load; memory linear in servers + ranks.
 * A phase that cannot finish within its time bound says so and the run
 * goes on with what it has.
 *
 *   bench_coord_scale BIN_DIR [SERVERS] [RANKS] [UNITS] [SECONDS] [THREADS]
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/timing.h"
#include "ctrl/codec.h"
#include "ctrl/coord_client.h"
#include "model/placement.h"

#define MAXT 32

static char addr[64];
static uint32_t S, R, U, T;
static int secs;
static uint64_t *srv_ids;
static uint64_t *sessions;
static struct zs_job_spec spec;
static uint64_t digest; /* the job's layout's, as a trainer sends it */
static atomic_uint next_rank, joined;
static atomic_int stop_load;

struct lat {
	double *v;
	size_t n, cap;
};

static void lat_add(struct lat *l, double us)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->v = realloc(l->v, l->cap * sizeof *l->v);
	}
	l->v[l->n++] = us;
}

static double pct(struct lat *l, double p)
{
	if (!l->n)
		return 0.0;
	qsort(l->v, l->n, sizeof *l->v, bench_cmp);
	return l->v[(size_t)(p * (double)(l->n - 1))];
}

static struct zs_coord_client *conn(void)
{
	struct zs_coord_client *c;
	struct zs_error err = {0};
	if (zs_coord_open(addr, 30000, 1, &c, &err)) {
		fprintf(stderr, "bench_coord_scale: %s\n", err.msg);
		exit(1);
	}
	return c;
}

static uint64_t rss_kb(pid_t pid)
{
	char path[64], line[256];
	unsigned long kb = 0;
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* the process's CPU time (user + system), seconds */
static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	p = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			 &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

struct worker {
	int id;
	struct lat reg, join, shb, thb, rep;
	uint64_t fails;
	char why[256];
};

static void *register_main(void *arg)
{
	struct worker *w = arg;
	struct zs_coord_client *c = conn();
	for (uint32_t i = (uint32_t)w->id; i < S; i += T) {
		struct zs_server_info me = {.capacity = 1ull << 40, .transports = 1};
		struct zs_error err = {0};
		uint32_t lease;
		double t0 = bench_now();
		snprintf(me.addr, sizeof me.addr, "127.0.0.1:%u", 20000 + i);
		snprintf(me.data_addr, sizeof me.data_addr, "127.0.0.1:%u", 40000 + i);
		snprintf(me.host, sizeof me.host, "h%u", i);
		if (zs_coord_register(c, &me, &srv_ids[i], &lease, &err)) {
			w->fails++;
			snprintf(w->why, sizeof w->why, "register: %.200s", err.msg);
		}
		lat_add(&w->reg, (bench_now() - t0) * 1e6);
	}
	zs_coord_close(c);
	return NULL;
}

static void *join_main(void *arg)
{
	struct worker *w = arg;
	struct zs_coord_client *c = conn();
	double deadline = bench_now() + 600.0;
	uint32_t r;
	while ((r = atomic_fetch_add(&next_rank, 1)) < R && bench_now() < deadline) {
		struct zs_join_req q = {.rank = r, .session = 1000 + r, .layout_digest = digest};
		struct zs_job j;
		struct zs_error err = {0};
		double t0 = bench_now();
		snprintf(q.job, sizeof q.job, "%s", spec.name);
		snprintf(q.host, sizeof q.host, "t%u", r / 8);
		if (zs_coord_join(c, &q, &j, &err)) {
			w->fails++;
			snprintf(w->why, sizeof w->why, "join: %.200s", err.msg);
		} else {
			zs_job_release(&j);
			atomic_fetch_add(&joined, 1);
		}
		sessions[r] = 1000 + r;
		lat_add(&w->join, (bench_now() - t0) * 1e6);
	}
	zs_coord_close(c);
	return NULL;
}

/* The steady load: this worker's share of servers and ranks, each once a
 * second, round after round until stop_load. */
static void *load_main(void *arg)
{
	struct worker *w = arg;
	struct zs_coord_client *c = conn();
	while (!atomic_load(&stop_load)) {
		double round = bench_now();
		for (uint32_t i = (uint32_t)w->id; i < S || i < R; i += T) {
			struct zs_error err = {0};
			double t0;
			if (atomic_load(&stop_load))
				break;
			if (i < S) {
				uint32_t lease;
				uint64_t gen, tgen;
				t0 = bench_now();
				if (zs_coord_heartbeat(c, srv_ids[i], "", &lease, &gen, &tgen, &err))
					w->fails++, snprintf(w->why, sizeof w->why, "heartbeat: %.200s", err.msg);
				lat_add(&w->shb, (bench_now() - t0) * 1e6);
			}
			if (i < R && i < atomic_load(&joined) + T) {
				struct zs_server_info *down;
				uint32_t n_down;
				uint64_t tl;
				struct zs_step_answer an;
				struct zs_step_report rep = {.step = 1, .seconds = 0.5};
				t0 = bench_now();
				if (zs_coord_trainer_heartbeat(c, spec.name, i, sessions[i], 0, &tl, &down,
							       &n_down, &err))
					w->fails++, snprintf(w->why, sizeof w->why, "trainer heartbeat: %.200s", err.msg);
				else
					free(down);
				lat_add(&w->thb, (bench_now() - t0) * 1e6);
				t0 = bench_now();
				if (zs_coord_report_step(c, spec.name, i, &rep, &an, &err))
					w->fails++, snprintf(w->why, sizeof w->why, "step report: %.200s", err.msg);
				lat_add(&w->rep, (bench_now() - t0) * 1e6);
			}
		}
		/* once a second at most: the offered rate */
		double left = 1.0 - (bench_now() - round);
		if (left > 0 && !atomic_load(&stop_load))
			usleep((useconds_t)(left * 1e6));
	}
	zs_coord_close(c);
	return NULL;
}

static void run_all(void *(*fn)(void *), struct worker *w)
{
	pthread_t th[MAXT];
	for (uint32_t k = 0; k < T; k++)
		pthread_create(&th[k], NULL, fn, &w[k]);
	for (uint32_t k = 0; k < T; k++)
		pthread_join(th[k], NULL);
}

/* merges field off of every worker's struct lat */
static struct lat merged(struct worker *w, size_t off)
{
	struct lat m = {0};
	for (uint32_t k = 0; k < T; k++) {
		struct lat *l = (struct lat *)((char *)&w[k] + off);
		for (size_t i = 0; i < l->n; i++)
			lat_add(&m, l->v[i]);
	}
	return m;
}

static void row(const char *what, struct worker *w, size_t off, double seconds, const char *goal)
{
	struct lat m = merged(w, off);
	double p50 = pct(&m, 0.5), p99 = pct(&m, 0.99);
	printf("| %s | %zu | %.0f | %.3f | %.3f | %s |\n", what, m.n,
	       seconds > 0 ? (double)m.n / seconds : 0.0, p50 / 1e3, p99 / 1e3, goal);
	free(m.v);
}

int main(int argc, char **argv)
{
	const char *bin = argc > 1 ? argv[1] : "build/bin";
	char dir[] = "/tmp/zshard-cscale-XXXXXX", exe[1024], portf[1200], data[1200];
	struct zs_error err = {0};
	struct worker w[MAXT];
	struct zs_coord_client *c;
	struct place_server *ps;
	struct zs_placement pl;
	struct zs_job job;
	double plan_ms[5], create_ms, t0, joins_s, load_s, cpu0, dec_ms[5];
	size_t reply_bytes = 0;
	uint64_t rss0, rss1, rss2;
	pid_t pid;

	S = argc > 2 ? (uint32_t)atoi(argv[2]) : 1000;
	R = argc > 3 ? (uint32_t)atoi(argv[3]) : 10000;
	U = argc > 4 ? (uint32_t)atoi(argv[4]) : 10000;
	secs = argc > 5 ? atoi(argv[5]) : 10;
	T = argc > 6 ? (uint32_t)atoi(argv[6]) : 8;
	if (!S || !R || !U || T < 1 || T > MAXT || secs < 1) {
		fprintf(stderr, "usage: bench_coord_scale BIN_DIR [SERVERS] [RANKS] [UNITS] [SECONDS] [THREADS<=32]\n");
		return 2;
	}
	if (!mkdtemp(dir))
		return 1;
	snprintf(exe, sizeof exe, "%s/zshard-coordinator", bin);
	snprintf(portf, sizeof portf, "%s/addr", dir);
	snprintf(data, sizeof data, "%s/data", dir);
	pid = fork();
	if (pid == 0) {
		char log[1200];
		snprintf(log, sizeof log, "%s/coord.log", dir);
		freopen(log, "w", stderr);
		freopen("/dev/null", "w", stdout);
		execl(exe, exe, "--listen", "127.0.0.1:0", "--data-dir", data, "--port-file", portf,
		      "--lease-ms", "60000", "--trainer-lease-ms", "600000", "--log-level", "warn",
		      (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 100 && !addr[0]; i++) {
		FILE *f = fopen(portf, "r");
		if (f) {
			if (!fgets(addr, sizeof addr, f))
				addr[0] = '\0';
			fclose(f);
			addr[strcspn(addr, "\n")] = '\0';
		}
		if (!addr[0])
			usleep(100000);
	}
	if (!addr[0]) {
		fprintf(stderr, "bench_coord_scale: the coordinator (%s) did not start\n", exe);
		kill(pid, SIGKILL);
		return 1;
	}
	rss0 = rss_kb(pid);
	memset(w, 0, sizeof w);
	for (uint32_t k = 0; k < T; k++)
		w[k].id = (int)k;
	srv_ids = calloc(S, sizeof *srv_ids);
	sessions = calloc(R, sizeof *sessions);

	/* 1. servers */
	t0 = bench_now();
	run_all(register_main, w);
	printf("| phase | calls | per s | median ms | p99 ms | goal |\n|---|---|---|---|---|---|\n");
	row("RegisterServer", w, offsetof(struct worker, reg), bench_now() - t0, "-");

	/* 2. the job: placement in process, then CreateJob */
	{
		memset(&spec, 0, sizeof spec);
		snprintf(spec.name, sizeof spec.name, "scale");
		spec.stage = 3;
		spec.world_size = R;
		spec.compute_dtype = ZS_BF16;
		spec.optim = (struct zs_optim){.kind = ZS_ADAMW, .lr = 1e-3};
		spec.layout.n_units = U;
		spec.layout.units = calloc(U, sizeof *spec.layout.units);
		for (uint32_t u = 0; u < U; u++) {
			struct zs_unit *un = &spec.layout.units[u];
			snprintf(un->name, sizeof un->name, "u%u", u);
			un->n_tensors = 1;
			un->tensors = calloc(1, sizeof *un->tensors);
			snprintf(un->tensors[0].name, sizeof un->tensors[0].name, "w");
			un->tensors[0].ndim = 1;
			un->tensors[0].shape[0] = 65536;
		}
		if (zs_job_spec_normalize(&spec, &err)) {
			fprintf(stderr, "bench_coord_scale: spec: %s\n", err.msg);
			kill(pid, SIGKILL);
			return 1;
		}
	}
	ps = calloc(S, sizeof *ps);
	for (uint32_t i = 0; i < S; i++)
		ps[i] = (struct place_server){.id = srv_ids[i], .free_bytes = 1ull << 40};
	for (int k = 0; k < 5; k++) {
		t0 = bench_now();
		if (place_job(&spec, ps, S, NULL, &pl, &err)) {
			fprintf(stderr, "bench_coord_scale: place_job: %s\n", err.msg);
			kill(pid, SIGKILL);
			return 1;
		}
		plan_ms[k] = (bench_now() - t0) * 1e3;
		if (k < 4)
			zs_placement_release(&pl);
	}
	c = conn();
	t0 = bench_now();
	if (zs_coord_create_job(c, &spec, &job, &err)) {
		fprintf(stderr, "bench_coord_scale: CreateJob: %s\n", err.msg);
		kill(pid, SIGKILL);
		return 1;
	}
	digest = zs_layout_digest(&job.spec.layout);
	create_ms = (bench_now() - t0) * 1e3;
	{
		double pm = bench_median(plan_ms, 5);
		printf("| placement of %u units over %u servers (place_job, in process; %u shards) | 5 | - | %.3f | - | < 50 ms |\n",
		       U, S, pl.n_shards, pm);
		printf("| CreateJob (placement, LMDB commit, reply) | 1 | - | %.3f | - | - |\n", create_ms);
	}
	zs_placement_release(&pl);
	{ /* what a join's reply costs the trainer: its size, its decoding */
		struct zs_buf b;
		if (!zs_enc_job(&job, &b)) {
			reply_bytes = b.len;
			for (int k = 0; k < 5; k++) {
				struct zs_job d;
				t0 = bench_now();
				if (zs_dec_job(b.data, b.len, &d, NULL))
					break;
				dec_ms[k] = (bench_now() - t0) * 1e3;
				zs_job_release(&d);
			}
			zs_buf_release(&b);
		}
	}
	zs_job_release(&job);
	zs_coord_close(c);
	rss1 = rss_kb(pid);

	/* 3. joins */
	t0 = bench_now();
	cpu0 = cpu_s(pid);
	run_all(join_main, w);
	joins_s = bench_now() - t0;
	row("Join", w, offsetof(struct worker, join), joins_s, "-");
	printf("| (a join: %.3f ms of the coordinator's CPU; its reply %.2f MB, %.1f ms to decode in the trainer) | | | | | |\n",
	       (cpu_s(pid) - cpu0) * 1e3 / (double)(atomic_load(&joined) ? atomic_load(&joined) : 1),
	       (double)reply_bytes / 1e6, reply_bytes ? bench_median(dec_ms, 5) : 0.0);
	if (atomic_load(&joined) < R)
		printf("| (joined %u of %u ranks) | | | | | |\n", atomic_load(&joined), R);

	/* 4. the steady load */
	{
		pthread_t th[MAXT];
		for (uint32_t k = 0; k < T; k++)
			pthread_create(&th[k], NULL, load_main, &w[k]);
		t0 = bench_now();
		sleep((unsigned)secs);
		atomic_store(&stop_load, 1);
		for (uint32_t k = 0; k < T; k++)
			pthread_join(th[k], NULL);
		load_s = bench_now() - t0;
	}
	rss2 = rss_kb(pid);
	row("Heartbeat (servers)", w, offsetof(struct worker, shb), load_s, "< 1 ms median, < 10 ms p99");
	row("TrainerHeartbeat (lease)", w, offsetof(struct worker, thb), load_s, "< 1 ms median, < 10 ms p99");
	row("ReportStep", w, offsetof(struct worker, rep), load_s, "< 1 ms median, < 10 ms p99");
	{
		uint64_t fails = 0;
		for (uint32_t k = 0; k < T; k++)
			fails += w[k].fails;
		printf("\n(%u servers, %u ranks, a job of %u units of 64 Ki bf16 elements; %u client threads "
		       "on connections of their own; offered each second: %u server heartbeats, %u lease "
		       "renewals and %u step reports; %llu calls failed%s%s)\n",
		       S, R, U, T, S, R, R, (unsigned long long)fails, fails ? ", e.g. " : "",
		       fails ? w[0].why[0] ? w[0].why : "another worker's" : "");
		printf("\ncoordinator resident memory: %.1f MiB at start, %.1f MiB with %u servers and the job, %.1f MiB with %u ranks joined: %.0f bytes per server + rank\n",
		       (double)rss0 / 1024, (double)rss1 / 1024, S, (double)rss2 / 1024, atomic_load(&joined),
		       (double)(rss2 - rss0) * 1024.0 / (double)(S + atomic_load(&joined)));
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	{
		char cmd[1200];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd))
			fprintf(stderr, "bench_coord_scale: could not remove %s\n", dir);
	}
	return 0;
}
