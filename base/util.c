/* util.c - parsers and clocks (see util.h). */
#include "base/util.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum zs_status zs_parse_u64(const char *s, uint64_t min, uint64_t max,
			    uint64_t *out, struct zs_error *err)
{
	unsigned long long v;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return zs_fail(err, ZS_EINVAL, "'%s' is not a number",
			       s ? s : "");
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return zs_fail(err, ZS_EINVAL, "'%s' is not a number", s);
	if (v < min || v > max)
		return zs_fail(err, ZS_EINVAL,
			       "%s is out of range [%llu, %llu]", s,
			       (unsigned long long)min,
			       (unsigned long long)max);
	*out = v;
	return ZS_OK;
}

enum zs_status zs_parse_size(const char *s, uint64_t *out, struct zs_error *err)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return zs_fail(err, ZS_EINVAL,
			       "'%s' is not a size (e.g. 512M, 8G)", s ? s : "");
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return zs_fail(err, ZS_EINVAL, "size '%s' is too large", s);
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	case 'P': shift = 50; end++; break;
	default: break;
	}
	if (shift && *end == 'i')
		end++;
	if (toupper((unsigned char)*end) == 'B')
		end++;
	if (*end)
		return zs_fail(err, ZS_EINVAL,
			       "'%s' is not a size (e.g. 512M, 8G)", s);
	if (shift && v > (UINT64_MAX >> shift))
		return zs_fail(err, ZS_EINVAL, "size '%s' is too large", s);
	*out = (uint64_t)v << shift;
	return ZS_OK;
}

enum zs_status zs_parse_hostport(const char *s, char host[ZS_HOST_MAX],
				 uint16_t *port, struct zs_error *err)
{
	const char *colon, *h = s;
	size_t hlen;
	uint64_t p;

	if (!s || !*s)
		return zs_fail(err, ZS_EINVAL, "empty address (want HOST:PORT)");
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (!rb || rb[1] != ':')
			return zs_fail(err, ZS_EINVAL,
				       "bad address '%s' (want [V6]:PORT)", s);
		h = s + 1;
		hlen = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return zs_fail(err, ZS_EINVAL,
				       "bad address '%s' (want HOST:PORT)", s);
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= ZS_HOST_MAX)
		return zs_fail(err, ZS_EINVAL, "bad host in address '%s'", s);
	if (zs_parse_u64(colon + 1, 0, 65535, &p, NULL))
		return zs_fail(err, ZS_EINVAL,
			       "bad port in address '%s' (0..65535)", s);
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	*port = (uint16_t)p;
	return ZS_OK;
}

/* Whether s has a port: "h:p", "[v6]:p" (not "h", "[v6]"). */
static bool has_port(const char *s)
{
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		return rb && rb[1] == ':';
	}
	return strchr(s, ':') != NULL;
}

enum zs_status zs_advertise_addr(const char *adv, const char *bound, bool host_only, char *out,
				 size_t len, const char *what, struct zs_error *err)
{
	char bhost[ZS_HOST_MAX], ahost[ZS_HOST_MAX], probe[ZS_HOST_MAX + 8];
	uint16_t bport, aport;
	struct zs_error e = {0};

	if (zs_parse_hostport(bound, bhost, &bport, &e))
		return zs_fail(err, ZS_EINVAL, "%s", e.msg);
	if (!adv) {
		if (!strcmp(bhost, "0.0.0.0") || !strcmp(bhost, "::") || !strcmp(bhost, "*"))
			return zs_fail(err, ZS_EINVAL,
				       "the %s address %s is a wildcard that peers cannot reach: give --advertise HOST (or HOST:PORT)",
				       what, bound);
		snprintf(out, len, "%s", bound);
		return ZS_OK;
	}
	if (has_port(adv)) {
		if (zs_parse_hostport(adv, ahost, &aport, &e))
			return zs_fail(err, ZS_EINVAL, "--advertise '%s': %s", adv, e.msg);
		if (!aport && !host_only)
			return zs_fail(err, ZS_EINVAL, "--advertise '%s': the port must be real", adv);
	} else {
		/* a host alone: parse it with the bound port to check it */
		snprintf(probe, sizeof probe, "%s:%u", adv, bport);
		if (zs_parse_hostport(probe, ahost, &aport, &e))
			return zs_fail(err, ZS_EINVAL, "--advertise '%s': %s", adv, e.msg);
	}
	if (host_only || !has_port(adv))
		aport = bport;
	if (strchr(ahost, ':'))
		snprintf(out, len, "[%s]:%u", ahost, aport);
	else
		snprintf(out, len, "%s:%u", ahost, aport);
	return ZS_OK;
}

