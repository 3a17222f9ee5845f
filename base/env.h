/*
 * env.h - every environment variable zshard's programs and its Python
 * package read, declared once with its default and what it does, and the
 * one hook for the tests' fault points ($ZSHARD_FAULT). The C code reads
 * them through zs_env (no getenv of a ZSHARD_ name elsewhere);
 * zshardctl env prints the list, and make check (tests/lib/check-env.sh)
 * holds the sources, the Python package and README's table to it.
 */
#ifndef ZS_BASE_ENV_H
#define ZS_BASE_ENV_H

#include <stdbool.h>

struct zs_env_var {
	const char *name;
	const char *deflt;   /* what holds when it is unset */
	const char *readers; /* which programs read it */
	const char *doc;
};

/* The list, ended by a NULL name. */
extern const struct zs_env_var zs_env_vars[];

/* $name, or NULL when unset or empty; name must be one of zs_env_vars
 * (a name that is not is a programming error: logged, and NULL). */
const char *zs_env(const char *name);
/* $name as an unsigned integer in [lo, hi], else def (unset, empty, not
 * a number, out of range). */
unsigned zs_env_uint(const char *name, unsigned def, unsigned lo, unsigned hi);

struct zs_fault_point {
	const char *name;
	const char *doc; /* where it acts and what it does */
};

/* The tests' fault points, ended by a NULL name. */
extern const struct zs_fault_point zs_fault_points[];

/* Whether $ZSHARD_FAULT names point (one of zs_fault_points; one that is
 * not is a programming error: logged, and false). */
bool zs_fault(const char *point);

#endif
