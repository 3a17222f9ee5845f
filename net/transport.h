/*
 * transport.h - the data plane: how a trainer reads shard ranges from a
 * shard server and writes gradients into it. One ops table per transport
 * (tcp, shm; rdma and nccl later), chosen per connection from what the
 * server advertises. Callers go through the inline wrappers at the bottom,
 * never through ->ops directly.
 *
 * Client side (a trainer's connection to one server):
 *   - connect() says HELLO (job, rank, token) and returns a connection, or a
 *     clear error, within opts->timeout_ms.
 *   - post_read() / post_write() never block on the network: they queue the
 *     operation and return a request, or ZS_EAGAIN when opts->max_inflight
 *     requests are outstanding (back-pressure: test or wait one, retry).
 *   - A request completes exactly once: test() returns ZS_EAGAIN while it is
 *     in progress; any other return is its final status, after which the
 *     request is freed and must not be used again. wait() is test() with a
 *     bounded sleep; when its bound passes it returns ZS_EAGAIN too (the
 *     request is still alive), so ZS_ETIMEDOUT is only ever a final status;
 *     and ZS_EAGAIN never is: a server's "try again" answer completes its
 *     request as ZS_ESTATE (the wrong moment), with the server's message.
 *   - Buffers handed to post_*() belong to the transport until the request
 *     completes (the receive path writes straight into dst: no extra copy).
 *
 * Server side: net/listener.h.
 *
 * Choosing a transport for a server happens in one place,
 * zs_transport_choose() (net/transport.c), by what the server offers and
 * what each transport can do (caps, available()), never by name.
 */
#ifndef ZS_TRANSPORT_H
#define ZS_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "base/status.h"

struct zs_conn;
struct zs_req;
struct stream_hooks; /* net/stream.h */
struct zs_mr; /* a registered memory region */

/* What a transfer addresses: a range of a unit's flat buffer at a step. */
struct zs_xfer {
	uint32_t unit;
	uint64_t offset; /* elements from the unit's start */
	uint64_t length; /* elements */
	uint64_t step;
	enum zs_dtype dtype;
	bool partial; /* a gradient-accumulation push that is not the last */
	bool init;    /* a write of initial fp32 parameters (step 0) */
	int state;    /* reads: -1 (or 0 when zeroed and not state_read): the
		       * compute copy; with state_read, 0 master, 1 and 2 the
		       * optimizer's arrays, as fp32, at the shard's version;
		       * writes with init and state_read: optimizer array 1 or
		       * 2 before step 0 (an imported state) */
	bool state_read; /* ZS_WF_STATE: reads and init writes of state */
	uint64_t *version; /* state reads: receives the shard's version */
	bool over_budget;  /* server side, writes: land it even past the
			    * target's landing budget (the listener's call) */
	bool replica;      /* a write from a shard's primary to its replica
			    * (ZS_WF_REPLICA; rank ZS_RANK_PEER) */
	uint64_t epoch;    /* replica writes: the sender's placement epoch
			    * (in the frame's aux): a replica refuses another */
	bool seed;         /* a replica write of the shard's whole state:
			    * length is n_arrays x the shard's (ZS_WF_SEED);
			    * with partial: taken mid-step, after partial
			    * pushes of its step (the copy lacks their terms) */
	bool with_prev;    /* a seed followed by the step before's parameters
			    * (ZS_WF_PREV: one more array, as f32) */
	bool if_empty;     /* a seed sent again (ZS_WF_EMPTY): taken only by
			    * a copy with no state (engine/copies.h) */
	bool catchup;      /* a seed that is a promoted copy's catch-up
			    * (ZS_WF_CATCHUP): taken only by a copy behind
			    * its step (engine/copies.h) */
	uint32_t micro;    /* partial pushes: the rank's micro-batch index in
			    * the step (0, 1, ...), so that one sent again
			    * after a failover is not counted twice */
	uint32_t from;     /* a forwarded partial push: its trainer's rank */
	bool device;       /* a push from the trainer's device memory (ZS_WF_DEVICE) */
	bool redo;         /* a push of a lost rank's replacement, of the step
			    * it redoes (ZS_WF_REDO) */
	const void *dsrc;  /* server side, a device push: the range's bytes,
			    * mapped from the trainer's device (the listener's) */
	bool pinned;       /* a reader's read of the version it pinned at step
			    * (ZS_WF_PIN), in the unit's dtype */
	uint32_t *crc;     /* pinned reads, client side: receives the CRC32C
			    * the server took of the bytes it sent */
	uint32_t verb;     /* a PIN request: ZS_PIN_HOLD, _RELEASE, _QUERY */
	uint64_t timeline; /* pinned reads (in the GATHER's aux): the run of the
			    * pinned step as the readers' registry labels it
			    * (0: not said); a relay serves its own run's alone.
			    * A replica's seed (aux's high 32 bits): the job's
			    * timeline its state is of (engine/copies.h) */
};