int zs_random_bytes(void *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = getrandom((uint8_t *)p + got, n - got, 0);
		if (k < 0 && errno != EINTR)
			return -1;
		if (k > 0)
			got += (size_t)k;
	}
	return 0;
}

int64_t zs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t zs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t zs_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec zs_deadline_in(int64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

void zs_sleep_ms(int64_t ms, volatile const int *stop)
{
	int64_t until = zs_now_ms() + ms;

	while (!(stop && *stop)) {
		int64_t left = until - zs_now_ms();
		struct timespec ts;
		if (left <= 0)
			return;
		/* wake at least every 50 ms to notice *stop */
		if (left > 50)
			left = 50;
		ts.tv_sec = left / 1000;
		ts.tv_nsec = (left % 1000) * 1000000;
		nanosleep(&ts, NULL);
	}
}

enum zs_status zs_write_file_atomic(const char *path, const char *s,
				    struct zs_error *err)
{
	char tmp[PATH_MAX];
	size_t len = strlen(s);
	int fd;

	if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
		return zs_fail(err, ZS_EINVAL, "path too long: %s", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	if (write(fd, s, len) != (ssize_t)len || fsync(fd)) {
		close(fd);
		unlink(tmp);
		goto fail;
	}
	close(fd);
	if (rename(tmp, path)) {
		unlink(tmp);
		goto fail;
	}
	return ZS_OK;
fail:
	return zs_fail(err, zs_status_from_errno(errno), "cannot write %s: %s",
		       path, strerror(errno));
}

enum zs_status zs_private_dir(const char *dir, struct zs_error *err)
{
	enum zs_status st = zs_mkdir_p(dir, err);

	if (!st && chmod(dir, 0700))
		st = zs_fail(err, zs_status_from_errno(errno), "cannot make %s private (mode 0700): %s",
			     dir, strerror(errno));
	return st;
}

enum zs_status zs_mkdir_p(const char *dir, struct zs_error *err)
{
	char buf[PATH_MAX];
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof buf)
		return zs_fail(err, ZS_EINVAL, "bad directory '%s'", dir);
	memcpy(buf, dir, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			goto fail;
		*p = '/';
	}
	if (mkdir(buf, 0755) && errno != EEXIST)
		goto fail;
	return ZS_OK;
fail:
	return zs_fail(err, zs_status_from_errno(errno),
		       "cannot create directory %s: %s", buf, strerror(errno));
}

enum zs_status zs_lock_dir(const char *dir, const char *name, int *fd,
			   struct zs_error *err)
{
	char path[PATH_MAX], pid[32] = "";
	int f;

	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
		return zs_fail(err, ZS_EINVAL, "path too long: %s", dir);
	f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (f < 0)
		return zs_fail(err, zs_status_from_errno(errno), "cannot open %s: %s",
			       path, strerror(errno));
	if (flock(f, LOCK_EX | LOCK_NB)) {
		ssize_t n = pread(f, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		close(f);
		return zs_fail(err, ZS_ESTATE,
			       "data dir %s is in use by another process (pid %s)",
			       dir, pid[0] ? pid : "unknown");
	}
	snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(f, 0) || pwrite(f, pid, strlen(pid), 0) < 0) {
		/* the lock holds even if the pid note fails */
	}
	*fd = f;
	return ZS_OK;
}

void zs_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, len, fmt, ap);
	va_end(ap);
}

const char *zs_fmt_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)b;
	int i = 0;

	while (v >= 1024.0 && i < 5) {
		v /= 1024.0;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)b);
	else
		snprintf(buf, len, "%.2f %s", v, unit[i]);
	return buf;
}

void zs_rss(uint64_t *now, uint64_t *peak)
{
	char line[128];
	unsigned long long kb;
	FILE *f = fopen("/proc/self/status", "r");

	*now = *peak = 0;
	while (f && fgets(line, sizeof line, f)) {
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			*now = (uint64_t)kb * 1024;
		else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
			*peak = (uint64_t)kb * 1024;
	}
	if (f)
		fclose(f);
}

uint32_t zs_take_front(void *v, uint32_t *n, size_t size, void *out, uint32_t max)
{
	uint32_t k = *n < max ? *n : max;

	if (k) {
		memcpy(out, v, k * size);
		memmove(v, (uint8_t *)v + k * size, (*n - k) * size);
		*n -= k;
	}
	return k;
}
