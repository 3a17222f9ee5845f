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
_Static_assert(N_ALL <= sizeof ((struct zs_transport_probe *)0)->avail / sizeof(int),
	       "struct zs_transport_probe has room for every transport");

bool zs_transport_is_auto(const char *want) { return !strcmp(want, "auto"); }

enum zs_status zs_transport_check_name(const char *want, struct zs_error *err)
{
	char names[128] = "auto";
	size_t n = strlen(names);

	if (zs_transport_is_auto(want))
		return ZS_OK;
	for (size_t i = 0; i < N_ALL; i++) {
		if (!strcmp(want, all[i]->name))
			return ZS_OK;
		n += (size_t)snprintf(names + n, sizeof names - n, ", %s", all[i]->name);
	}
	return zs_fail(err, ZS_EINVAL, "transport '%s' is not one of %s", want, names);
}

static const char *addr_for(const struct zs_transport_ops *t, const struct zs_transport_offer *o)
{
	const char *a = (t->caps & ZS_CAP_SAME_HOST) ? o->local_addr : o->addr;
	return a && a[0] ? a : NULL;
}

/* Whether all[i] can work on this host, asked once per probe. */
static bool available(size_t i, struct zs_transport_probe *p)
{
	char why[256];

	if (!all[i]->available)
		return true;
	if (!p->avail[i])
		p->avail[i] = all[i]->available(why, sizeof why) ? 1 : -1;
	return p->avail[i] > 0;
}

enum zs_status zs_transport_choose(const char *want, const struct zs_transport_offer *o,
				   struct zs_transport_probe *probe, uint32_t skip,
				   const struct zs_transport_ops **out, const char **addr,
				   struct zs_error *err)
{
	bool any = zs_transport_is_auto(want);
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
			    !available(i, probe)))
			continue;
		*out = t;
		*addr = a;
		return ZS_OK;
	}
	return zs_fail(err, ZS_ESTATE, "it offers no transport this trainer can use");
}
