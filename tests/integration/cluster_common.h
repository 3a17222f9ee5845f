/*
 * cluster_common.h - test_cluster's one cluster (a coordinator and NSERV
 * servers on 127.0.0.1, started by its group setup) and the helpers its
 * test files share.
 */
#ifndef ZS_TESTS_CLUSTER_COMMON_H
#define ZS_TESTS_CLUSTER_COMMON_H

#include <jansson.h>
#include <sys/types.h>

#define NSERV 3

struct cluster {
	char *dir;
	char addr[64];
	int port;
	pid_t coord;
	pid_t srv[NSERV];
	char srv_addr[NSERV][64];
};
extern struct cluster C;

/* A path in the cluster's directory (one of 8 rotating buffers). */
char *path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs zshardctl against the cluster with up to 4 arguments: its status,
 * with its stdout and stderr (malloc'd). */
int ctl(char **out, char **err, const char *a1, const char *a2, const char *a3, const char *a4);
/* zshardctl's stdout as JSON, NULL when it failed. */
json_t *ctl_json(const char *a1, const char *a2, const char *a3);

/* cluster_cli.c: zshardctl's usage errors and its commands that need no
 * cluster state (plan, rdma) */
void test_cli_errors(void **st);
void test_plan_and_rdma_check(void **st);

#endif
