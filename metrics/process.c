/*
 * process.c - the standard process_* metrics (as Prometheus's own client
 * libraries export them), read from /proc/self at each scrape.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "metrics/metrics.h"

struct proc_series {
	struct zs_series *rss, *vsz, *cpu, *fds, *max_fds, *start, *threads;
};

static double boot_time(void)
{
	char line[256];
	double bt = 0;
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "btime %lf", &bt) == 1)
			break;
	fclose(f);
	return bt;
}

static void collect(void *ctx, struct zs_metrics *m)
{
	struct proc_series *p = ctx;
	char buf[1024], *q;
	unsigned long ut = 0, st = 0, vsz = 0;
	unsigned long long start = 0;
	long threads = 0, rss = 0;
	double tck = (double)sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/self/stat", "r");
	struct rlimit rl;
	DIR *d;

	(void)m;
	q = f && fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
	if (f)
		fclose(f);
	/* fields 14, 15 (utime, stime), 20 (threads), 22 (starttime), 23
	 * (vsize), 24 (rss pages), counted from the state (field 3) */
	if (q && sscanf(q + 2,
			"%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d %ld %*d %llu %lu %ld",
			&ut, &st, &threads, &start, &vsz, &rss) == 6) {
		zs_series_set(p->cpu, (double)(ut + st) / tck);
		zs_series_set(p->threads, (double)threads);
		zs_series_set(p->start, boot_time() + (double)start / tck);
		zs_series_set(p->vsz, (double)vsz);
		zs_series_set(p->rss, (double)rss * (double)sysconf(_SC_PAGESIZE));
	}
	if ((d = opendir("/proc/self/fd"))) {
		long n = -1; /* the directory's own descriptor */
		while (readdir(d))
			n++;
		closedir(d);
		zs_series_set(p->fds, (double)(n - 2)); /* less . and .. */
	}
	if (!getrlimit(RLIMIT_NOFILE, &rl))
		zs_series_set(p->max_fds, (double)rl.rlim_cur);
}

enum zs_status zs_metrics_add_process(struct zs_metrics *m, struct zs_error *err)
{
	static struct proc_series p; /* one process */

	p.rss = zs_metrics_gauge(m, "process_resident_memory_bytes", "Resident memory size in bytes.", "");
	p.vsz = zs_metrics_gauge(m, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "");
	p.cpu = zs_metrics_counter(m, "process_cpu_seconds_total",
				   "Total user and system CPU time spent in seconds.", "");
	p.fds = zs_metrics_gauge(m, "process_open_fds", "Number of open file descriptors.", "");
	p.max_fds = zs_metrics_gauge(m, "process_max_fds", "Maximum number of open file descriptors.", "");
	p.start = zs_metrics_gauge(m, "process_start_time_seconds",
				   "Start time of the process since unix epoch in seconds.", "");
	p.threads = zs_metrics_gauge(m, "process_threads", "Number of OS threads in the process.", "");
	if (!p.rss || !p.vsz || !p.cpu || !p.fds || !p.max_fds || !p.start || !p.threads)
		return zs_fail(err, ZS_ENOMEM, "out of memory");
	return zs_metrics_add_collector(m, collect, &p, err);
}
