/* Internal representation of a datatype: a constructor tree of reference-counted objects.
 *
 * Handles are not object addresses. A gdte_type_h is an opaque, pointer-sized value holding a
 * registry slot index and that slot's generation (type.c); the generation changes when the
 * object in the slot is destroyed, so a stale handle stays an error even when the slot, or
 * the object's memory, is reused. `struct gdte_type` is never defined: a handle cannot be
 * dereferenced by mistake. Inside the engine, objects link to each other by address
 * (gdte_tobj_t *), and every call that receives a handle resolves it first. */
#ifndef GDTE_TYPE_INTERNAL_H
#define GDTE_TYPE_INTERNAL_H

#include <stdatomic.h>
#include "engine.h"

typedef enum {
    GDTE_NODE_BASIC = 0,
    GDTE_NODE_HVECTOR,  /* count blocks of blocklen children, stride bytes apart */
    GDTE_NODE_HINDEXED, /* count blocks, own lengths and byte displacements */
    GDTE_NODE_STRUCT,   /* like HINDEXED with a child per block */
    GDTE_NODE_RESIZED,  /* new lb/extent, same data */
    GDTE_NODE_DUP,      /* same as its child */
} gdte_node_kind_t;

struct gdte_plan;

typedef struct gdte_tobj gdte_tobj_t;
struct gdte_tobj {
    int predefined;
    _Atomic int64_t refcount; /* user handle + parents + operations in flight */
    _Atomic int user_freed;
    gdte_type_h handle;       /* the handle that names this object (NULL until published) */
    gdte_node_kind_t kind;
    int depth;                /* nesting levels below (a dup adds none); <= GDTE_MAX_TYPE_DEPTH */

    /* Type map summary */
    int64_t size;
    int64_t lb, ub;           /* extent = ub - lb */
    int64_t true_lb, true_ub; /* bytes touched; both 0 when size == 0 */
    /* MPI's bounds rules: lb/ub come from explicit markers (set by resized, inherited by
     * every type built over one) when there are any; otherwise from the data, with ub padded
     * so that the extent is a multiple of `align`, the largest alignment of the basic
     * elements (the standard's epsilon). Every bound and extent is a checked int64 greater
     * than INT64_MIN, so its negation never overflows. */
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
    gdte_tobj_t **children;   /* STRUCT */
    gdte_tobj_t *child;       /* HVECTOR, HINDEXED, RESIZED, DUP (never itself a DUP) */

    /* Commit. A dup shares its child's plan (refcounted): committing a dup builds the plan
     * on the child without committing it, so `plan` may be set before `committed`. */
    int committed;
    struct gdte_plan *plan;
    void *backend_slot;
    void (*backend_free)(void *);

    gdte_tobj_t *next_dead;   /* obj_release's work list: no recursion over a long chain */
};

/* A handle's value: (generation << GDTE_HANDLE_SLOT_BITS) | registry slot. */
#define GDTE_HANDLE_SLOT_BITS 28
static inline uint64_t gdte_handle_slot(gdte_type_h h)
{
    return (uint64_t)(uintptr_t)h & ((UINT64_C(1) << GDTE_HANDLE_SLOT_BITS) - 1);
}
static inline uint64_t gdte_handle_gen(gdte_type_h h) { return (uint64_t)(uintptr_t)h >> GDTE_HANDLE_SLOT_BITS; }

/* The object a handle names, or NULL for a NULL, stale or foreign handle (a handle freed by
 * the user still resolves while internal references keep its object alive). */
gdte_tobj_t *gdte_type_obj(gdte_type_h type);
/* The same, NULL also once the user freed the handle: what user calls accept. */
gdte_tobj_t *gdte_type_user_obj(gdte_type_h type);

static inline int64_t gdte_type_extent_(const gdte_tobj_t *t) { return t->ub - t->lb; }

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

gdte_status_t gdte_ir_build(const gdte_tobj_t *t, gdte_ir_t *ir);
void gdte_ir_free(gdte_ir_t *ir);
int64_t gdte_ir_nblocks(const gdte_ir_t *ir);
/* Grid simplification shared by the canonical form and layouts (see canon.c). */
int gdte_dims_normalize(gdte_dim_t *d, int32_t *nd_p);
int gdte_grid_normalize(int64_t *blocklen, gdte_dim_t *d, int32_t *nd_p);

/* ---- plans (plan.c) ---- */
typedef struct gdte_plan {
    _Atomic int64_t refs; /* types holding this plan (a dup chain shares one) */
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
void gdte_plan_release(gdte_plan_t *p); /* drops one reference; the last frees */
int gdte_plan_describe(const gdte_plan_t *p, char *buf, size_t len);

#endif
