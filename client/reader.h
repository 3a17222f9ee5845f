/*
 * reader.h - a weight reader's state (include/zshard_reader.h), inside
 * client/: its job and connections (reader.c), its reads (reader_read.c),
 * its place in the job's relay tree (reader_tree.c) and its relay
 * (relay.c).
 */
#ifndef ZS_CLIENT_READER_H
#define ZS_CLIENT_READER_H

#include "include/zshard_reader.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"
#include "net/records.h"
#include "net/transport.h"

/* A tensor as a reader names it: its state_dict name, or UNIT.NAME where
 * two units have a tensor of one name. */
struct rtensor {
	char name[2 * ZS_NAME_MAX];
	uint32_t unit, tensor;
};

struct zs_reader {
	struct zs_job job;
	char coord[ZS_ADDR_MAX]; /* the coordinator, for a new placement */
	int timeout_ms;
	struct rsrv {
		uint64_t id;
		struct zs_conn *c; /* NULL: lost (a failover brings another) */
		bool tcp_only;     /* its copies were not in its arena: tcp */
	} *srv;
	uint32_t n_srv;
	bool have_pin;
	uint64_t pin; /* the version: a step, or ZS_VERSION_CKPT | a checkpoint's id */
	uint64_t pin_run; /* a live step's run as the servers stamped its pin (0: not said) */
	/* a checkpoint pinned: its record (where its shards' records are)
	 * and the servers' addresses when it was pinned */
	struct rd_ckpt {
		struct zs_checkpoint k;
		struct zs_server_info *srv;
		struct zs_rpc_client **rc; /* a channel to each, opened at its first read */
		uint32_t n_srv;
	} ck;
	struct rtensor *t;
	uint32_t n_t;
	char rtoken[ZS_TOKEN_MAX]; /* the reader token it proves */
	/* its place in the job's relay tree (reader_tree.c) */
	struct rd_tree {
		pthread_mutex_t mu; /* me, parent: the renewal thread's too */
		pthread_cond_t cv;
		struct zs_reader_info me;
		uint32_t fanout, lease_ms;
		uint64_t parent; /* 0: the servers */
		char parent_addr[ZS_ADDR_MAX];
		struct zs_conn *pc; /* to the parent (NULL: not connected) */
		uint64_t from_relay_rdma; /* of me.from_relay, over rdma */
		uint64_t from_servers_one_sided; /* of me.from_servers, from their arenas */
		struct relay *relay;
		pthread_t th;
		bool th_on, stop;
	} tr;
	char err[ZS_ERRMSG_MAX];
};

/* reader.c */
/* st's message into r->err ("" on success), and st. */
int rd_said(zs_reader *r, enum zs_status st, const struct zs_error *err);
/* The connection to server sid (NULL: none, or lost). */
struct zs_conn *rd_conn_of(zs_reader *r, uint64_t sid);
/* Server sid's copies were not all in its arena (ZS_ENOSPC): its
 * connection closed, the next over tcp (rd_refresh makes it). */
void rd_tcp_only(zs_reader *r, uint64_t sid);
/* Server sid is lost to this reader: its connection closed (what was in
 * flight on it dropped, its buffers the caller's again); the copies of its
 * shards on other servers stand in (they hold every pin), and a refresh
 * connects it again if it is up. */
void rd_lose(zs_reader *r, uint64_t sid);
/* The tensor name names: its listed name, UNIT.NAME or an alias. */
const struct rtensor *rd_find(const zs_reader *r, const char *name);
/* After a server was lost: the coordinator's placement now and
 * connections to its servers not connected yet. */
enum zs_status rd_refresh(zs_reader *r, struct zs_error *err);

/* The job rolled back (a restore retired the handle every connection to
 * its servers carried: ZS_ERESUME): the connections made again, to the
 * placement now; a live step pinned, which the restore dropped, let go. */
enum zs_status rd_rejoin(zs_reader *r, struct zs_error *err);
/* Releases step's live pins on every server (a version let go). */
void rd_release_step(zs_reader *r, uint64_t step);

/* reader_ckpt.c */
/* Tensor te of unit u of the pinned checkpoint into buf (the unit's
 * dtype), from its servers' records. */
enum zs_status rd_ckpt_read(zs_reader *r, uint32_t u, const struct zs_tensor *te, uint8_t *buf,
			    struct zs_error *err);
/* Frees a pinned checkpoint's state (its record, servers, channels). */
void rd_ckpt_free(struct rd_ckpt *c);

/* reader_tree.c */
/* Registers with the coordinator (its id) and starts renewing within the
 * lease. ZS_EPERM: the caller's certificate is not a reader's. */
enum zs_status rd_tree_start(zs_reader *r, struct zs_error *err);
/* Leaves the registry, stops renewing and relaying. */
void rd_tree_stop(zs_reader *r);
/* The version pinned now (or none): registered, and the parent it reads
 * it from (the connection to the old one closed). */
enum zs_status rd_tree_pinned(zs_reader *r, struct zs_error *err);
/* The parent did not serve: reported lost, and the next one asked for. */
enum zs_status rd_tree_lost(zs_reader *r, struct zs_error *err);
/* Tensor i of the pinned version from the parent into dst (len bytes),
 * checked against its CRC32C: ZS_OK; else the caller reads it from the
 * servers (ZS_ESTATE: no parent; ZS_ENOTFOUND: it holds another version;
 * ZS_ETIMEDOUT: it does not read it; ZS_EUNAVAIL, ZS_EIO, ZS_EPROTO: the
 * parent failed, the caller reports it lost). */
enum zs_status rd_tree_fetch(zs_reader *r, uint32_t i, void *dst, size_t len, uint32_t *crc,
			     struct zs_error *err);
/* Keeps tensor i (its unit's dtype) for the children, and counts bytes. */
void rd_tree_got(zs_reader *r, uint32_t i, const void *b, size_t len, uint32_t crc,
		 bool from_relay);

#endif
