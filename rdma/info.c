/*
 * info.c - the queue-pair description both sides exchange over the tcp
 * control connection (see rdma.h), in its little-endian wire form. Built
 * with and without libibverbs: the tests check the format either way.
 */
#include "rdma/rdma.h"

#include <string.h>

#include "base/le.h"
void zs_rdma_info_pack(const struct zs_rdma_info *i, uint8_t out[ZS_RDMA_INFO])
{
	memset(out, 0, ZS_RDMA_INFO);
	zs_put32(out + 0, i->qpn);
	zs_put32(out + 4, i->psn);
	zs_put32(out + 8, i->rkey);
	zs_put16(out + 12, i->lid);
	out[14] = i->mtu;
	memcpy(out + 16, i->gid, 16);
	zs_put64(out + 32, i->addr);
	zs_put64(out + 40, i->len);
}

void zs_rdma_info_unpack(const uint8_t in[ZS_RDMA_INFO], struct zs_rdma_info *i)
{
	i->qpn = zs_get32(in + 0);
	i->psn = zs_get32(in + 4);
	i->rkey = zs_get32(in + 8);
	i->lid = zs_get16(in + 12);
	i->mtu = in[14];
	memcpy(i->gid, in + 16, 16);
	i->addr = zs_get64(in + 32);
	i->len = zs_get64(in + 40);
}
