/*
 * transport.c - the one place a transport is chosen for a server (see
 * transport.h): by what the server offers and what each transport can do,
 * in order of preference, never by comparing a server's host name or a
 * transport's name against special cases.
 */
#include "net/transport.h"

#include <stdio.h>
#include <string.h>

/* Every transport of this build, the one that moves bytes with the least
 * work first: a same-host mapping, then one-sided, then two-sided. */
static const struct zs_transport_ops *const all[] = {
	&zs_shm_transport,
	&zs_rdma_transport,
	&zs_tcp_transport,
};
#define N_ALL (sizeof all / sizeof all[0])

static const char *names(void)
{
	static char buf[128];
	size_t n = 0;

	if (!buf[0]) {
		n += (size_t)snprintf(buf, sizeof buf, "auto");
		for (size_t i = 0; i < N_ALL && n < sizeof buf; i++)
			n += (size_t)snprintf(buf + n, sizeof buf - n, ", %s", all[i]->name);
	}
	return buf;
}

enum zs_status zs_transport_check_name(const char *want, struct zs_error *err)
{
	if (!strcmp(want, "auto"))
		return ZS_OK;
	for (size_t i = 0; i < N_ALL; i++)
		if (!strcmp(want, all[i]->name))
			return ZS_OK;
	return zs_fail(err, ZS_EINVAL, "transport '%s' is not one of %s", want, names());
}

static const char *addr_for(const struct zs_transport_ops *t, const struct zs_transport_offer *o)
{
	const char *a = (t->caps & ZS_CAP_SAME_HOST) ? o->local_addr : o->addr;
	return a && a[0] ? a : NULL;
}

static bool available(const struct zs_transport_ops *t, struct zs_transport_probe *p)
{
	size_t i = 0;

	if (!t->available)
		return true;
	while (i < N_ALL && all[i] != t)
		i++;
	if (p && i < N_ALL && p->avail[i])
		return p->avail[i] > 0;
	{
		char why[256];
		bool ok = t->available(why, sizeof why);
		if (p && i < N_ALL)
			p->avail[i] = ok ? 1 : -1;
		return ok;
	}
}

enum zs_status zs_transport_choose(const char *want, const struct zs_transport_offer *o,
				   struct zs_transport_probe *probe, uint32_t skip,
				   const struct zs_transport_ops **out, const char **addr,
				   struct zs_error *err)
{
	bool any = !strcmp(want, "auto");
	enum zs_status st = zs_transport_check_name(want, err);

	if (st)
		return st;
	for (size_t i = 0; i < N_ALL; i++) {
		const struct zs_transport_ops *t = all[i];
		const char *a = addr_for(t, o);
		if ((!any && strcmp(want, t->name)) || (t->bit & skip))
			continue;
		if (!(o->bits & t->bit) || !a) {
			if (any)
				continue;
			return zs_fail(err, ZS_ESTATE, "it offers no %s%s", t->name,
				       t->available ? " (zshardctl status --server ADDR says why)"
						    : "");
		}
		/* asked for by name, a transport is tried even where it says it
		 * cannot work, so that its own error reaches the caller */
		if (any && (((t->caps & ZS_CAP_SAME_HOST) && !o->same_host) ||
			    !available(t, probe)))
			continue;
		*out = t;
		*addr = a;
		return ZS_OK;
	}
	return zs_fail(err, ZS_ESTATE, "it offers no transport this trainer can use");
}

bool zs_transport_is_auto(const char *want) { return !strcmp(want, "auto"); }
