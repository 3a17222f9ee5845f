/*
 * kernel.c - the simulator's clock, event queue (a binary heap), random
 * source (splitmix64) and trace (sim/kernel.h).
 */
#include "sim/kernel.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_init(struct sim *s, uint64_t seed, bool tracing, char *why, size_t why_n)
{
	*s = (struct sim){.rng = seed * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull,
			  .tracing = tracing, .why = why, .why_n = why_n};
}

void sim_fail(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	if (s->failed)
		return;
	s->failed = true;
	va_start(ap, fmt);
	vsnprintf(s->why, s->why_n, fmt, ap);
	va_end(ap);
	sim_log(s, "INVARIANT BROKEN: %s", s->why);
}

void sim_free(struct sim *s)
{
	free(s->heap);
	free(s->trace);
	*s = (struct sim){0};
}

static bool before(const struct sim_ev *x, const struct sim_ev *y)
{
	return x->at_us < y->at_us || (x->at_us == y->at_us && x->seq < y->seq);
}

void sim_at(struct sim *s, int64_t delay_us, struct sim_ev ev)
{
	size_t i;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->heap = realloc(s->heap, s->cap * sizeof *s->heap);
		if (!s->heap) {
			fprintf(stderr, "sim: out of memory for %zu events\n", s->cap);
			exit(2);
		}
	}
	ev.at_us = s->now_us + (delay_us > 0 ? delay_us : 0);
	ev.seq = s->seq++;
	for (i = s->n++; i && before(&ev, &s->heap[(i - 1) / 2]); i = (i - 1) / 2)
		s->heap[i] = s->heap[(i - 1) / 2];
	s->heap[i] = ev;
}

bool sim_next(struct sim *s, struct sim_ev *out)
{
	struct sim_ev last;
	size_t i = 0;

	if (!s->n)
		return false;
	*out = s->heap[0];
	last = s->heap[--s->n];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= s->n)
			break;
		if (c + 1 < s->n && before(&s->heap[c + 1], &s->heap[c]))
			c++;
		if (!before(&s->heap[c], &last))
			break;
		s->heap[i] = s->heap[c];
		i = c;
	}
	s->heap[i] = last;
	s->now_us = out->at_us;
	s->fired++;
	return true;
}

uint64_t sim_rand(struct sim *s)
{
	uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

uint64_t sim_below(struct sim *s, uint64_t n)
{
	return n ? sim_rand(s) % n : 0;
}

int64_t sim_range(struct sim *s, int64_t lo, int64_t hi)
{
	return hi <= lo ? lo : lo + (int64_t)sim_below(s, (uint64_t)(hi - lo + 1));
}

bool sim_chance(struct sim *s, double p)
{
	return (double)(sim_rand(s) >> 11) * 0x1.0p-53 < p;
}

void sim_log(struct sim *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!s->tracing)
		return;
	if (s->trace_cap - s->trace_len < 512) {
		s->trace_cap = s->trace_cap ? 2 * s->trace_cap : 1 << 16;
		s->trace = realloc(s->trace, s->trace_cap);
		if (!s->trace) {
			fprintf(stderr, "sim: out of memory for the trace\n");
			exit(2);
		}
	}
	n = snprintf(s->trace + s->trace_len, s->trace_cap - s->trace_len, "%9.3f  ",
		     (double)s->now_us / 1e6);
	s->trace_len += (size_t)n;
	va_start(ap, fmt);
	n = vsnprintf(s->trace + s->trace_len, s->trace_cap - s->trace_len - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > s->trace_cap - s->trace_len - 2)
		n = (int)(s->trace_cap - s->trace_len - 2);
	s->trace_len += (size_t)n;
	s->trace[s->trace_len++] = '\n';
	s->trace[s->trace_len] = 0;
}

int sim_end(struct sim *s, uint64_t *events)
{
	const int rc = s->failed;

	*events += s->fired;
	if (s->tracing && s->trace)
		fputs(s->trace, stdout);
	sim_free(s);
	return rc;
}
