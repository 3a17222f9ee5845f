/*
 * fuzz_etcd.c - libFuzzer target: the coordinator's decoding of etcd's
 * answers (ctrl/etcd_dec.h), which come off the network: the input's first
 * byte picks the answer (lease grant, lease renewal, one key's range, the
 * create transaction, a page of a prefix range, a fenced transaction), the
 * rest is its bytes. What is accepted is released (leaks show), a page's
 * keys are visited whole, and a next page's key is the last key plus 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctrl/etcd_dec.h"

static volatile uint8_t sink;

static enum zs_status visit(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl)
{
	uint8_t x = 0;
	(void)ctx;
	for (size_t i = 0; i < kl; i++) /* every byte said is there */
		x ^= k[i];
	for (size_t i = 0; i < vl; i++)
		x ^= v[i];
	sink = x;
	return ZS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1;
	size_t n = size ? size - 1 : 0;
	int64_t a = 0, b = 0;
	struct zs_buf v;
	bool won;

	if (!size)
		return 0;
	switch (data[0] % 6) {
	case 0: zs_etcd_dec_lease_grant(p, n, &a, &b, NULL); break;
	case 1: zs_etcd_dec_keepalive(p, n, &a, NULL); break;
	case 2:
		if (!zs_etcd_dec_get(p, n, &v, &a, NULL))
			zs_buf_release(&v);
		break;
	case 3: zs_etcd_dec_create(p, n, 7, &won, &a, NULL); break;
	case 4:
		if (!zs_etcd_dec_range_page(p, n, visit, NULL, &a, &v, NULL)) {
			if (v.len && v.data[v.len - 1] != 0)
				__builtin_trap(); /* the next page starts just past the last key */
			zs_buf_release(&v);
		}
		break;
	case 5: zs_etcd_dec_txn(p, n, NULL); break;
	}
	return 0;
}
