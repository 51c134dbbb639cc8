/* Plans: the committed, cached form of a type (strided description or DEV units), and the
 * execution layout of `count` elements made from it without allocating. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "type_internal.h"

static int32_t pow2_align(int64_t x)
{
    uint64_t v = (uint64_t)x | 16u;
    return (int32_t)(v & (~v + 1)); /* lowest set bit, at most 16 */
}

static void plan_free(gdte_plan_t *p)
{
    free(p->units);
    free(p->runs);
    free(p);
}

void gdte_plan_release(gdte_plan_t *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1) plan_free(p);
}

gdte_status_t gdte_plan_build(const gdte_ir_t *ir, int64_t unit_size, gdte_plan_t **plan_p)
{
    gdte_plan_t *p = calloc(1, sizeof *p);
    if (!p) return GDTE_ERR_NO_MEMORY;
    atomic_init(&p->refs, 1);
    p->bytes = sizeof *p;
    p->nblocks = gdte_ir_nblocks(ir);
    if (ir->nsegs == 0) {
        p->kind = GDTE_LAYOUT_KIND_EMPTY;
        *plan_p = p;
        return GDTE_OK;
    }
    if (ir->nsegs == 1 && ir->nouter == 0) {
        const gdte_seg_t *s = &ir->segs[0];
        p->kind = s->nd ? GDTE_LAYOUT_KIND_STRIDED : GDTE_LAYOUT_KIND_CONTIG;
        p->disp = s->disp;
        p->blocklen = s->blocklen;
        p->ndims = s->nd;
        for (int k = 0; k < s->nd; k++) {
            p->count[k] = ir->dims[s->dimoff + k].count;
            p->stride[k] = ir->dims[s->dimoff + k].stride;
        }
        *plan_p = p;
        return GDTE_OK;
    }
    /* DEV units for one repetition of the segment list. */
    int64_t nunits = 0, nruns = 0;
    for (int64_t i = 0; i < ir->nsegs; i++) {
        const gdte_seg_t *s = &ir->segs[i];
        int64_t nb = 1, per = s->blocklen / unit_size + (s->blocklen % unit_size != 0), n;
        for (int k = 0; k < s->nd; k++)
            if (gdte_mul_ovf(nb, ir->dims[s->dimoff + k].count, &nb)) goto too_big;
        if (gdte_mul_ovf(nb, per, &n) || gdte_add_ovf(nunits, n, &nunits)) goto too_big;
        nruns += nb;
    }
    if ((uint64_t)nunits > SIZE_MAX / sizeof(gdte_unit_t)) goto too_big;
    p->units = malloc((size_t)nunits * sizeof(gdte_unit_t));
    if (!p->units) goto too_big;
    /* Runs are kept only where they are a small fraction of the units (long pieces). */
    if (nruns * 4 <= nunits && (p->runs = malloc((size_t)nruns * sizeof(gdte_run_t)))) {
        p->nruns = nruns;
        p->unit_size = unit_size;
        p->bytes += nruns * (int64_t)sizeof(gdte_run_t);
    }
    int64_t u = 0, packed = 0, r = 0;
    int32_t align = 16, maxlen = 0;
    for (int64_t i = 0; i < ir->nsegs; i++) {
        const gdte_seg_t *s = &ir->segs[i];
        const gdte_dim_t *d = s->nd ? ir->dims + s->dimoff : NULL; /* no pool while every segment is 0-D */
        int64_t idx[GDTE_MAX_DIMS] = {0}, off = s->disp;
        for (;;) {
            gdte_run_t run = {off, packed, s->blocklen, u};
            if (p->runs) p->runs[r++] = run;
            for (int64_t k = 0, nk = gdte_run_nunits(&run, unit_size); k < nk; k++) {
                gdte_unit_t *un = &p->units[u++];
                *un = gdte_run_unit(&run, k, unit_size);
                if (un->align < align) align = un->align;
                if (un->len > maxlen) maxlen = un->len;
            }
            packed += s->blocklen;
            /* next block; `off` only ever holds a block's offset (never one stride past the
             * last, which could leave int64 for a type whose blocks end near its limits) */
            int k = 0;
            while (k < s->nd) {
                if (++idx[k] < d[k].count) {
                    off += d[k].stride;
                    break;
                }
                off -= (idx[k] - 1) * d[k].stride;
                idx[k++] = 0;
            }
            if (k == s->nd) break;
        }
    }
    p->kind = GDTE_LAYOUT_KIND_UNITS;
    p->nunits = nunits;
    p->rep_bytes = packed;
    p->units_align = align;
    p->max_unit_len = maxlen;
    p->ndims = ir->nouter;
    for (int k = 0; k < ir->nouter; k++) {
        p->count[k] = ir->outer[k].count;
        p->stride[k] = ir->outer[k].stride;
    }
    p->bytes += nunits * (int64_t)sizeof(gdte_unit_t);
    *plan_p = p;
    return GDTE_OK;
too_big:
    plan_free(p);
    return GDTE_ERR_NO_MEMORY;
}

