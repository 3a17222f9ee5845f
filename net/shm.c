/*
 * shm.c - the shared-memory transport, for a trainer on its server's host.
 * HELLO over an abstract Unix socket hands the trainer the server's arena
 * (a memfd) by SCM_RIGHTS; a gather is a notification answered with the
 * range's place in the arena, which the trainer copies from; a push asks
 * for a staging slot, copies into it and notifies. Only the small frames
 * cross the socket.
 */
#include "net/stream.h"

static enum zs_status shm_connect(const struct zs_conn_opts *o, struct zs_conn **out,
				  struct zs_error *err)
{
	return stream_connect(&zs_shm_transport, STREAM_SHM, o, out, err);
}

const struct zs_transport_ops zs_shm_transport = {
	.name = "shm",
	.caps = ZS_CAP_SAME_HOST,
	.bit = ZS_TRANSPORT_SHM,
	.connect = shm_connect,
	.reg = stream_reg,
	.dereg = stream_dereg,
	.post_read = stream_post_read,
	.post_write = stream_post_write,
	.test = zs_req_test,
	.wait = zs_req_wait,
	.close = stream_close,
};
