/* harness.c - process helpers for the integration tests (see harness.h). */
#include "tests/harness.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

const char *h_bin(const char *name)
{
	static char buf[4096];
	const char *d = getenv("ZSHARD_BIN");
	snprintf(buf, sizeof buf, "%s/%s", d ? d : "build/bin", name);
	return buf;
}

char *h_tmpdir(const char *tag)
{
	const char *t = getenv("TMPDIR");
	char *p;
	if (asprintf(&p, "%s/zshard-%s-XXXXXX", t ? t : "/tmp", tag) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}

void h_rmtree(const char *dir)
{
	char *argv[] = {"rm", "-rf", (char *)dir, NULL};
	char *o, *e;

	if (dir && getenv("ZSHARD_KEEP_TEST_DIRS")) {
		fprintf(stderr, "kept %s\n", dir);
		return;
	}
	if (dir && h_run(argv, &o, &e) >= 0) {
		free(o);
		free(e);
	}
}

/*
 * The daemons this test process started and has not reaped: killed if the
 * process is stopped from outside (run-tests.sh's timeout sends SIGTERM),
 * so that a test that hangs leaves no process behind. An entry is cleared
 * when its process is reaped, so a reused pid is never hit.
 */
#define MAX_SPAWNED 256
static volatile pid_t spawned[MAX_SPAWNED];

static void forget(pid_t pid)
{
	for (int i = 0; i < MAX_SPAWNED; i++)
		if (spawned[i] == pid)
			spawned[i] = 0;
}

static void on_stop(int sig)
{
	for (int i = 0; i < MAX_SPAWNED; i++)
		if (spawned[i] > 0)
			kill(spawned[i], SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void remember(pid_t pid)
{
	static int handlers;

	if (!handlers) {
		signal(SIGTERM, on_stop);
		signal(SIGINT, on_stop);
		handlers = 1;
	}
	for (int i = 0; i < MAX_SPAWNED; i++)
		if (!spawned[i]) {
			spawned[i] = pid;
			return;
		}
}

pid_t h_spawn(char *const argv[], const char *log)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc) {
		fprintf(stderr, "harness: cannot start %s: %s\n", argv[0], strerror(rc));
		return -1;
	}
	remember(pid);
	return pid;
}

bool h_wait_file(const char *path, int ms, char *out, size_t len)
{
	for (int t = 0; t < ms; t += 20) {
		FILE *f = fopen(path, "r");
		if (f) {
			bool ok = fgets(out, (int)len, f) != NULL;
			fclose(f);
			if (ok) {
				out[strcspn(out, "\n")] = '\0';
				if (out[0])
					return true;
			}
		}
		sleep_ms(20);
	}
	return false;
}

int h_stop(pid_t pid, int sig, int ms)
{
	int status;

	if (pid <= 0)
		return -1;
	kill(pid, sig);
	for (int t = 0; t < ms; t += 10) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid) {
			forget(pid);
			return WIFEXITED(status) ? WEXITSTATUS(status)
						 : 128 + WTERMSIG(status);
		}
		if (r < 0)
			return -1;
		sleep_ms(10);
	}
	fprintf(stderr, "harness: pid %d did not exit within %d ms of signal %d; killing it\n",
		(int)pid, ms, sig);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	forget(pid);
	return -1;
}

/* Whether every thread of pid is stopped (state T in its stat); false
 * also when pid is not there. */
static bool all_stopped(pid_t pid)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	bool stopped = true;
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	if (!(d = opendir(path)))
		return false;
	while (stopped && (de = readdir(d))) {
		char stat[320], buf[512], *rp;
		FILE *f;
		if (de->d_name[0] == '.')
			continue;
		snprintf(stat, sizeof stat, "/proc/%d/task/%s/stat", (int)pid, de->d_name);
		if (!(f = fopen(stat, "r")))
			continue; /* the thread ended */
		/* "tid (comm) S ...": the state follows the last ')' */
		stopped = fgets(buf, sizeof buf, f) && (rp = strrchr(buf, ')')) &&
			  (rp[2] == 'T' || rp[2] == 't');
		fclose(f);
		n++;
	}
	closedir(d);
	return stopped && n > 0;
}

