/*
 * ibv.c - libibverbs, loaded when a process first opens an RDMA device
 * rather than linked: libzshard and the daemons start, and speak tcp and
 * shm, on a machine without rdma-core (a wheel installed with nothing but
 * Python), and where rdma-core is installed they use the machine's own
 * libibverbs with its providers. The functions rdma/ calls through the
 * table (verbs.h maps the ibv_ names onto it); the data path's verbs
 * (post, poll, notify) are the header's inline calls through the
 * context's ops and need nothing loaded.
 */
#include "rdma/verbs.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct rdma_ibv rdma_ibv;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_err[256];

/* the compat entry ___ibv_query_port falls back on (verbs.h) */
static int (*compat_query_port)(struct ibv_context *, uint8_t, void *);

/* ibv_query_port as the header's inline does it: the context's
 * extended op where the provider has it, else the old entry point */
static int query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	struct verbs_context *v = verbs_get_ctx_op(ctx, query_port);

	if (!v) {
		memset(attr, 0, sizeof *attr);
		return compat_query_port(ctx, port, attr);
	}
	return v->query_port(ctx, port, attr, sizeof *attr);
}

#define SYM(field, name) { (void **)&rdma_ibv.field, name }

static void load(void)
{
	const struct { void **at; const char *name; } syms[] = {
		SYM(get_device_list, "ibv_get_device_list"),
		SYM(free_device_list, "ibv_free_device_list"),
		SYM(get_device_name, "ibv_get_device_name"),
		SYM(open_device, "ibv_open_device"),
		SYM(close_device, "ibv_close_device"),
		SYM(query_device, "ibv_query_device"),
		SYM(query_gid, "ibv_query_gid"),
		SYM(alloc_pd, "ibv_alloc_pd"),
		SYM(dealloc_pd, "ibv_dealloc_pd"),
		SYM(reg_mr, "ibv_reg_mr"),
		SYM(dereg_mr, "ibv_dereg_mr"),
		SYM(create_comp_channel, "ibv_create_comp_channel"),
		SYM(destroy_comp_channel, "ibv_destroy_comp_channel"),
		SYM(create_cq, "ibv_create_cq"),
		SYM(destroy_cq, "ibv_destroy_cq"),
		SYM(get_cq_event, "ibv_get_cq_event"),
		SYM(ack_cq_events, "ibv_ack_cq_events"),
		SYM(create_qp, "ibv_create_qp"),
		SYM(modify_qp, "ibv_modify_qp"),
		SYM(destroy_qp, "ibv_destroy_qp"),
		SYM(wc_status_str, "ibv_wc_status_str"),
		SYM(port_state_str, "ibv_port_state_str"),
		{ (void **)&compat_query_port, "ibv_query_port" },
	};
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		snprintf(load_err, sizeof load_err,
			 "no libibverbs on this machine (install rdma-core's libibverbs1; dlopen: %s)",
			 dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].at = dlsym(h, syms[i].name);
		if (!*syms[i].at) {
			snprintf(load_err, sizeof load_err, "libibverbs.so.1 lacks %s", syms[i].name);
			memset(&rdma_ibv, 0, sizeof rdma_ibv);
			dlclose(h);
			return;
		}
	}
	rdma_ibv.query_port = query_port;
	rdma_ibv.loaded = true;
}

enum zs_status rdma_ibv_load(char *why, size_t wl)
{
	pthread_once(&once, load);
	if (rdma_ibv.loaded)
		return ZS_OK;
	snprintf(why, wl, "%s", load_err);
	return ZS_EUNAVAIL;
}
