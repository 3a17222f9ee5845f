/*
 * jobs.c - the engine's jobs found by name or by a connection's handle,
 * their references and their units' names. A job's last reference runs
 * the engine's release (e->job_release: engine.c's teardown, set when the
 * engine is made), as the kernel's kref_put runs its release: the files
 * that borrow a job need not know how it is torn down.
 */
#include "engine/jobs.h"

struct ejob *eng_job_by_name(struct engine *e, const char *name)
{
	struct ejob *j;

	pthread_mutex_lock(&e->mu);
	for (j = e->jobs; j && strcmp(j->name, name); j = j->next)
		;
	if (j)
		atomic_fetch_add(&j->refs, 1);
	pthread_mutex_unlock(&e->mu);
	return j;
}

void eng_job_unref(struct engine *e, struct ejob *j)
{
	if (atomic_fetch_sub(&j->refs, 1) == 1)
		e->job_release(e, j);
}

struct ejob *eng_job_by_handle(struct engine *e, uint32_t h, bool *stale)
{
	struct ejob *j;

	*stale = false;
	pthread_mutex_lock(&e->mu);
	for (j = e->jobs; j; j = j->next) {
		if (j->hdl.cur == h)
			break;
		for (unsigned i = 0; i < j->hdl.n_retired && i < 16 && !*stale; i++)
			*stale = j->hdl.retired[i] == h;
		if (*stale)
			break;
	}
	if (j)
		atomic_fetch_add(&j->refs, 1);
	pthread_mutex_unlock(&e->mu);
	return j;
}

/* The current job of handle h, or NULL after failing err: ZS_ERESUME for a
 * handle of an earlier timeline, ZS_ENOTFOUND for one that never was. */
struct ejob *eng_job_or_fail(struct engine *e, uint32_t h, struct zs_error *err)
{
	bool stale;
	struct ejob *j = eng_job_by_handle(e, h, &stale);

	if (j && stale) {
		zs_fail(err, ZS_ERESUME, ROLLED_BACK, j->name);
		eng_job_unref(e, j);
		return NULL;
	}
	if (!j)
		zs_fail(err, ZS_ENOTFOUND, "job handle %u is gone", h);
	return j;
}

const char *eng_unit_name(struct ejob *j, uint32_t u)
{
	return u < j->spec.layout.n_units ? j->spec.layout.units[u].name : "?";
}
