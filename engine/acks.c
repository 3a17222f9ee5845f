/*
 * acks.c - a replicated job's durable acknowledgements: a push that landed
 * on a shard's primary is acknowledged once its step is on every copy
 * (replica.c clears repl.wait then), so that whatever a lost primary had
 * not acknowledged is still the trainer's to send again.
 */
#include "engine/repl.h"

bool eng_ack_later(struct eshard *s, struct zs_sop *op, uint64_t step)
{
	if (s->repl.n_acks == s->repl.cap_acks) {
		size_t nc = s->repl.cap_acks ? s->repl.cap_acks * 2 : 8;
		struct eack *g = realloc(s->repl.acks, nc * sizeof *g);
		if (!g)
			return false;
		s->repl.acks = g;
		s->repl.cap_acks = nc;
	}
	s->repl.acks[s->repl.n_acks++] = (struct eack){op, step};
	return true;
}

void eng_acks_flush(struct eshard *s)
{
	uint64_t frontier = eng_acks_frontier(s->version, s->repl.wait);
	size_t keep = 0;

	for (size_t i = 0; i < s->repl.n_acks; i++)
		if (s->repl.acks[i].step < frontier)
			zs_sop_done(s->repl.acks[i].op);
		else
			s->repl.acks[keep++] = s->repl.acks[i];
	s->repl.n_acks = keep;
}

void eng_acks_fail(struct eshard *s, enum zs_status st, const char *why)
{
	for (size_t i = 0; i < s->repl.n_acks; i++)
		zs_sop_fail(s->repl.acks[i].op, st, "%s", why);
	s->repl.n_acks = 0;
}