gdte_status_t gdte_engine_runs(gdte_type_h h, const gdte_run_t **runs_p, int64_t *nruns_p, int64_t *unit_size_p)
{
    const gdte_tobj_t *t = gdte_type_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (!t->committed) return GDTE_ERR_NOT_COMMITTED;
    if (!t->plan->runs) return GDTE_ERR_UNSUPPORTED;
    *runs_p = t->plan->runs;
    *nruns_p = t->plan->nruns;
    *unit_size_p = t->plan->unit_size;
    return GDTE_OK;
}

gdte_status_t gdte_engine_layout(gdte_type_h h, int64_t count, gdte_layout_t *L)
{
    const gdte_tobj_t *t = gdte_type_user_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (!t->committed) return GDTE_ERR_NOT_COMMITTED;
    if (count < 0) return GDTE_ERR_COUNT;
    const gdte_plan_t *p = t->plan;
    int64_t total, extent = t->ub - t->lb;
    if (gdte_mul_ovf(count, t->size, &total)) return GDTE_ERR_OVERFLOW;
    memset(L, 0, sizeof *L);
    L->total = total;
    L->true_lb = t->true_lb;
    if (total == 0 || p->kind == GDTE_LAYOUT_KIND_EMPTY) {
        L->kind = GDTE_LAYOUT_KIND_EMPTY;
        return GDTE_OK;
    }
    /* The last element's farthest byte must be addressable. */
    int64_t span;
    if (gdte_mul_ovf(count - 1, extent, &span) || gdte_add_ovf(span, t->true_ub, &span) ||
        gdte_add_ovf((count - 1) * extent, t->true_lb, &span))
        return GDTE_ERR_OVERFLOW;
    gdte_dim_t d[GDTE_MAX_DIMS + 1];
    int32_t nd = p->ndims;
    for (int k = 0; k < nd; k++) d[k] = (gdte_dim_t){p->count[k], p->stride[k]};
    d[nd++] = (gdte_dim_t){count, extent};
    L->disp = p->disp;
    int32_t align = pow2_align(p->disp);
    if (p->kind == GDTE_LAYOUT_KIND_UNITS) {
        gdte_dims_normalize(d, &nd);
        L->kind = GDTE_LAYOUT_KIND_UNITS;
        L->units = p->units;
        L->nunits = p->nunits;
        L->rep_bytes = p->rep_bytes;
        L->max_unit_len = p->max_unit_len;
        if (p->units_align < align) align = p->units_align;
    } else {
        int64_t bl = p->blocklen;
        gdte_grid_normalize(&bl, d, &nd);
        L->blocklen = bl;
        L->kind = nd ? GDTE_LAYOUT_KIND_STRIDED : GDTE_LAYOUT_KIND_CONTIG;
        int32_t a = pow2_align(bl);
        if (a < align) align = a;
    }
    L->ndims = nd;
    for (int k = 0; k < nd; k++) {
        L->count[k] = d[k].count;
        L->stride[k] = d[k].stride;
        int32_t a = pow2_align(d[k].stride);
        if (a < align) align = a;
    }
    L->align = align;
    return GDTE_OK;
}

int gdte_plan_describe(const gdte_plan_t *p, char *buf, size_t len)
{
    static const char *kinds[] = {"empty", "contig", "strided", "units"};
    int n = snprintf(buf, len, "%s", kinds[p->kind]);
    if (p->kind == GDTE_LAYOUT_KIND_CONTIG || p->kind == GDTE_LAYOUT_KIND_STRIDED)
        n += snprintf(buf + n, len > (size_t)n ? len - n : 0, " disp=%lld block=%lld", (long long)p->disp,
                      (long long)p->blocklen);
    if (p->kind == GDTE_LAYOUT_KIND_UNITS)
        n += snprintf(buf + n, len > (size_t)n ? len - n : 0, " units=%lld rep_bytes=%lld", (long long)p->nunits,
                      (long long)p->rep_bytes);
    for (int k = 0; k < p->ndims; k++)
        n += snprintf(buf + n, len > (size_t)n ? len - n : 0, " [%lldx%lld]", (long long)p->count[k],
                      (long long)p->stride[k]);
    return n;
}