/* What a PIN asks (net/wire.h's aux) */
enum { ZS_PIN_HOLD = 0, ZS_PIN_RELEASE = 1, ZS_PIN_QUERY = 2 };
/* A PIN's answer: the step pinned (released, or asked about), and the
 * lowest and highest version of the job's shards on that server. */
struct zs_pin_ans {
	uint64_t step, lo, hi;
	/* a HOLD's: the pin's run, 1 + the job's timeline as the server had it
	 * when the pin was taken (0: a server that does not say) */
	uint64_t timeline;
};

/* Where a device push's bytes are (gpu/dev.h's zs_dev_share, as the wire
 * carries it): the trainer's allocation's handle, its number for it, the
 * range's byte offset in it. */
struct zs_dev_src {
	unsigned char handle[64];
	uint64_t serial;
	uint64_t offset;
};

/* The rank an exporter says HELLO with: it may read, never push. */
#define ZS_RANK_OBSERVER 0xffffffffu
/* The rank a shard's primary says HELLO with to its replicas' server: it
 * writes only ZS_WF_REPLICA pushes. */
#define ZS_RANK_PEER 0xfffffffeu

struct zs_conn_opts {
	const char *addr;  /* tcp: HOST:PORT; shm: the server's socket name */
	const char *job;
	const char *token; /* "" if the job has none */
	uint64_t epoch;       /* the placement epoch the trainer holds: refused
			       * by a server that holds another one (not yet
			       * the new one, or a newer one); 0 accepts any */
	uint64_t incarnation; /* the job's (zs_job.incarnation): refused by a
			       * server still holding an earlier job of that
			       * name; 0 accepts any */
	uint32_t rank;
	/* the trainer's reconnect count now (client/lease.c): the server
	 * tells the coordinator which of its reconnects a connection that
	 * ended belonged to (engine/conns.h) */
	uint64_t reconnects;
	uint64_t session; /* the trainer process's (its join's), for the same notes */
	bool tls;    /* encrypt it (the job's data_tls; net/dtls.h): tcp alone,
		      * the other transports' bytes do not leave the host (shm)
		      * or are the fabric's to keep (rdma) */
	bool reader; /* token is the job's reader token (gathers alone) */
	int timeout_ms;        /* connect + HELLO */
	unsigned max_inflight; /* 0: 64 */
};

enum {
	ZS_CAP_ONE_SIDED = 1 << 0, /* data moves without the server's CPU */
	ZS_CAP_SAME_HOST = 1 << 1, /* only between processes of one host */
	ZS_CAP_REGISTER = 1 << 2,  /* buffers registered once (reg) move faster:
				    * register what is reused */
	ZS_CAP_LANES = 1 << 3,     /* requests and bulk data share one byte
				    * stream: a trainer's gathers take a
				    * connection of their own, so that a gather's
				    * request and data never wait behind a push */
};

struct zs_transport_ops {
	const char *name;
	uint32_t caps;
	uint32_t bit; /* its ZS_TRANSPORT_* bit in ServerInfo.transports */
	/* Whether this host can use it at all (a device, a limit): true, or
	 * false with a plain reason in why. NULL: always. May block briefly. */
	bool (*available)(char *why, size_t len);
	/* How its bytes move on the stream core every transport is built on
	 * (net/stream.h: the frames, the requests, the threads are the
	 * core's). NULL: not in this build (available says why). */
	const struct stream_hooks *hooks;
	/*
	 * Registers [buf, buf + len) for transfers on c, once, before posting
	 * operations on it (RDMA pins and keys it; tcp and shm need nothing and
	 * return a handle all the same). The region must outlive its use;
	 * deregister releases the handle (NULL is fine).
	 */
	enum zs_status (*reg)(struct zs_conn *c, void *buf, size_t len, struct zs_mr **mr,
			      struct zs_error *err);
	void (*dereg)(struct zs_mr *mr);
};

extern const struct zs_transport_ops zs_tcp_transport; /* net/tcp.c */
extern const struct zs_transport_ops zs_shm_transport; /* net/shm.c */
extern const struct zs_transport_ops zs_rdma_transport; /* rdma/ (rdma/none.c without verbs) */

/* ------------------------------------------------- choosing a transport */

/* What one server offers, as the coordinator lists it. */
struct zs_transport_offer {
	uint32_t bits;          /* ZS_TRANSPORT_* it serves */
	bool same_host;         /* it runs on this host */
	const char *addr;       /* its data address, HOST:PORT ("" if none) */
	const char *local_addr; /* its same-host address (shm's socket name) */
};
/* available() answers, kept across the servers of one join: zero it. */
struct zs_transport_probe {
	int avail[8];
};
/* ZS_OK when want is "auto" or a transport's name; ZS_EINVAL naming them. */
enum zs_status zs_transport_check_name(const char *want, struct zs_error *err);
/*
 * Picks the transport for a server: want names one, or is "auto": the
 * first of shm (same host), rdma (where this host can), tcp that the server
 * offers, leaving out the ZS_TRANSPORT_* bits in skip (those already tried:
 * under "auto" a connection that fails falls back to the next, as shm does
 * for a server in another network namespace of the same host). Sets *out
 * and *addr (the address to connect to, in o). ZS_EINVAL: an unknown name;
 * ZS_ESTATE: the server does not offer it, or nothing is left (err says
 * which, as "it offers no ..." for the caller to prefix).
 */
