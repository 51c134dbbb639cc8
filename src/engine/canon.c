/* Canonical form: a type's constructor tree becomes a list of segments (grids of equal
 * contiguous blocks) repeated over outer dimensions, simplified until nothing changes. A
 * regular type ends as one segment whose description is proportional to its nesting depth,
 * however many blocks it has. */
#include <stdlib.h>
#include <string.h>
#include "type_internal.h"

/* A segment keeps at most this many dimensions, so a layout can add one for `count`. */
#define SEG_MAX_DIMS (GDTE_MAX_DIMS - 1)
/* Guard against descriptions that would not fit in memory. */
#define IR_MAX_SEGS (1LL << 31)

void gdte_ir_free(gdte_ir_t *ir)
{
    free(ir->segs);
    free(ir->dims);
    memset(ir, 0, sizeof *ir);
}

static void ir_init(gdte_ir_t *ir) { memset(ir, 0, sizeof *ir); }

static gdte_status_t ir_reserve_segs(gdte_ir_t *ir, int64_t more)
{
    if (ir->nsegs + more > IR_MAX_SEGS) return GDTE_ERR_NO_MEMORY;
    return gdte_grow(ir->segs, &ir->segcap, ir->nsegs + more, 4);
}

static gdte_status_t ir_reserve_dims(gdte_ir_t *ir, int64_t more)
{
    return gdte_grow(ir->dims, &ir->dimcap, ir->ndims + more, 8);
}

/* The dimensions of a segment. The pool stays NULL while every segment is 0-D, and
 * NULL + offset is undefined even when nothing is read. */
static const gdte_dim_t *seg_dims(const gdte_ir_t *ir, const gdte_seg_t *s)
{
    return s->nd ? ir->dims + s->dimoff : NULL;
}

/* Drop count-1 dimensions and merge dimensions that tile each other. Returns 0 if a
 * dimension has count 0 (the grid is empty). */
int gdte_dims_normalize(gdte_dim_t *d, int32_t *nd_p)
{
    int nd = *nd_p, w = 0;
    for (int i = 0; i < nd; i++) {
        if (d[i].count == 0) return 0;
        if (d[i].count != 1) d[w++] = d[i];
    }
    nd = w;
    for (int i = 0; i + 1 < nd;) {
        int64_t span;
        if (!gdte_mul_ovf(d[i].count, d[i].stride, &span) && d[i + 1].stride == span) {
            d[i].count *= d[i + 1].count;
            memmove(d + i + 1, d + i + 2, (size_t)(nd - i - 2) * sizeof *d);
            nd--;
        } else {
            i++;
        }
    }
    *nd_p = nd;
    return 1;
}

/* Simplify a block grid in place: dims_normalize, then fold a dense innermost dimension into
 * the block. Returns 0 if the grid is empty. */
int gdte_grid_normalize(int64_t *blocklen, gdte_dim_t *d, int32_t *nd_p)
{
    if (*blocklen == 0) return 0;
    for (;;) {
        if (!gdte_dims_normalize(d, nd_p)) return 0;
        if (*nd_p > 0 && d[0].stride == *blocklen) {
            *blocklen *= d[0].count;
            memmove(d, d + 1, (size_t)(*nd_p - 1) * sizeof *d);
            (*nd_p)--;
            continue;
        }
        return 1;
    }
}

/* Append a segment with the given grid (dims copied). */
static gdte_status_t ir_push_seg(gdte_ir_t *ir, int64_t disp, int64_t blocklen, const gdte_dim_t *dims, int nd)
{
    gdte_dim_t tmp[2 * GDTE_MAX_DIMS + 1];
    if (nd) memcpy(tmp, dims, (size_t)nd * sizeof *tmp);
    int32_t n = nd;
    if (!gdte_grid_normalize(&blocklen, tmp, &n)) return GDTE_OK; /* empty: nothing to add */
    gdte_status_t st;
    if (n > SEG_MAX_DIMS) {
        /* Too deep for one segment: unroll the outermost dimension. */
        gdte_dim_t o = tmp[n - 1];
        for (int64_t i = 0; i < o.count; i++)
            if ((st = ir_push_seg(ir, disp + i * o.stride, blocklen, tmp, n - 1)) != GDTE_OK) return st;
        return GDTE_OK;
    }
    if ((st = ir_reserve_segs(ir, 1)) != GDTE_OK || (st = ir_reserve_dims(ir, n)) != GDTE_OK) return st;
    gdte_seg_t *s = &ir->segs[ir->nsegs++];
    s->disp = disp;
    s->blocklen = blocklen;
    s->nd = n;
    s->dimoff = ir->ndims;
    if (n) memcpy(ir->dims + ir->ndims, tmp, (size_t)n * sizeof *tmp); /* dims may still be NULL */
    ir->ndims += n;
    return GDTE_OK;
}

