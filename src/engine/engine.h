/*
 * engine.h: datatypes (constructor tree), canonical form and plans. Pure description: no
 * GPU, MPI or UCX calls. May call: src/util.
 */
#ifndef GDTE_ENGINE_H
#define GDTE_ENGINE_H

#include "gdte.h"
#include "layout.h"
#include "../util/util.h"

/* Make the execution layout of `count` elements of a committed type: the plan with the count
 * folded in. Never allocates (units point into the type's cached host plan). The caller must
 * hold a reference on the type while the layout is in use. */
gdte_status_t gdte_engine_layout(gdte_type_h type, int64_t count, gdte_layout_t *L_p);

/* Validate a handle given by a user: live, not freed by the user. */
gdte_status_t gdte_type_check(gdte_type_h type);

/* Size and bounds of a type, committed or not, without building anything (the MPI import
 * compares them with MPI's at every level; gdte_type_get_info would canonicalize). */
typedef struct gdte_bounds {
    int64_t size, lb, extent, true_lb, true_extent;
} gdte_bounds_t;
gdte_status_t gdte_type_bounds(gdte_type_h type, gdte_bounds_t *bounds_p);

/* References held by operations in flight. */
void gdte_type_retain(gdte_type_h type);
void gdte_type_release(gdte_type_h type);

/* A private slot per type for a backend (the device plan cache); `free_fn` runs when the type
 * is destroyed. Returns the old slot. */
void *gdte_type_backend_slot(gdte_type_h type);
void gdte_type_set_backend_slot(gdte_type_h type, void *slot, void (*free_fn)(void *));

/* Host plan: the units of one repetition (UNITS kind), for upload. */
gdte_status_t gdte_engine_units(gdte_type_h type, const gdte_unit_t **units_p, int64_t *nunits_p);
/* The same plan as runs (layout.h), uncut pieces that gdte_run_unit cuts into those units;
 * kept only where they are much smaller than the units (else GDTE_ERR_UNSUPPORTED). */
gdte_status_t gdte_engine_runs(gdte_type_h type, const gdte_run_t **runs_p, int64_t *nruns_p, int64_t *unit_size_p);

/* Unique id of a type object (never reused within a process), for caches keyed by type: the
 * value of the handle that names it, 0 for a dead handle. */
uint64_t gdte_type_uid(gdte_type_h type);

/* Engine-wide counters for tests/benchmarks. */
int64_t gdte_engine_live_types(void);
/* Type nodes walked by canonical forms since the process started: tests bound the work of an
 * operation with it (e.g. committing n dups of one type builds one form, in whatever order). */
int64_t gdte_engine_nodes_visited(void);

#endif
