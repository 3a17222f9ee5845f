/*
 * seeds.c - writes the binary seed corpora of the fuzz targets into DIR
 * (make fuzz runs it; the text seeds, job specs, are in tests/fuzz/corpus/):
 *   DIR/wire/   whole trainer connections: HELLO, GATHER, PUSH, HPARAMS, WORLD
 *   DIR/rpc/    one valid message per main decoder (first byte: which)
 *   DIR/safetensors/  files from the writer zshardctl export uses
 *   DIR/etcd/   etcd's answers as etcd sends them (first byte: which)
 * The seeds are made by zshard's own encoders, so they follow the format
 * as it is today.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/codec.h"
#include "gen/etcd.pb-c.h"
#include "model/hparams.h"
#include "model/placement.h"
#include "net/wire.h"
#include "storage/safetensors.h"
#include "tests/unit/fixtures.h"

static const char *dir;

static void put(const char *sub, const char *name, const void *p, size_t n)
{
	char path[1024];
	FILE *f;
	snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
	if (!(f = fopen(path, "wb")) || fwrite(p, 1, n, f) != n || fclose(f)) {
		fprintf(stderr, "seeds: cannot write %s\n", path);
		exit(1);
	}
}

/* one RPC seed: the selector byte fuzz_rpc.c reads, then the message */
static void rpc(int which, enum zs_status st, struct zs_buf *b)
{
	char name[32];
	uint8_t *m;
	if (st)
		exit(1);
	m = malloc(b->len + 1);
	m[0] = (uint8_t)which;
	memcpy(m + 1, b->data, b->len);
	snprintf(name, sizeof name, "msg%02d", which);
	put("rpc", name, m, b->len + 1);
	free(m);
	zs_buf_release(b);
}

static size_t frame(uint8_t *out, struct zs_frame f, const void *payload)
{
	zs_wire_encode(&f, out);
	if (f.payload_len)
		memcpy(out + ZS_WIRE_HDR, payload, f.payload_len);
	return ZS_WIRE_HDR + f.payload_len;
}

static void wire(void)
{
	static uint8_t s[8192];
	float g[16] = {1, 2, 3};
	struct zs_hp_table hp = {.step = 1, .n_groups = 1, .g = {{.lr = 1e-3, .beta1 = 0.9,
								   .beta2 = 0.999, .eps = 1e-8}}};
	uint8_t hpb[ZS_HP_BYTES(1)];
	size_t n = 1;

	s[0] = 1; /* recompute CRCs */
	/* the job's name and a proof (the fuzz target checks none) */
	n += frame(s + n, (struct zs_frame){.op = ZS_OP_HELLO, .req_id = 1, .rank = 1,
					    .payload_len = 3 + 32},
		   "fz\0proof-proof-proof-proof-proof-pr");
	n += frame(s + n, (struct zs_frame){.op = ZS_OP_GATHER, .req_id = 2, .job = 1,
					    .length = 16, .dtype = ZS_F32}, NULL);
	put("wire", "hello-gather", s, n);
	n += frame(s + n, (struct zs_frame){.op = ZS_OP_PUSH, .req_id = 3, .job = 1, .length = 16,
					    .dtype = ZS_F32, .payload_len = sizeof g}, g);
	put("wire", "hello-gather-push", s, n);
	n += frame(s + n, (struct zs_frame){.op = ZS_OP_HPARAMS, .req_id = 4, .job = 1, .step = 1,
					    .payload_len = zs_hp_encode(&hp, hpb)}, hpb);
	n += frame(s + n, (struct zs_frame){.op = ZS_OP_PUSH, .req_id = 5, .job = 1, .length = 8,
					    .offset = 8, .dtype = ZS_BF16, .flags = ZS_WF_PARTIAL,
					    .payload_len = 16}, g);
	n += frame(s + n, (struct zs_frame){.op = ZS_OP_GATHER, .req_id = 6, .job = 1, .length = 4,
					    .dtype = ZS_F32, .flags = ZS_WF_STATE, .aux = 1}, NULL);
	put("wire", "session", s, n);
	{
		struct zs_worlds w = {2, {{4, 3}, {9, 2}}};
		uint8_t wb[ZS_WORLDS_BYTES(ZS_WORLD_HIST)];
		n += frame(s + n, (struct zs_frame){.op = ZS_OP_WORLD, .req_id = 7, .job = 1,
						    .payload_len = zs_worlds_encode(&w, wb)}, wb);
		put("wire", "session-world", s, n);
	}
}

