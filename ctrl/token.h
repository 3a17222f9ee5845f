/*
 * token.h - a job's reader token: derived from the job's data-plane token
 * (HMAC-SHA256 of a fixed label, keyed by it; 32 hex digits), handed by
 * the coordinator to a caller whose certificate says "reader" instead of
 * the token itself, and known to every server of the job (which derives
 * it from the token its assignment brings). A HELLO that proves it opens
 * a connection that may gather and nothing else: a reader can read the
 * parameters, not push, set a step's hyperparameters or its world size.
 * The token cannot be had back from it.
 */
#ifndef ZS_CTRL_TOKEN_H
#define ZS_CTRL_TOKEN_H

#include "model/model.h"

/* out: the reader token of token ("" for ""). */
void zs_reader_token(const char *token, char out[ZS_TOKEN_MAX]);

#endif
