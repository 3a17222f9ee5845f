/*
 * util.h - small parsers and clocks shared by every binary: sizes with
 * suffixes, HOST:PORT addresses, bounded integers, monotonic milliseconds.
 * Pure functions; nothing here touches the network.
 */
#ifndef ZS_UTIL_H
#define ZS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "base/status.h"

#define ZS_HOST_MAX 256

/*
 * Parses a byte count: digits, optionally followed by K, M, G, T or P
 * (powers of 1024; "KiB", "KB" and "k" are accepted alike) and an optional
 * "B". "8G" is 8589934592. Fails with ZS_EINVAL on anything else, on zero
 * digits, and on overflow past 2^64-1.
 */
enum zs_status zs_parse_size(const char *s, uint64_t *out, struct zs_error *err);

/* Parses a decimal unsigned integer in [min, max]. */
enum zs_status zs_parse_u64(const char *s, uint64_t min, uint64_t max,
			    uint64_t *out, struct zs_error *err);

/*
 * Splits "HOST:PORT" (IPv4, a name, or "[v6]:PORT"). host receives at most
 * ZS_HOST_MAX-1 characters; the port must be 0..65535.
 */
enum zs_status zs_parse_hostport(const char *s, char host[ZS_HOST_MAX],
				 uint16_t *port, struct zs_error *err);

/*
 * The address a daemon tells others (what it registers, what Status says)
 * for one it listens on, bound ("HOST:PORT" as bound): adv NULL keeps bound,
 * which must then not be a wildcard (0.0.0.0, [::]); adv "HOST" keeps
 * bound's port; adv "HOST:PORT" replaces both (a port mapped by NAT or a
 * container runtime). With host_only, only adv's host is taken. what names
 * the address in errors ("control", "data-plane").
 */
enum zs_status zs_advertise_addr(const char *adv, const char *bound, bool host_only, char *out,
				 size_t len, const char *what, struct zs_error *err);

/* Milliseconds on a monotonic clock (for timeouts and leases). */
/* n bytes of the kernel's randomness (getrandom) into p; -1 (errno) when
 * it gives none. */
int zs_random_bytes(void *p, size_t n);
int64_t zs_now_ms(void);
/* Nanoseconds on the same clock (for timing operations). */
int64_t zs_now_ns(void);
/* This process's resident set now and at its peak (VmRSS, VmHWM), in
 * bytes; 0 where /proc cannot say. */
void zs_rss(uint64_t *now, uint64_t *peak);
/* Milliseconds since the Unix epoch (for records people read). */
int64_t zs_wall_ms(void);

/* The wall-clock time ms milliseconds from now: a pthread_cond_timedwait
 * deadline. */
struct timespec zs_deadline_in(int64_t ms);

/* Sleeps ms milliseconds (restarting on EINTR unless *stop becomes true). */
void zs_sleep_ms(int64_t ms, volatile const int *stop);

/* Writes s to path atomically (temp file, fsync, rename). */
enum zs_status zs_write_file_atomic(const char *path, const char *s,
				    struct zs_error *err);

/* Creates dir and its parents (mode 0755); an existing dir is fine. */
enum zs_status zs_mkdir_p(const char *dir, struct zs_error *err);
/* A daemon's data directory: made as zs_mkdir_p does, then its mode 0700
 * (its files hold job tokens and state: nobody else's to read). */
enum zs_status zs_private_dir(const char *dir, struct zs_error *err);

/*
 * Takes an exclusive lock on DIR/NAME (created, holding our pid) so that two
 * daemons never share a data dir. *fd keeps the lock until closed. Fails
 * with ZS_ESTATE naming the holder's pid when another process has it.
 */
enum zs_status zs_lock_dir(const char *dir, const char *name, int *fd,
			   struct zs_error *err);

/* snprintf that cuts silently: for messages, where a cut is acceptable. */
void zs_fmt(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Moves the first min(*n, max) of the *n elements (of size bytes each) at v
 * into out, the rest to the front; returns how many moved. */
uint32_t zs_take_front(void *v, uint32_t *n, size_t size, void *out, uint32_t max);

/* Formats bytes as "1.50 GiB" into buf (at least 16 bytes). */
const char *zs_fmt_bytes(uint64_t bytes, char *buf, size_t len);

#endif
