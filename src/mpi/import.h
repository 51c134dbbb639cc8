/*
 * import.h: MPI datatypes into gdte types. The MPI-facing side of the engine: the engine
 * itself never sees an MPI header; this module walks MPI_Type_get_envelope/get_contents and
 * calls gdte's constructors. May call: MPI, include/gdte.h, src/engine (references),
 * src/util.
 */
#ifndef GDTE_MPI_IMPORT_H
#define GDTE_MPI_IMPORT_H

#include <mpi.h>
#include <stdint.h>
#include "gdte.h"

/*
 * The committed gdte type with the same type map, size, lb, extent and true bounds as the
 * MPI datatype @p dt (any combiner, nested to any depth; @p dt need not be committed).
 *
 * The handle is borrowed: the import cache owns it and releases it when MPI destroys @p dt
 * (the attribute delete callback; Open MPI runs it once MPI_Type_free has been called on
 * @p dt and on every type built over it); predefined types live until MPI_Finalize. Never
 * gdte_type_free() it; an operation that may outlive the caller's use of @p dt takes its own
 * reference (gdte_type_retain, src/engine/engine.h).
 *
 * Bounds are MPI's: where the gdte constructors (which follow the MPI standard) and the MPI
 * in use disagree on lb or extent, the result is wrapped in a resized type with MPI's values,
 * so packing with it gives exactly MPI_Pack's bytes. Sizes or true bounds that disagree are
 * GDTE_ERR_INTERNAL (logged). MPI must be initialized. Thread safe.
 */
gdte_status_t gdte_mpi_type_import(MPI_Datatype dt, gdte_type_h *type_p);

/*
 * gdte_mpi_type_import for a datatype the MPI itself will not see (gdte moves its bytes as
 * MPI_PACKED): @p validate, the MPI's own check that @p dt is valid and committed, runs on
 * the first use of @p dt only; its acceptance is remembered in the import cache (a committed
 * datatype stays committed; the entry goes with the datatype). Predefined types need no
 * check. The status of @p validate is returned as is when it refuses.
 */
gdte_status_t gdte_mpi_type_import_validated(MPI_Datatype dt, gdte_status_t (*validate)(MPI_Datatype),
                                           gdte_type_h *type_p);

/* The MPI error class for a gdte status (MPI_SUCCESS for GDTE_OK and GDTE_INPROGRESS). */
int gdte_mpi_status_to_mpi_error(gdte_status_t status);

/* Counters for tests and benchmarks: gdte types built by the import (cache misses, children
 * included) and resized wrappers added because MPI's bounds differ from the standard's. */
typedef struct gdte_mpi_import_stats {
    int64_t builds;
    int64_t wrapped;
    int64_t named;
} gdte_mpi_import_stats_t;
void gdte_mpi_import_get_stats(gdte_mpi_import_stats_t *stats_p);

#endif