static void rpcs(void)
{
	struct zs_job_spec spec;
	struct zs_job job = {0};
	struct zs_server_info si = {.id = 7, .capacity = 1 << 30, .transports = 3, .up = true};
	struct zs_checkpoint ck = {.id = 3, .step = 10, .state = ZS_CKPT_COMMITTED, .bytes = 99};
	struct zs_join_req jr = {.rank = 1, .session = 5};
	struct zs_step_report sr = {.rank = 1, .step = 4, .seconds = 0.5};
	struct place_server ps[2] = {{1, 1ull << 40, NULL, "a"}, {2, 1ull << 40, NULL, "b"}};
	struct zs_buf b;

	fixture_spec(&spec, "seed");
	if (zs_job_spec_normalize(&spec, NULL))
		exit(1);
	job.spec = spec;
	if (place_job(&spec, ps, 2, NULL, &job.placement, NULL))
		exit(1);
	snprintf(si.addr, sizeof si.addr, "127.0.0.1:7401");
	snprintf(si.data_addr, sizeof si.data_addr, "127.0.0.1:7402");
	snprintf(si.host, sizeof si.host, "h");
	snprintf(ck.job, sizeof ck.job, "seed");
	ck.placement = job.placement;
	snprintf(jr.job, sizeof jr.job, "seed");
	jr.layout = spec.layout;
	rpc(2, zs_enc_report_step("seed", 1, &sr,
				  &(struct zs_step_state){.step = 4, .len = 2, .data = (uint8_t *)"st",
							  .timeline = 1},
				  &b),
	    &b);
	rpc(5, zs_enc_register(&si, &b), &b);
	rpc(7, zs_enc_heartbeat(7, "disk full", &b), &b);
	rpc(13, zs_enc_servers(&si, 1, &b), &b);
	rpc(15, zs_enc_create_job(&spec, &b), &b);
	rpc(16, zs_enc_job(&job, &b), &b);
	rpc(17, zs_enc_jobs(&job, 1, &b), &b);
	rpc(20, zs_enc_job_name("seed", &b), &b);
	rpc(21, zs_enc_set_stage("seed", 3, &b), &b);
	rpc(38, zs_enc_resize("seed", 3, &b), &b);
	{
		struct zs_step_answer an = {.stage = 3, .checkpoint_every = 5, .stop_before = 0,
					    .worlds = {2, {{4, 3}, {9, 2}}}};
		rpc(3, zs_enc_report_step_reply(&an, NULL, &b), &b);
	}
	rpc(22, zs_enc_join(&jr, &b), &b);
	rpc(23, zs_enc_leave("seed", 1, 5, false, 9, NULL, &b), &b);
	rpc(24, zs_enc_server_info(&si, &b), &b);
	rpc(27, zs_enc_checkpoint(&ck, &b), &b);
	rpc(28, zs_enc_checkpoints(&ck, 1, &b), &b);
	rpc(29, zs_enc_ckpt_req("seed", 10, true, &b), &b);
	rpc(31, zs_enc_put_blob("seed", 3, 1, "blob", 4, &b), &b);
	zs_job_release(&job);
}

static void safetensors(void)
{
	float a[6] = {1, 2, 3, 4, 5, 6};
	uint16_t h[4] = {0x3f80, 0x4000, 0, 0x8000};
	struct st_tensor t[2] = {{.name = "unit.w", .dtype = ZS_F32, .ndim = 2, .shape = {2, 3},
				  .data = a, .bytes = sizeof a},
				 {.name = "unit.b", .dtype = ZS_BF16, .ndim = 1, .shape = {4},
				  .data = h, .bytes = sizeof h}};
	const char *meta[] = {"zshard.step", "12", "format", "pt"};
	char path[1024];

	snprintf(path, sizeof path, "%s/safetensors/two", dir);
	if (st_write(path, t, 2, meta, 2, NULL, NULL))
		exit(1);
	snprintf(path, sizeof path, "%s/safetensors/one", dir);
	if (st_write(path, t, 1, NULL, 0, NULL, NULL))
		exit(1);
}

/* one etcd answer: the selector byte fuzz_etcd.c reads, then the message */
static void etcd1(int which, const char *name, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *b = malloc(n + 1);
	if (!b)
		exit(1);
	b[0] = (uint8_t)which;
	protobuf_c_message_pack(m, b + 1);
	put("etcd", name, b, n + 1);
	free(b);
}

static void etcd(void)
{
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	Etcdserverpb__LeaseGrantResponse g = ETCDSERVERPB__LEASE_GRANT_RESPONSE__INIT;
	Etcdserverpb__LeaseKeepAliveResponse k = ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
	Etcdserverpb__KeyValue kv[2] = {ETCDSERVERPB__KEY_VALUE__INIT, ETCDSERVERPB__KEY_VALUE__INIT};
	Etcdserverpb__KeyValue *kvs[2] = {&kv[0], &kv[1]};
	Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
	Etcdserverpb__ResponseOp op = ETCDSERVERPB__RESPONSE_OP__INIT, *ops[1] = {&op};
	Etcdserverpb__TxnResponse t = ETCDSERVERPB__TXN_RESPONSE__INIT;

	h.revision = 42;
	g.header = &h;
	g.id = 7;
	g.ttl = 5;
	etcd1(0, "lease-grant", &g.base);
	k.header = &h;
	k.id = 7;
	k.ttl = 5;
	etcd1(1, "keepalive", &k.base);
	kv[0].key = (ProtobufCBinaryData){4, (uint8_t *)"/z/a"};
	kv[0].value = (ProtobufCBinaryData){3, (uint8_t *)"one"};
	kv[0].create_revision = 40;
	kv[0].lease = 7;
	kv[1].key = (ProtobufCBinaryData){4, (uint8_t *)"/z/b"};
	kv[1].value = (ProtobufCBinaryData){3, (uint8_t *)"two"};
	kv[1].create_revision = 41;
	r.header = &h;
	r.n_kvs = 1;
	r.kvs = kvs;
	r.count = 1;
	etcd1(2, "get", &r.base);
	op.response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
	op.response_range = &r;
	t.header = &h;
	t.succeeded = 1;
	t.n_responses = 1;
	t.responses = ops;
	etcd1(3, "create", &t.base);
	r.n_kvs = 2;
	r.count = 3;
	r.more = 1;
	etcd1(4, "range-page", &r.base);
	t.n_responses = 0;
	etcd1(5, "txn", &t.base);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: seeds DIR (with DIR/wire, DIR/rpc, DIR/safetensors)\n");
		return 2;
	}
	dir = argv[1];
	wire();
	rpcs();
	safetensors();
	etcd();
	return 0;
}
