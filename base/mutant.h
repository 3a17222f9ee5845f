/*
 * mutant.h - planted protocol bugs, for the simulator to prove it finds
 * them (sim/, make sim-mutants). A core marks the places a mutation
 * changes with ZS_MUTANT(k); only a build with -DZS_MUTANTS (the
 * simulator's mutant build, never the daemons or libzshard) compiles them
 * in, and there zs_mutant, set from the command line, chooses at most one.
 * Elsewhere ZS_MUTANT(k) is the constant 0 and the compiler drops it.
 */
#ifndef ZS_BASE_MUTANT_H
#define ZS_BASE_MUTANT_H

enum zs_mutant_id {
	ZS_MUT_NONE,
	/* model/liveness.c: the coordinator's judgement of a trainer */
	ZS_MUT_BACK_IGNORED,      /* a server's "connected again" forgotten */
	ZS_MUT_RECONNECTING_GONE, /* a member mid-reconnect (odd count) taken for gone */
	ZS_MUT_OLDER_COUNT,       /* a late renewal's older reconnect count taken */
	ZS_MUT_RENEWAL_CLEARS_AT_ONCE, /* a dead process's late renewal clears its drop */
	ZS_MUT_UNHEARD_RECONNECT, /* a drop of a reconnect not heard of (a restart) taken */
	ZS_MUT_OTHER_PROCESS,     /* a note of an earlier process of the rank taken */
	/* engine/conns.c: a server's count of a rank's data connections */
	ZS_MUT_UNSENT_LOST,       /* a note the coordinator did not take is dropped */
	ZS_MUT_PAIR_CANCELLED,    /* a drop and a back waiting cancel out */
	ZS_MUT_DROP_UNLISTED,     /* a rank's last connection ends unsaid */
	ZS_MUT_OLDEST_COUNT,      /* a drop says the count of the connection that ended last */
	/* client/lease.c, client/conns.c, as sim/live_trainer.c renders them */
	ZS_MUT_ODD_NOT_AWAITED,   /* a reconnect closes though its odd count was not taken */
	/* engine/intake.c: a shard's open step, counted */
	ZS_MUT_REDO_COUNTED_TWICE, /* a replacement's push of a rank whose last push is in, counted */
	ZS_MUT_PARTIAL_EMPTIES_FULL, /* a replacement's micro-batch empties its rank's full slot */
	ZS_MUT_RESENT_COUNTED,    /* a push of a step applied here, sent again, counted */
	ZS_MUT_ABORT_KEEPS_SLOT,  /* a push that ends unlanded keeps its rank's slot */
	ZS_MUT_FORWARD_TWICE,     /* a copy takes a partial push forwarded again a second time */
	ZS_MUT_ACK_BEFORE_COPIES, /* a last push answered before its step is on every copy */
	ZS_MUT_LANDING_DECIDES,   /* a replacement's push in already, landing, decided by a LANDING slot */
	/* engine/copies.c: a replicated shard's copies */
	ZS_MUT_AHEAD_REFUSES,     /* a copy a step ahead refuses the promoted copy's last step */
	ZS_MUT_FRONTIER_AT_VERSION, /* durable answers go before the update is on every copy */
	ZS_MUT_PROMOTED_SENDS_NOTHING, /* a promoted copy does not send its last step again */
	ZS_MUT_OLDER_FORWARD_SETTLES, /* an older step's forward ending settles a newer one's wait */
	ZS_MUT_SEED_GAP_IGNORED,  /* a copy seeded mid-step counts that step's later micro-batches */
	ZS_MUT_SETTLED_AT_SEED,   /* a copy seeded mid-step reported whole at its seed */
	ZS_MUT_LANDING_NOT_HELD,  /* a promoted copy completes a step whose forward lands in it */
	ZS_MUT_SEEDED_SENDS_NOTHING, /* a promoted seeded copy sends its copies nothing */
	/* engine/kept.c: a shard's versions kept */
	ZS_MUT_SEED_WITHOUT_PREV, /* a seed leaves the step before's parameters behind */
	/* model/failover.c: the coordinator's placement */
	ZS_MUT_STALE_SEEDED,      /* a deposed primary's late "seeded" taken */
	ZS_MUT_DOWN_ROLLS_BACK,   /* a server marked down rolls its job back at once */
	/* model/redo.c: a lost trainer's step */
	ZS_MUT_PUSH_BEFORE_KNOWN, /* a step's push goes before the coordinator heard it begun */
	/* model/hptables.c: hyperparameter tables */
	ZS_MUT_SENDING_NOT_RESENT, /* the table being set at a failover not sent to the new server */
	/* model/commit.c: a checkpoint's commit and a job's way back */
	ZS_MUT_COMMIT_BEFORE_LAST, /* a checkpoint commits before its job's last server is durable */
	ZS_MUT_DURABLE_TWICE,     /* a server's second durable report of a snapshot counted */
	ZS_MUT_ANY_INCARNATION,   /* a rollback takes an earlier job's checkpoint of the name */
	ZS_MUT_BAD_NOT_FALLEN_BACK, /* a restore that finds its records bad ends there */
	/* model/normx.c: clipping's norm exchange at the coordinator */
	ZS_MUT_SETTLED_UNCHECKED, /* a step's total not checked against a settled server's */
	ZS_MUT_NORM_COUNTED_TWICE, /* a shard's norm sent again added again */
	ZS_MUT_KEPT_ANY_TIMELINE, /* a kept total of a rolled-back run answers this one's step */
	ZS_MUT_OLD_TIMELINE_COUNTED, /* a report of a rolled-back run, late, opens the step's collection */
	/* model/relaytree.c: the weight readers' relay tree */
	ZS_MUT_TREE_ANY_TIMELINE, /* a reader's parent pinned the step of another timeline */
	ZS_MUT_TREE_NON_RELAY,    /* a reader that relays nothing made a parent */
	ZS_MUT_PIN_UNSTAMPED,     /* (sim/readers.c) the servers say no run with a pin */
	/* coord/readers.c, as sim/readers.c renders it: the registry's ids */
	ZS_MUT_READER_IDS_RESTART, /* a restarted coordinator gives ids from 1 again */
	/* client/relay.c, as sim/readers.c renders it */
	ZS_MUT_RELAY_ANY_TIMELINE, /* a relay serves its step to a child of another run */
	/* model/boundary.c: a rank's step boundary mailbox */
	ZS_MUT_STALE_ANSWER,      /* an answer to a report given up on (or of a timeline left) taken */
	ZS_MUT_LATEST_NOT_HIGHEST, /* a stop set past the report that came last, not the highest */
	/* model/verdict.c: what a lost server means to a rank that waits */
	ZS_MUT_FAILOVER_RESUME_LOST, /* a failover that met a rollback says "unavailable" */
	ZS_MUT_GIVEN_UP_UNASKED,  /* a verdict given up on once, the next failure's status stands unasked */
	ZS_MUT_BACK_AWAITED,      /* a failover from a server that is back waits for a placement */
	ZS_MUT_SEED_OF_LOST_TAKEN, /* a seed sent before the copy was placed anew marks it seeded */
	ZS_MUT_PLACED_ANEW_KEPT,  /* a copy placed anew in epochs a primary skipped stays seeded */
	/* model/membership.c: the coordinator's judgement of a server */
	ZS_MUT_UNHEARD_NEVER_JUDGED, /* a server unheard since the coordinator's start never lost */
	/* coord/failover.c, as sim/losses_nodes.c renders it */
	ZS_MUT_DOWN_NOT_RETRIED,  /* a server down not failed over from when another comes up */
	/* model/resize.c: a job's world size changed at a step boundary */
	ZS_MUT_STOP_BEFORE_GROW,  /* a stop set before a grow's step its new ranks began */
	ZS_MUT_RESIZE_AT_THREE,   /* a resize named three past the latest report, as a stop */
	ZS_MUT_COUNT
};

#ifdef ZS_MUTANTS
extern int zs_mutant;
#define ZS_MUTANT(k) (zs_mutant == (k))
#else
#define ZS_MUTANT(k) 0
#endif

/* The mutant's name ("back-ignored"), NULL past the list. */
const char *zs_mutant_name(int k);

#endif