int64_t gdte_ir_nblocks(const gdte_ir_t *ir)
{
    int64_t per = 0;
    for (int64_t i = 0; i < ir->nsegs; i++) {
        int64_t n = 1;
        for (int k = 0; k < ir->segs[i].nd; k++) n *= ir->dims[ir->segs[i].dimoff + k].count;
        per += n;
    }
    for (int k = 0; k < ir->nouter; k++) per *= ir->outer[k].count;
    return per;
}

/* Append every segment of `src` to `dst`, for every index of src's outer grid extended by
 * `extra` (outermost), shifted by `shift`. A single-segment src keeps its grid as dimensions
 * instead of being unrolled. */
static gdte_status_t ir_append_unrolled(gdte_ir_t *dst, const gdte_ir_t *src, gdte_dim_t extra, int64_t shift)
{
    gdte_status_t st;
    if (src->nsegs == 0 || extra.count == 0) return GDTE_OK;
    gdte_dim_t grid[GDTE_MAX_DIMS + 1];
    int ng = src->nouter;
    memcpy(grid, src->outer, (size_t)ng * sizeof *grid);
    grid[ng++] = extra;
    if (src->nsegs == 1) {
        const gdte_seg_t *s = &src->segs[0];
        gdte_dim_t dims[2 * GDTE_MAX_DIMS + 1];
        if (s->nd) memcpy(dims, seg_dims(src, s), (size_t)s->nd * sizeof *dims);
        memcpy(dims + s->nd, grid, (size_t)ng * sizeof *dims);
        int nd = s->nd + ng;
        int64_t bl = s->blocklen;
        int32_t n32 = nd;
        if (!gdte_grid_normalize(&bl, dims, &n32)) return GDTE_OK;
        nd = n32;
        /* unroll outer dimensions beyond what a segment can hold */
        if (nd <= SEG_MAX_DIMS) return ir_push_seg(dst, s->disp + shift, bl, dims, nd);
        int keep = SEG_MAX_DIMS, nout = nd - keep;
        int64_t idx[2 * GDTE_MAX_DIMS] = {0};
        for (;;) {
            int64_t off = 0;
            for (int k = 0; k < nout; k++) off += idx[k] * dims[keep + k].stride;
            if ((st = ir_push_seg(dst, s->disp + shift + off, bl, dims, keep)) != GDTE_OK) return st;
            int k = 0;
            while (k < nout && ++idx[k] == dims[keep + k].count) idx[k++] = 0;
            if (k == nout) break;
        }
        return GDTE_OK;
    }
    int64_t reps = 1;
    for (int k = 0; k < ng; k++)
        if (gdte_mul_ovf(reps, grid[k].count, &reps)) return GDTE_ERR_NO_MEMORY;
    int64_t total;
    if (gdte_mul_ovf(reps, src->nsegs, &total)) return GDTE_ERR_NO_MEMORY;
    if ((st = ir_reserve_segs(dst, total)) != GDTE_OK) return st;
    int64_t idx[GDTE_MAX_DIMS + 1] = {0};
    for (int64_t r = 0; r < reps; r++) {
        int64_t off = shift;
        for (int k = 0; k < ng; k++) off += idx[k] * grid[k].stride;
        for (int64_t i = 0; i < src->nsegs; i++) {
            const gdte_seg_t *s = &src->segs[i];
            if ((st = ir_push_seg(dst, s->disp + off, s->blocklen, seg_dims(src, s), s->nd)) != GDTE_OK)
                return st;
        }
        int k = 0;
        while (k < ng && ++idx[k] == grid[k].count) idx[k++] = 0;
    }
    return GDTE_OK;
}

