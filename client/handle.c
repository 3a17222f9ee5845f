/*
 * handle.c - what every file of the trainer's handle uses: its error, the
 * clock, a server's connection, and the step driver's host buffers
 * (registered once where the transport wants it, pinned in device mode,
 * reused through a small cache). Calls nothing else of client/.
 */
#include "client/trainer.h"

#include "gpu/dev.h"

int tr_fail(zs_trainer *t, enum zs_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->err, sizeof t->err, fmt, ap);
	va_end(ap);
	return st;
}

double tr_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A buffer for the step driver: where registering pays (rdma), registered
 * once here (a failed registration leaves it unregistered: the transport
 * then registers it per transfer). */
void *tr_buf_alloc(zs_trainer *t, size_t n)
{
	void *p = t->drv.pin ? zs_dev_host_alloc(t->drv.pin, n ? n : 1) : malloc(n ? n : 1);
	struct zs_mr *mr;
	void *g;

	if (!p || !t->drv.reg_conn || zs_mem_register(t->drv.reg_conn, p, n ? n : 1, &mr, NULL))
		return p;
	g = realloc(t->drv.regs, (t->drv.n_regs + 1) * sizeof *t->drv.regs);
	if (!g) {
		t->drv.reg_ops->dereg(mr);
		return p;
	}
	t->drv.regs = g;
	t->drv.regs[t->drv.n_regs].p = p;
	t->drv.regs[t->drv.n_regs++].mr = mr;
	return p;
}

void tr_buf_free(zs_trainer *t, void *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < t->drv.n_regs; i++)
		if (t->drv.regs[i].p == p) {
			/* through the ops table: the connection may be closed by now */
			t->drv.reg_ops->dereg(t->drv.regs[i].mr);
			t->drv.regs[i] = t->drv.regs[--t->drv.n_regs];
			break;
		}
	if (t->drv.pin)
		zs_dev_host_free(t->drv.pin, p);
	else
		free(p);
}

struct zs_conn *tr_conn(zs_trainer *t, uint64_t server_id, bool gather)
{
	for (uint32_t i = 0; i < t->n_srv; i++)
		if (t->srv_id[i] == server_id)
			return gather && t->gconn[i] ? t->gconn[i] : t->conn[i];
	return NULL;
}

void *tr_stage_get(zs_trainer *t, size_t n)
{
	for (unsigned i = 0; i < t->drv.n_cache; i++)
		if (t->drv.cache[i].n == n) {
			void *p = t->drv.cache[i].p;
			t->drv.cache[i] = t->drv.cache[--t->drv.n_cache];
			return p;
		}
	return tr_buf_alloc(t, n);
}

/* The oldest goes when the cache is full. */
void tr_stage_put(zs_trainer *t, void *p, size_t n)
{
	if (!p)
		return;
	if (t->drv.n_cache == sizeof t->drv.cache / sizeof t->drv.cache[0]) {
		tr_buf_free(t, t->drv.cache[0].p);
		t->drv.cache[0] = t->drv.cache[--t->drv.n_cache];
	}
	t->drv.cache[t->drv.n_cache].p = p;
	t->drv.cache[t->drv.n_cache++].n = n;
}

void tr_cache_flush(zs_trainer *t)
{
	for (unsigned i = 0; i < t->drv.n_cache; i++)
		tr_buf_free(t, t->drv.cache[i].p);
	t->drv.n_cache = 0;
}

int tr_op_timeout(const zs_trainer *t)
{
	return t->drv.pol.op_timeout_ms > 0 ? t->drv.pol.op_timeout_ms : TR_OP_TIMEOUT_MS;
}
