/*
 * fuzz_rpc.c - libFuzzer target: every decoder of the control plane's
 * messages (ctrl/codec.h: requests the coordinator and servers take from
 * the network, replies the trainers and zshardctl take, and the
 * coordinator's catalog records). The input's first byte picks the
 * decoder, the rest is the message. What a decoder accepts is released
 * (leaks show under the fuzzer's leak check); jobs, specs, checkpoints and
 * server records it accepts must encode again and decode to the same bytes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/codec.h"

#define RT(enc, dec, T, rel, x)                                                         \
	do {                                                                             \
		struct zs_buf rb1, rb2;                                                    \
		T ry;                                                                     \
		if (enc(x, &rb1))                                                         \
			break; /* out of memory only */                                  \
		if (dec(rb1.data, rb1.len, &ry, NULL))                                      \
			__builtin_trap(); /* what was accepted must read back */         \
		if (!enc(&ry, &rb2)) {                                                     \
			if (rb1.len != rb2.len || memcmp(rb1.data, rb2.data, rb1.len))        \
				__builtin_trap(); /* and be stable from then on */       \
			zs_buf_release(&rb2);                                             \
		}                                                                        \
		rel(&ry);                                                                 \
		zs_buf_release(&rb1);                                                     \
	} while (0)

static void server_info_noop(struct zs_server_info *s) { (void)s; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1;
	size_t n = size ? size - 1 : 0;
	char name[ZS_JOB_NAME_MAX], text[512];
	uint64_t u64, u64b, u64c, *ids;
	uint32_t u32, u32b;
	double d;
	bool b1;

	if (!size)
		return 0;
	switch (data[0] % 39) {
	case 0: {
		struct zs_norm_report r;
		if (!zs_dec_norm_report(p, n, &r, NULL))
			free(r.norms);
		break;
	}
	case 1: zs_dec_norm_reply(p, n, &d, &u32, NULL); break;
	case 2: {
		struct zs_step_report r;
		struct zs_step_state s;
		bool b2;
		if (!zs_dec_report_step(p, n, name, &u32, &r, &b1, &s, &b2, NULL))
			free(s.data);
		break;
	}
	case 3: {
		struct zs_step_state s;
		bool b2;
		struct zs_step_answer an;
		if (!zs_dec_report_step_reply(p, n, &an, &s, &b2, NULL))
			free(s.data);
		break;
	}
	case 4: {
		struct zs_step_report *r;
		if (!zs_dec_step_reports(p, n, &r, &u32, NULL))
			free(r);
		break;
	}
	case 5: {
		struct zs_server_info s;
		if (!zs_dec_register(p, n, &s, NULL))
			RT(zs_enc_register, zs_dec_register, struct zs_server_info, server_info_noop, &s);
		break;
	}
	case 6: zs_dec_register_reply(p, n, &u64, &u32, NULL); break;
	case 7: zs_dec_heartbeat(p, n, &u64, text, sizeof text, NULL); break;
	case 8: zs_dec_server_id(p, n, &u64, NULL); break;
	case 9: {
		struct zs_hb_reply r;
		if (!zs_dec_heartbeat_reply(p, n, &r, NULL)) {
			struct zs_buf o;
			if (!zs_enc_heartbeat_reply(&r, &o))
				zs_buf_release(&o);
		}
		break;
	}
	case 10: {
		struct zs_assignment *a;
		if (!zs_dec_assignments(p, n, &u64, &a, &u32, NULL)) {
			for (uint32_t i = 0; i < u32; i++)
				zs_assignment_release(&a[i]);
			free(a);
		}
		break;
	}
	case 11: {
		struct zs_member m;
		zs_dec_member(p, n, &m, NULL);
		break;
	}
	case 12: {
		struct zs_server_info *s;
		if (!zs_dec_trainer_hb_reply(p, n, &u64, &s, &u32, NULL))
			free(s);
		break;
	}
	case 13: {
		struct zs_server_info *s;
		if (!zs_dec_servers(p, n, &s, &u32, NULL))
			free(s);
		break;
	}
	case 14: {
		char *json;
		if (!zs_dec_create_job_json(p, n, &json, NULL))
			free(json);
		break;
	}
	case 15: {
		struct zs_job_spec s;
		if (!zs_dec_create_job(p, n, &s, NULL)) {
			RT(zs_enc_create_job, zs_dec_create_job, struct zs_job_spec,
			   zs_job_spec_release, &s);
			zs_job_spec_release(&s);
		}
		break;
	}
	case 16: {
		struct zs_job j;
		if (!zs_dec_job(p, n, &j, NULL)) {
			RT(zs_enc_job, zs_dec_job, struct zs_job, zs_job_release, &j);
			zs_job_release(&j);
		}
		break;
	}
	case 17: {
		struct zs_job *j;
		if (!zs_dec_jobs(p, n, &j, &u32, NULL)) {
			for (uint32_t i = 0; i < u32; i++)
				zs_job_release(&j[i]);
			free(j);
		}
		break;
	}
	case 18: {
		uint8_t id[ZS_COMM_ID_BYTES];
		zs_dec_comm_id_req(p, n, name, &u64, &u32, id, &b1, NULL);
		break;
	}
	case 19: {
		uint8_t id[ZS_COMM_ID_BYTES];
		zs_dec_comm_id(p, n, id, NULL);
		break;
	}
	case 20: zs_dec_job_name(p, n, name, NULL); break;
	case 21: zs_dec_set_stage(p, n, name, &u32, NULL); break;
	case 22: {
		struct zs_join_req r;
		if (!zs_dec_join(p, n, &r, NULL))
			zs_layout_release(&r.layout);
		break;
	}
	case 23: {
		uint64_t tl;
		bool wt;
		zs_dec_leave(p, n, name, &u32, &u64, &b1, &u64b, &tl, &wt, &u64b, NULL);
		break;
	}
	case 24: {
		struct zs_server_info s;
		if (!zs_dec_server_info(p, n, &s, NULL))
			RT(zs_enc_server_info, zs_dec_server_info, struct zs_server_info,
			   server_info_noop, &s);
		break;
	}
	case 25: {
		struct zs_coord_status s;
		zs_dec_coord_status(p, n, &s, NULL);
		break;
	}
	case 26: {
		struct zs_server_status s;
		if (!zs_dec_server_status(p, n, &s, NULL))
			zs_server_status_release(&s);
		break;
	}
	case 27: {
		struct zs_checkpoint c;
		if (!zs_dec_checkpoint(p, n, &c, NULL)) {
			RT(zs_enc_checkpoint, zs_dec_checkpoint, struct zs_checkpoint,
			   zs_checkpoint_release, &c);
			zs_checkpoint_release(&c);
		}
		break;
	}
	case 28: {
		struct zs_checkpoint *c;
		if (!zs_dec_checkpoints(p, n, &c, &u32, NULL)) {
			for (uint32_t i = 0; i < u32; i++)
				zs_checkpoint_release(&c[i]);
			free(c);
		}
		break;
	}
	case 29: zs_dec_ckpt_req(p, n, true, name, &u64, NULL); break;
	case 30: zs_dec_ckpt_req(p, n, false, name, &u64, NULL); break;
	case 31: {
		struct zs_blob bl;
		if (!zs_dec_put_blob(p, n, name, &u64, &bl, NULL))
			free(bl.data);
		break;
	}
	case 32: {
		struct zs_task t;
		zs_dec_task(p, n, &t, NULL);
		break;
	}
	case 33: {
		struct zs_task *t;
		if (!zs_dec_tasks(p, n, &t, &u32, NULL))
			free(t);
		break;
	}
	case 34: {
		struct zs_task t;
		enum zs_status code;
		zs_dec_task_done(p, n, &u64, &t, &code, text, sizeof text, &u64c, NULL);
		break;
	}
	case 35:
		if (!zs_dec_rebalance(p, n, name, &ids, &u32b, NULL))
			free(ids);
		break;
	case 36: {
		struct zs_read_ckpt r;
		zs_dec_read_ckpt(p, n, &r, NULL);
		break;
	}
	case 37: {
		float out[64];
		zs_dec_read_ckpt_reply(p, n, &u64, out, n % 65, NULL);
		break;
	}
	case 38:
		zs_dec_resize(p, n, name, &u32, NULL);
		break;
	}
	return 0;
}