/* Repeat the whole element `count` times, `stride` bytes apart (outermost). */
static gdte_status_t ir_repeat(gdte_ir_t *ir, int64_t count, int64_t stride)
{
    if (ir->nsegs == 0 || count == 1) return GDTE_OK;
    if (count == 0) {
        ir->nsegs = 0;
        ir->nouter = 0;
        return GDTE_OK;
    }
    if (ir->nsegs == 1 || ir->nouter >= SEG_MAX_DIMS) {
        gdte_ir_t out;
        ir_init(&out);
        gdte_status_t st = ir_append_unrolled(&out, ir, (gdte_dim_t){count, stride}, 0);
        gdte_ir_free(ir);
        *ir = out;
        return st;
    }
    ir->outer[ir->nouter++] = (gdte_dim_t){count, stride};
    return GDTE_OK;
}

static int seg_same_shape(const gdte_ir_t *ir, const gdte_seg_t *a, const gdte_seg_t *b)
{
    if (a->blocklen != b->blocklen || a->nd != b->nd) return 0;
    return !a->nd || !memcmp(seg_dims(ir, a), seg_dims(ir, b), (size_t)a->nd * sizeof(gdte_dim_t));
}

/* Append a 0-D segment; the caller has reserved room. */
static inline void ir_push_flat(gdte_ir_t *ir, int64_t disp, int64_t len)
{
    ir->segs[ir->nsegs++] = (gdte_seg_t){.disp = disp, .blocklen = len, .dimoff = ir->ndims, .nd = 0};
}

/* One pass of the segment-list rules; returns 1 if anything changed. Segments are rewritten
 * in place: no rule makes more segments than it reads (a normalized grid never needs
 * unrolling), so the write index never passes the read index, and a pass over a million
 * segments allocates nothing but the (small) new dimension pool. */
static gdte_status_t ir_simplify_pass(gdte_ir_t *ir, int *changed)
{
    gdte_status_t st;
    gdte_ir_t out;
    ir_init(&out);
    out.segs = ir->segs;
    out.segcap = ir->segcap;
    out.nouter = ir->nouter;
    memcpy(out.outer, ir->outer, sizeof ir->outer);
    int64_t i = 0;
    while (i < ir->nsegs) {
        const gdte_seg_t *a = &ir->segs[i];
        /* Rule: a run of >= 2 segments of one shape at a constant distance is one segment
         * with one more dimension (indexed with regular displacements is a vector). */
        int64_t j = i + 1;
        if (j < ir->nsegs && a->nd < SEG_MAX_DIMS && seg_same_shape(ir, a, &ir->segs[j])) {
            int64_t delta = ir->segs[j].disp - a->disp;
            while (j + 1 < ir->nsegs && seg_same_shape(ir, a, &ir->segs[j + 1]) &&
                   ir->segs[j + 1].disp - ir->segs[j].disp == delta)
                j++;
            int64_t run = j - i + 1;
            /* Two contiguous blocks are better merged by the rule below. */
            if (!(run == 2 && a->nd == 0 && delta == a->blocklen)) {
                gdte_dim_t dims[GDTE_MAX_DIMS];
                if (a->nd) memcpy(dims, seg_dims(ir, a), (size_t)a->nd * sizeof *dims);
                dims[a->nd] = (gdte_dim_t){run, delta};
                if ((st = ir_push_seg(&out, a->disp, a->blocklen, dims, a->nd + 1)) != GDTE_OK) goto fail;
                *changed = 1;
                i = j + 1;
                continue;
            }
        }
        /* Rule: merge blocks adjacent in memory and in packed order. */
        if (a->nd == 0) {
            int64_t disp = a->disp, len = a->blocklen;
            j = i + 1;
            while (j < ir->nsegs && ir->segs[j].nd == 0 && ir->segs[j].disp == disp + len) {
                len += ir->segs[j].blocklen;
                j++;
            }
            if (j > i + 1) *changed = 1;
            ir_push_flat(&out, disp, len);
            i = j;
            continue;
        }
        /* ir_push_seg normalizes the grid (and may overwrite *a: keep what is compared) */
        int64_t before = out.nsegs, a_len = a->blocklen;
        int32_t a_nd = a->nd;
        if ((st = ir_push_seg(&out, a->disp, a->blocklen, seg_dims(ir, a), a->nd)) != GDTE_OK) goto fail;
        if (out.nsegs != before + 1 || out.segs[before].nd != a_nd || out.segs[before].blocklen != a_len)
            *changed = 1;
        i++;
    }
    /* Outer dimensions: drop count 1, merge those that tile each other. */
    {
        int32_t n = out.nouter;
        if (out.nsegs && !gdte_dims_normalize(out.outer, &n)) out.nsegs = 0;
        if (n != out.nouter) *changed = 1;
        out.nouter = out.nsegs ? n : 0;
    }
    /* The segments now live in `out`; the old dimension pool is no longer referenced. */
    free(ir->dims);
    ir_init(ir);
    /* Rule: a single segment takes the outer dimensions into its grid. */
    if (out.nsegs == 1 && out.nouter > 0) {
        gdte_ir_t one;
        ir_init(&one);
        gdte_ir_t inner = out;
        inner.nouter = 0;
        gdte_dim_t grid[GDTE_MAX_DIMS];
        int ng = out.nouter;
        memcpy(grid, out.outer, sizeof grid);
        /* unroll via ir_append_unrolled with the outermost as `extra` */
        inner.nouter = ng - 1;
        memcpy(inner.outer, grid, (size_t)(ng - 1) * sizeof *grid);
        if ((st = ir_append_unrolled(&one, &inner, grid[ng - 1], 0)) != GDTE_OK) {
            gdte_ir_free(&one);
            *ir = out; /* a valid IR for the caller to free */
            return st;
        }
        gdte_ir_free(&out);
        out = one;
        *changed = 1;
    }
    *ir = out;
    return GDTE_OK;
fail:
    /* ir keeps its (partly rewritten) segments; the caller frees it */
    free(out.dims);
    return st;
}

