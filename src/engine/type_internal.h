/* Internal representation of a datatype: a constructor tree, reference counted. */
#ifndef GDTE_TYPE_INTERNAL_H
#define GDTE_TYPE_INTERNAL_H

#include <stdatomic.h>
#include <uthash.h>
#include "engine.h"

#define GDTE_TYPE_MAGIC 0x67647465u /* "gdte" */

typedef enum {
    GDTE_NODE_BASIC = 0,
    GDTE_NODE_HVECTOR,  /* count blocks of blocklen children, stride bytes apart */
    GDTE_NODE_HINDEXED, /* count blocks, own lengths and byte displacements */
    GDTE_NODE_STRUCT,   /* like HINDEXED with a child per block */
    GDTE_NODE_RESIZED,  /* new lb/extent, same data */
    GDTE_NODE_DUP,      /* same as its child */
} gdte_node_kind_t;

struct gdte_plan;

struct gdte_type {
    uint32_t magic;
    int predefined;
    _Atomic int64_t refcount; /* user handle + parents + operations in flight */
    int user_freed;
    uint64_t uid;
    gdte_node_kind_t kind;
    int depth;

    /* Type map summary */
    int64_t size;
    int64_t lb, ub;           /* extent = ub - lb */
    int64_t true_lb, true_ub; /* bytes touched; both 0 when size == 0 */
    /* MPI's bounds rules: lb/ub come from explicit markers (set by resized, inherited by
     * every type built over one) when there are any; otherwise from the data, with ub padded
     * so that the extent is a multiple of `align`, the largest alignment of the basic
     * elements (the standard's epsilon). */
    int markers;
    int32_t align;
    uint64_t sig_hash;        /* signature of one element (see sig_* in type.c) */
    int64_t sig_n;

    /* Node data */
    uint32_t basic_tag;
    int64_t count;
    int64_t blocklen;         /* HVECTOR */
    int64_t stride;           /* HVECTOR, bytes */
    int64_t *blocklens;       /* HINDEXED, STRUCT */
    int64_t *displs;          /* HINDEXED, STRUCT: bytes */
    struct gdte_type **children; /* STRUCT */
    struct gdte_type *child;  /* HVECTOR, HINDEXED, RESIZED, DUP */

    /* Commit */
    int committed;
    struct gdte_plan *plan;
    void *backend_slot;
    void (*backend_free)(void *);

    struct gdte_type *self; /* registry key */
    UT_hash_handle hh;      /* registry of live handles */
};

static inline int64_t gdte_type_extent_(const struct gdte_type *t) { return t->ub - t->lb; }

/* ---- canonical form (canon.c) ---- */
typedef struct gdte_dim { int64_t count, stride; } gdte_dim_t;
typedef struct gdte_seg {
    int64_t disp, blocklen;
    int64_t dimoff; /* first of nd dims in the IR's dims pool */
    int32_t nd;
    int32_t pad_;
} gdte_seg_t;
/* One element of a type: the segments in packed order, each a grid of equal blocks, the
 * whole list repeated over `outer` (innermost first). */
typedef struct gdte_ir {
    int nouter;
    gdte_dim_t outer[GDTE_MAX_DIMS];
    int64_t nsegs, segcap;
    gdte_seg_t *segs;
    int64_t ndims, dimcap;
    gdte_dim_t *dims;
} gdte_ir_t;

gdte_status_t gdte_ir_build(const struct gdte_type *t, gdte_ir_t *ir);
void gdte_ir_free(gdte_ir_t *ir);
int64_t gdte_ir_nblocks(const gdte_ir_t *ir);
/* Grid simplification shared by the canonical form and layouts (see canon.c). */
int gdte_dims_normalize(gdte_dim_t *d, int32_t *nd_p);
int gdte_grid_normalize(int64_t *blocklen, gdte_dim_t *d, int32_t *nd_p);

/* ---- plans (plan.c) ---- */
typedef struct gdte_plan {
    int kind; /* GDTE_LAYOUT_KIND_* */
    int ndims;
    int64_t disp, blocklen;
    int64_t count[GDTE_MAX_DIMS], stride[GDTE_MAX_DIMS];
    gdte_unit_t *units;
    int64_t nunits, rep_bytes;
    gdte_run_t *runs; /* UNITS, when much smaller than units: the uncut pieces (layout.h) */
    int64_t nruns, unit_size;
    int32_t max_unit_len, units_align;
    int64_t nblocks;
    int64_t bytes;
} gdte_plan_t;

gdte_status_t gdte_plan_build(const gdte_ir_t *ir, int64_t unit_size, gdte_plan_t **plan_p);
void gdte_plan_free(gdte_plan_t *p);
int gdte_plan_describe(const gdte_plan_t *p, char *buf, size_t len);

#endif
