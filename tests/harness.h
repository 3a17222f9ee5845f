/*
 * harness.h - helpers for integration tests: start the real binaries with
 * posix_spawn (never fork a process that has touched gRPC), wait for their
 * port files, run a CLI and capture its output, pick free ports.
 */
#ifndef ZS_HARNESS_H
#define ZS_HARNESS_H

#include <stdbool.h>
#include <sys/types.h>

/* $ZSHARD_BIN (default build/bin) joined with name, in a static buffer. */
const char *h_bin(const char *name);

/* A fresh temporary directory under $TMPDIR (removed by h_rmtree, which keeps
 * it and says so when ZSHARD_KEEP_TEST_DIRS is set). */
char *h_tmpdir(const char *tag);
void h_rmtree(const char *dir);

/* Spawns argv (NULL-terminated) with stdout and stderr appended to log. */
pid_t h_spawn(char *const argv[], const char *log);

/* Waits for a file to be non-empty (up to ms), reads its first line. */
bool h_wait_file(const char *path, int ms, char *out, size_t len);

/* Sends sig (0: none, just wait) and waits up to ms for exit; returns the
 * exit status (128 + signal if killed), or -1 after killing it at the bound. */
int h_stop(pid_t pid, int sig, int ms);
/* True while pid is running (reaps it if it exited). */
bool h_alive(pid_t pid);
/* Stops pid (SIGSTOP) and waits up to ms until every thread of it is
 * stopped (kill returns before they are); false at the bound, or when
 * pid is not there. */
bool h_pause(pid_t pid, int ms);

/*
 * Runs argv to completion (bounded by 60 s), capturing stdout and stderr
 * into malloc'd strings (free them). Returns the exit code, or -1.
 */
int h_run(char *const argv[], char **out, char **err);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int h_free_port(void);

/*
 * Starts one etcd member (Debian's etcd-server) on two free loopback
 * ports, its data under dir, its log in dir/etcd.log; its client endpoint
 * ("127.0.0.1:PORT") into ep. Returns its pid, 0 when etcd is not
 * installed (the caller skips, saying so), -1 when it could not start.
 * The caller waits for it to answer.
 */
pid_t h_start_etcd(const char *dir, char *ep, size_t len);

/* Polls fn(arg) every 50 ms for up to ms; true once it returns true. */
bool h_poll(bool (*fn)(void *), void *arg, int ms);

#endif