static gdte_status_t ir_simplify(gdte_ir_t *ir)
{
    gdte_status_t st = GDTE_OK;
    for (int iter = 0; iter < 64; iter++) {
        int changed = 0;
        if ((st = ir_simplify_pass(ir, &changed)) != GDTE_OK || !changed) break;
    }
    if (ir->nsegs == 0) ir->nouter = 0;
    return st;
}

/* Blocks of an (h)indexed type over a child that is one contiguous piece (a basic element,
 * a dense contiguous type...): the common case of large indexed types, so it is built in one
 * pass with room reserved once, and blocks adjacent in memory are merged as they come (the
 * merge rule of ir_simplify_pass, applied early). */
static gdte_status_t ir_of_flat_blocks(const gdte_tobj_t *t, const gdte_ir_t *c, gdte_ir_t *ir)
{
    gdte_status_t st = ir_reserve_segs(ir, t->count);
    if (st != GDTE_OK) return st;
    const int64_t cb = c->segs[0].blocklen, cd = c->segs[0].disp, E = gdte_type_extent_(t->child);
    for (int64_t i = 0; i < t->count; i++) {
        int64_t bl = t->blocklens[i], disp = t->displs[i] + cd;
        if (bl == 0) continue;
        if (bl > 1 && E != cb) { /* copies with gaps between them: a 1-D grid */
            if ((st = ir_push_seg(ir, disp, cb, &(gdte_dim_t){bl, E}, 1)) != GDTE_OK) return st;
            continue;
        }
        int64_t len = cb * bl; /* fits: the type's size did */
        gdte_seg_t *last = ir->nsegs ? &ir->segs[ir->nsegs - 1] : NULL;
        if (last && last->nd == 0 && last->disp + last->blocklen == disp)
            last->blocklen += len;
        else
            ir_push_flat(ir, disp, len);
    }
    return GDTE_OK;
}

