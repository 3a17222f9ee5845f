/*
 * rpc_int.h - what ctrl/rpc.c (the server side) and ctrl/rpc_client.c
 * share: gRPC's initialization, status mapping, byte buffers, message size
 * limits, the standby's leader metadata. Internal to ctrl/.
 */
#ifndef ZS_CTRL_RPC_INT_H
#define ZS_CTRL_RPC_INT_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

/* the trailing metadata key a standby names the leader under */
#define LEADER_MD "zshard-leader"

/* gRPC initialized once, its log lines through ours */
void rpc_init(void);
enum zs_status rpc_from_grpc(grpc_status_code c);
/* the message size limits every channel and server takes */
grpc_channel_args *rpc_msg_size_args(void);
grpc_byte_buffer *rpc_bb_from(const void *p, size_t len);
/* the buffer's bytes, malloc'd into *out; nonzero when it cannot */
int rpc_bb_to(grpc_byte_buffer *bb, uint8_t **out, size_t *len);

#endif
