/*
 * listener_path.c - the listener's side of a one-sided data path (rdma):
 * its control frames, and the notifications that a push has landed, handed
 * to a few workers so that the reductions they start run in parallel, as
 * tcp connections' do (see listener.h, struct zs_listener_path).
 */
#include "net/listener_int.h"

#include <stdlib.h>

#include "base/log.h"
#include "net/sockio.h"

/* A path's notification (the push's request id) arrived with its last
 * piece; the bytes are in the slot. Called with a reference held. */
static void note_handle(struct zs_lconn *c, uint32_t id)
{
	struct zs_frame f = {.op = ZS_OP_PUSH};
	struct slot sl = {0};
	bool found = false;

	pthread_mutex_lock(&c->sl.mu);
	for (size_t i = 0; i < c->sl.n && !found; i++)
		if ((uint32_t)c->sl.v[i].req_id == id) {
			sl = c->sl.v[i];
			c->sl.v[i] = c->sl.v[--c->sl.n];
			found = true;
		}
	pthread_mutex_unlock(&c->sl.mu);
	if (!found) {
		zs_warn("data plane: a %s notification for request %u, which has no slot",
			c->l->path->name, id);
	} else {
		struct zs_sop *op;
		f.req_id = sl.req_id;
		op = lsn_new_sop(c, &f, &sl.x, sl.t0);
		if (op)
			c->l->t.write_done(c->l->t.ctx, op, c->job, c->rank, &sl.x, sl.dst);
		else
			c->l->t.write_abort(c->l->t.ctx, c->job, c->rank, &sl.x, sl.dst);
	}
	lsn_conn_unref(c);
}

void zs_lconn_hold(struct zs_lconn *c) { atomic_fetch_add(&c->refs, 1); }

/* From the path's thread: queued for a worker (the reference goes with
 * it). Handled at once if no queue entry can be made. */
void zs_lconn_landed(struct zs_lconn *c, uint32_t id)
{
	struct zs_listener *l = c->l;
	struct note *n = malloc(sizeof *n);

	if (!n) {
		note_handle(c, id);
		return;
	}
	*n = (struct note){c, id, NULL};
	pthread_mutex_lock(&l->nt.mu);
	if (l->nt.tail)
		l->nt.tail->next = n;
	else
		l->nt.head = n;
	l->nt.tail = n;
	pthread_cond_signal(&l->nt.cv);
	pthread_mutex_unlock(&l->nt.mu);
}

static void *note_main(void *arg)
{
	struct zs_listener *l = arg;

	pthread_mutex_lock(&l->nt.mu);
	for (;;) {
		struct note *n;
		while (!l->nt.head && !l->nt.stop)
			pthread_cond_wait(&l->nt.cv, &l->nt.mu);
		if (!l->nt.head)
			break; /* stopping, and nothing left */
		n = l->nt.head;
		l->nt.head = n->next;
		if (!l->nt.head)
			l->nt.tail = NULL;
		pthread_mutex_unlock(&l->nt.mu);
		note_handle(n->c, n->id);
		free(n);
		pthread_mutex_lock(&l->nt.mu);
	}
	pthread_mutex_unlock(&l->nt.mu);
	return NULL;
}

/* A control frame of the one-sided path (an rdma queue pair, again after
 * a failure): the path's answer in reply. */
int lsn_on_control(struct zs_lconn *c, const struct zs_frame *f)
{
	struct zs_listener *l = c->l;
	struct zs_frame r = {.op = f->op, .req_id = f->req_id, .job = c->job};
	uint8_t in[ZS_PATH_CTL_MAX], out[ZS_PATH_CTL_MAX];
	size_t out_len = 0;
	struct zs_error err = {0};

	if (!c->pth.on || f->payload_len > sizeof in) {
		lsn_send_error(c, f->req_id, ZS_EPROTO, "a control frame is for one-sided peers");
		return -1;
	}
	if (zs_io_read(&c->io, in, f->payload_len))
		return -1;
	if (l->path->control(l->pctx, c, &c->pth.state, in, f->payload_len, out, &out_len, &err)) {
		lsn_send_error(c, f->req_id, err.code, err.msg);
		return -1;
	}
	return lsn_send_frame(c, &r, out, out_len, -1);
}

enum zs_status lsn_start_workers(struct zs_listener *l, struct zs_error *err)
{
	for (; l->nt.n_th < LANDED_WORKERS; l->nt.n_th++)
		if (pthread_create(&l->nt.th[l->nt.n_th], NULL, note_main, l))
			break;
	if (!l->nt.n_th)
		return zs_fail(err, ZS_ENOMEM, "cannot start the %s notification workers",
			       l->path->name);
	return ZS_OK;
}

/* The notification workers finish what was notified, then stop. */
void lsn_stop_workers(struct zs_listener *l)
{
	pthread_mutex_lock(&l->nt.mu);
	l->nt.stop = true;
	pthread_cond_broadcast(&l->nt.cv);
	pthread_mutex_unlock(&l->nt.mu);
	for (int i = 0; i < l->nt.n_th; i++)
		pthread_join(l->nt.th[i], NULL);
	l->nt.n_th = 0;
}