/* The form of an HVECTOR or HINDEXED node from its child's form `ir` (replaced). */
static gdte_status_t ir_over_child(const gdte_tobj_t *t, gdte_ir_t *ir)
{
    gdte_status_t st = GDTE_OK;
    if (t->kind == GDTE_NODE_HVECTOR) {
        if ((st = ir_repeat(ir, t->blocklen, gdte_type_extent_(t->child))) != GDTE_OK ||
            (st = ir_repeat(ir, t->count, t->stride)) != GDTE_OK)
            return st;
        return ir_simplify(ir);
    }
    gdte_ir_t out;
    ir_init(&out);
    if (ir->nsegs == 1 && ir->nouter == 0 && ir->segs[0].nd == 0) {
        st = ir_of_flat_blocks(t, ir, &out);
    } else {
        for (int64_t i = 0; i < t->count && st == GDTE_OK; i++)
            st = ir_append_unrolled(&out, ir, (gdte_dim_t){t->blocklens[i], gdte_type_extent_(t->child)}, t->displs[i]);
    }
    gdte_ir_free(ir);
    *ir = out;
    return st != GDTE_OK ? st : ir_simplify(ir);
}

static _Atomic int64_t ir_nodes;
int64_t gdte_engine_nodes_visited(void) { return ir_nodes; }

/* A node whose form waits for its children's: HVECTOR and HINDEXED (one child), STRUCT (each
 * child in turn, appended to `acc`). */
typedef struct ir_frame {
    const gdte_tobj_t *t;
    int64_t next; /* STRUCT: the child being built */
    gdte_ir_t acc; /* STRUCT: the members so far */
} ir_frame_t;

/* The form of a type, built bottom-up without recursion: descend to a leaf pushing a frame
 * per node that combines its children's forms (dup and resized pass their child's form
 * through and need none), then fold the result into the frames above. The stack lives on
 * the heap and holds at most the type's depth (<= GDTE_MAX_TYPE_DEPTH) frames. */
static gdte_status_t ir_of(const gdte_tobj_t *t, gdte_ir_t *ir)
{
    gdte_status_t st = GDTE_OK;
    ir_frame_t *stack = NULL;
    int64_t n = 0, cap = 0;
    ir_init(ir);
    for (;;) {
        /* Descend from t to a leaf; its form goes to *ir. */
        for (;;) {
            atomic_fetch_add_explicit(&ir_nodes, 1, memory_order_relaxed);
            if (t->kind == GDTE_NODE_DUP || t->kind == GDTE_NODE_RESIZED) {
                t = t->child;
                continue;
            }
            if (t->kind == GDTE_NODE_BASIC) {
                st = ir_push_seg(ir, 0, t->size, NULL, 0);
                break;
            }
            if (t->kind == GDTE_NODE_STRUCT && t->count == 0) break; /* empty: *ir stays empty */
            if (t->kind != GDTE_NODE_HVECTOR && t->kind != GDTE_NODE_HINDEXED && t->kind != GDTE_NODE_STRUCT) {
                st = GDTE_ERR_INTERNAL;
                break;
            }
            if ((st = gdte_grow(stack, &cap, n + 1, 64)) != GDTE_OK) break;
            stack[n++] = (ir_frame_t){.t = t}; /* acc: empty */
            t = t->kind == GDTE_NODE_STRUCT ? t->children[0] : t->child;
        }
        if (st != GDTE_OK) goto fail;
        /* Ascend: fold *ir into the frames above until one needs its next child. */
        int more = 0;
        while (n > 0 && !more) {
            ir_frame_t *f = &stack[n - 1];
            if (f->t->kind == GDTE_NODE_STRUCT) {
                const gdte_tobj_t *s = f->t;
                const gdte_tobj_t *ch = s->children[f->next];
                st = ir_append_unrolled(&f->acc, ir, (gdte_dim_t){s->blocklens[f->next], gdte_type_extent_(ch)},
                                        s->displs[f->next]);
                gdte_ir_free(ir);
                if (st != GDTE_OK) goto fail;
                if (++f->next < s->count) {
                    t = s->children[f->next];
                    more = 1;
                    continue;
                }
                *ir = f->acc;
                n--;
                st = ir_simplify(ir);
            } else {
                n--;
                st = ir_over_child(f->t, ir);
            }
            if (st != GDTE_OK) goto fail;
        }
        if (!more) break;
    }
    free(stack);
    return GDTE_OK;
fail:
    gdte_ir_free(ir);
    while (n > 0) gdte_ir_free(&stack[--n].acc);
    free(stack);
    return st;
}

gdte_status_t gdte_ir_build(const gdte_tobj_t *t, gdte_ir_t *ir)
{
    gdte_status_t st = ir_of(t, ir);
    if (st != GDTE_OK) gdte_ir_free(ir);
    return st;
}