enum zs_status zs_transport_choose(const char *want, const struct zs_transport_offer *o,
				   struct zs_transport_probe *probe, uint32_t skip,
				   const struct zs_transport_ops **out, const char **addr,
				   struct zs_error *err);
/* Whether want leaves the choice to zs_transport_choose ("auto"). */
bool zs_transport_is_auto(const char *want);

/* The transport a connection was made with. */
const struct zs_transport_ops *zs_conn_transport(const struct zs_conn *c);
/* How c's bytes are encrypted (net/dtls.h's zs_dtls_mode), or NULL when
 * they are not. */
const char *zs_conn_encryption(const struct zs_conn *c);

/* Connects with transport t and completes HELLO; blocking, bounded by
 * o->timeout_ms. ZS_EAGAIN: the server does not hold the job (at o's
 * incarnation and epoch) yet: its next assignments bring it, retry;
 * ZS_EUNAVAIL: t is not in this build, or the server is not there. */
enum zs_status zs_connect(const struct zs_transport_ops *t, const struct zs_conn_opts *o,
			  struct zs_conn **c, struct zs_error *err);
/* Queues a read of x from the server into dst (x->length elements of
 * x->dtype). ZS_EAGAIN: too many in flight; ZS_EUNAVAIL: the connection
 * is broken (err says why). */
enum zs_status zs_post_read(struct zs_conn *c, const struct zs_xfer *x, void *dst,
			    struct zs_req **r, struct zs_error *err);
/* A reader's PIN (net/wire.h): holds (verb ZS_PIN_HOLD), releases or asks
 * about (ZS_PIN_QUERY, step ignored) the job's version at step on c's
 * server; *ans is filled when the request completes OK. */
enum zs_status zs_post_pin(struct zs_conn *c, uint64_t step, uint32_t verb,
			   struct zs_pin_ans *ans, struct zs_req **r, struct zs_error *err);
/* Queues a write of src into the server's staging slot for x. */
enum zs_status zs_post_write(struct zs_conn *c, const struct zs_xfer *x, const void *src,
			     struct zs_req **r, struct zs_error *err);
static inline enum zs_status zs_mem_register(struct zs_conn *c, void *buf, size_t len,
					     struct zs_mr **mr, struct zs_error *err)
{
	return zs_conn_transport(c)->reg(c, buf, len, mr, err);
}
static inline void zs_mem_deregister(struct zs_conn *c, struct zs_mr *mr)
{
	zs_conn_transport(c)->dereg(mr);
}
/* Closes c (NULL: nothing): requests still in flight fail with
 * ZS_ECANCELED and are freed, so the caller must not use them after.
 * Blocks until the connection's threads have exited. */
void zs_conn_close(struct zs_conn *c);
/* Breaks c as if its server had gone (every transport is built on the
 * stream core): its requests fail with ZS_EUNAVAIL once its receiver has
 * stopped, so nothing lands in their buffers after; c stays to be closed.
 * A trainer does this to a server its job's failover left behind. */
void zs_conn_shutdown(struct zs_conn *c);
/* Whether c is broken (its server closed it or went away; its requests
 * fail), with why when it is (NULL: not wanted). */
bool zs_conn_broken(struct zs_conn *c, char *why, size_t len);
/* Queues the optimizer's hyperparameters from step on (a HPARAMS frame:
 * payload of len bytes, model/hparams.h, copied), ordered before the
 * requests posted after it on c; completes like a push. Every transport
 * carries it inline. */
enum zs_status zs_post_hparams(struct zs_conn *c, uint64_t step, const void *payload,
			       size_t len, struct zs_req **out, struct zs_error *err);
/* Queues the job's world size by step (a WORLD frame, net/wire.h: payload
 * of len bytes, copied), ordered like zs_post_hparams. */
enum zs_status zs_post_world(struct zs_conn *c, const void *payload, size_t len,
			     struct zs_req **out, struct zs_error *err);
/* The identity (gpu/dev.h's zs_dev_ident) of the device c's server keeps
 * shards on, when it takes pushes from this host's device memory (shm to
 * a server with --gpu); 0 otherwise. */
uint32_t zs_conn_device(const struct zs_conn *c);
/* Queues a push of x whose bytes are in device memory src names, on the
 * server's own device (zs_conn_device says which): it takes them from
 * there; completes like a push. The memory must stay as it is until then. */
enum zs_status zs_post_write_device(struct zs_conn *c, const struct zs_xfer *x,
				    const struct zs_dev_src *src, struct zs_req **out,
				    struct zs_error *err);
/* test and wait are transport-independent (one request type). */
enum zs_status zs_req_test(struct zs_req *r, struct zs_error *err);
enum zs_status zs_req_wait(struct zs_req *r, int timeout_ms, struct zs_error *err);

#endif
