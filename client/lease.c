/*
 * lease.c - a trainer's lease on its rank. A thread renews it every second
 * over a coordinator connection of its own (the trainer's calls are the
 * caller's thread's), so a trainer that computes for minutes keeps its
 * rank, and one that dies or stops loses it after the coordinator's
 * --trainer-lease-ms: the job then rolls back and the rank is free for the
 * process that replaces it. Each renewal also brings the job's timeline,
 * which tells the step driver at its next boundary that the job rolled back.
 */
#include "client/trainer.h"

#include "base/log.h"

#define LEASE_RENEW_MS 1000

/* Keeps the servers the coordinator marks down (it stops hearing from one
 * stopped or cut off within its lease; the renewal's reply lists them),
 * for the step driver's waits. */
static void note_down(zs_trainer *t, const struct zs_server_info *s, uint32_t n)
{
	pthread_mutex_lock(&t->down_mu);
	t->n_down = 0;
	for (uint32_t i = 0; i < n && t->n_down < 8; i++) {
		if (s[i].up)
			continue;
		t->down[t->n_down].id = s[i].id;
		t->down[t->n_down].silent_ms = s[i].last_seen_ms;
		snprintf(t->down[t->n_down].addr, sizeof t->down[0].addr, "%s", s[i].addr);
		t->n_down++;
	}
	pthread_mutex_unlock(&t->down_mu);
}

bool tr_server_down(zs_trainer *t, char *buf, size_t len)
{
	bool down = false;

	if (!t->lease_running)
		return false;
	pthread_mutex_lock(&t->down_mu);
	for (uint32_t i = 0; i < t->n_down && !down; i++)
		for (uint32_t k = 0; k < t->n_srv && !down; k++)
			if (t->srv_id[k] == t->down[i].id) {
				down = true;
				snprintf(buf, len,
					 "server %llu (%s) is down: the coordinator has not heard from it for %lld ms",
					 (unsigned long long)t->down[i].id, t->down[i].addr,
					 (long long)t->down[i].silent_ms);
			}
	pthread_mutex_unlock(&t->down_mu);
	return down;
}

static void *lease_main(void *arg)
{
	zs_trainer *t = arg;
	struct zs_coord_client *c = NULL;
	struct zs_error err = {0};
	int64_t last_note = 0;

	while (!atomic_load(&t->lease_stop)) {
		struct zs_server_info *down = NULL;
		uint32_t n_down = 0;
		uint64_t timeline = 0;
		enum zs_status st;
		if (!c && zs_coord_open(t->coord_addr, LEASE_RENEW_MS * 2, 0, &c, &err))
			c = NULL;
		st = c ? zs_coord_trainer_heartbeat(c, t->job.spec.name, t->rank, t->session,
						    &timeline, &down, &n_down, &err)
		       : err.code;
		if (st == ZS_OK) {
			atomic_store(&t->seen_timeline, timeline);
			note_down(t, down, n_down);
			free(down);
		} else if (st == ZS_ENOTFOUND) {
			atomic_store(&t->evicted, 1);
		} else if (zs_now_ms() - last_note > 10000) { /* the coordinator away */
			zs_debug("rank %u of job '%s': cannot renew its lease: %s", t->rank,
				 t->job.spec.name, err.msg);
			last_note = zs_now_ms();
		}
		zs_sleep_ms(LEASE_RENEW_MS, (volatile const int *)&t->lease_stop);
	}
	zs_coord_close(c);
	return NULL;
}

enum zs_status tr_lease_start(zs_trainer *t, struct zs_error *err)
{
	t->n_down = 0;
	atomic_store(&t->lease_stop, 0);
	atomic_store(&t->evicted, 0);
	atomic_store(&t->seen_timeline, t->timeline);
	if (pthread_create(&t->lease, NULL, lease_main, t))
		return zs_fail(err, ZS_ENOMEM, "cannot start the lease thread");
	t->lease_running = true;
	return ZS_OK;
}

void tr_lease_stop(zs_trainer *t)
{
	if (!t->lease_running)
		return;
	atomic_store(&t->lease_stop, 1);
	pthread_join(t->lease, NULL);
	t->lease_running = false;
}
