/*
 * fsm_check.h - the unit tests' walk of a state machine (base/fsm.h) and
 * their check that its table in the code is the one docs/DESIGN.md draws
 * (test_phase, test_unit).
 */
#ifndef ZS_TESTS_FSM_CHECK_H
#define ZS_TESTS_FSM_CHECK_H

#include <stdbool.h>

#include "base/fsm.h"

/*
 * Every (state, event) pair of m through go (the machine's own mover, on
 * a state of that value): a pair in the table moves it to the table's
 * target (true), any other is refused (false) and leaves it unchanged; no
 * pair is in the table twice; every state and event has a name.
 */
void fsm_check_pairs(const struct zs_fsm *m, bool (*go)(int *state, int ev));

/*
 * The markdown table between "<!-- NAME: begin" and "<!-- NAME: end" in
 * docs/DESIGN.md (read from the source tree's root): a header naming m's
 * events in order after one cell, then a row per state, in order, its name
 * and a cell per event: the target's name, or "·" (no transition). Fails
 * the test naming the first cell that differs.
 */
void fsm_check_design(const struct zs_fsm *m, const char *name);

/*
 * Fails unless every state is reached from start, and every state but
 * start reaches home by events other than those in skip (n_skip of them:
 * a reset, a restore) .
 */
void fsm_check_paths(const struct zs_fsm *m, int start, int home, const int *skip, int n_skip);

#endif