bool h_pause(pid_t pid, int ms)
{
	if (pid <= 0 || kill(pid, SIGSTOP))
		return false;
	for (int t = 0; t < ms; t += 5) {
		if (all_stopped(pid))
			return true;
		sleep_ms(5);
	}
	return false;
}

bool h_alive(pid_t pid)
{
	int status;
	pid_t r;

	if (pid <= 0)
		return false;
	r = waitpid(pid, &status, WNOHANG);
	if (r == pid)
		forget(pid);
	return r == 0;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, n = 0, r;

	if (!f)
		return strdup("");
	do {
		if (n + 4096 + 1 > cap) {
			cap = (cap + 4096) * 2;
			buf = realloc(buf, cap);
		}
		r = fread(buf + n, 1, cap - n - 1, f);
		n += r;
	} while (r > 0);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

int h_run(char *const argv[], char **out, char **err)
{
	char tmpl_o[] = "/tmp/zshard-out-XXXXXX", tmpl_e[] = "/tmp/zshard-err-XXXXXX";
	posix_spawn_file_actions_t fa;
	int fo = mkstemp(tmpl_o), fe = mkstemp(tmpl_e), status, rc = -1;
	pid_t pid;

	*out = *err = NULL;
	if (fo < 0 || fe < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fo, 1);
	posix_spawn_file_actions_adddup2(&fa, fe, 2);
	if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) == 0) {
		int t;
		for (t = 0; t < 60000; t += 5) {
			if (waitpid(pid, &status, WNOHANG) == pid)
				break;
			sleep_ms(5);
		}
		if (t >= 60000) {
			fprintf(stderr, "harness: %s ran over 60 s: killed\n", argv[0]);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		} else if (WIFEXITED(status)) {
			rc = WEXITSTATUS(status);
		}
	}
	posix_spawn_file_actions_destroy(&fa);
	close(fo);
	close(fe);
	*out = slurp(tmpl_o);
	*err = slurp(tmpl_e);
	unlink(tmpl_o);
	unlink(tmpl_e);
	return rc;
}

pid_t h_start_etcd(const char *dir, char *ep, size_t len)
{
	char bin[256], cu[96], pu[96], data[512], log[512], cluster[128];
	FILE *p = popen("command -v etcd", "r");

	if (!p || !fgets(bin, sizeof bin, p) || bin[0] != '/') {
		if (p)
			pclose(p);
		return 0;
	}
	pclose(p);
	bin[strcspn(bin, "\n")] = '\0';
	int cp = h_free_port(), pp = h_free_port();
	snprintf(ep, len, "127.0.0.1:%d", cp);
	snprintf(cu, sizeof cu, "http://127.0.0.1:%d", cp);
	snprintf(pu, sizeof pu, "http://127.0.0.1:%d", pp);
	snprintf(cluster, sizeof cluster, "t=%s", pu);
	snprintf(data, sizeof data, "%s/etcd", dir);
	snprintf(log, sizeof log, "%s/etcd.log", dir);
	char *argv[] = {bin, "--name", "t", "--data-dir", data, "--listen-client-urls", cu,
			"--advertise-client-urls", cu, "--listen-peer-urls", pu,
			"--initial-advertise-peer-urls", pu, "--initial-cluster", cluster,
			"--logger", "zap", "--log-level", "error", NULL};
	return h_spawn(argv, log);
}

int h_free_port(void)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof a;
	int s = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s >= 0 && !bind(s, (struct sockaddr *)&a, sizeof a) &&
	    !getsockname(s, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	if (s >= 0)
		close(s);
	return port;
}

bool h_poll(bool (*fn)(void *), void *arg, int ms)
{
	for (int t = 0; t <= ms; t += 50) {
		if (fn(arg))
			return true;
		sleep_ms(50);
	}
	return false;
}
