/*
 * tcp.c - the tcp transport: the default, always built. Frames and their
 * payloads go over one persistent TCP connection per server (TCP_NODELAY,
 * 4 MiB socket buffers); payloads are written from and read into the
 * callers' buffers directly. Two-sided: the server's CPU serves each request.
 */
#include "net/stream.h"

static const struct stream_hooks tcp_hooks = {
	.inline_data = true,
};

static enum zs_status tcp_connect(const struct zs_conn_opts *o, struct zs_conn **out,
				  struct zs_error *err)
{
	return stream_connect(&zs_tcp_transport, &tcp_hooks, o, out, err);
}

const struct zs_transport_ops zs_tcp_transport = {
	.name = "tcp",
	.caps = 0,
	.bit = ZS_TRANSPORT_TCP,
	.connect = tcp_connect,
	.reg = stream_reg,
	.dereg = stream_dereg,
	.post_read = stream_post_read,
	.post_write = stream_post_write,
	.test = zs_req_test,
	.wait = zs_req_wait,
	.close = stream_close,
};
