/* The GPU-versus-host checking driver (see kcheck.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "engine/engine.h"
#include "kcheck.h"

#define GUARD 64 /* poisoned bytes before and after every output */
#define SLOT 32  /* room for misalignment */

static const char *kvar_name(int v)
{
    static const char *n[] = {"auto", "contig", "strided", "tiled", "dev_warp", "dev_thread", "flat", "copy", "periodic"};
    return v >= 0 && v <= 8 ? n[v] : "?";
}

int kc_iters(int def)
{
    const char *e = getenv("GDTETEST_ITERS");
    return e && atoi(e) > 0 ? atoi(e) : def;
}

uint64_t kc_seed(void)
{
    const char *e = getenv("GDTETEST_SEED");
    if (e && *e) return strtoull(e, NULL, 0);
    return (uint64_t)time(NULL) * 2654435761u;
}

static void fill_random(rt_rng_t *r, unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rt_next(r);
}

typedef struct ctx {
    const kc_ops_t *ops;
    const char *desc;
    uint64_t seed;
    int64_t count;
    int variant, word, wide, ndims;
    kc_stats_t *stats;
    int failed;
} ctx_t;

static int report(ctx_t *c, const char *phase, int64_t off, int64_t len, const unsigned char *got,
                  const unsigned char *exp, size_t n, int64_t base)
{
    size_t i = 0;
    while (i < n && got[i] == exp[i]) i++;
    if (i == n) return 0;
    if (c->failed++ < 1 || getenv("GDTETEST_VERBOSE"))
        fprintf(stderr,
                "FAIL seed=0x%llx count=%lld variant=%s word=%d wide=%d phase=%s range=[%lld,+%lld): byte %lld: got "
                "0x%02x want 0x%02x\n  type: %s\n",
                (unsigned long long)c->seed, (long long)c->count, kvar_name(c->variant), c->word, c->wide, phase,
                (long long)off, (long long)len, (long long)((int64_t)i + base), got[i], exp[i], c->desc);
    return 1;
}

static void note_run(ctx_t *c, int64_t off, int64_t len)
{
    gdte_kvar_t v;
    int w;
    gdte_gpu_exec_last(&v, &w);
    if ((int)v < 0 || v >= KC_NVARIANTS || w < 0 || w > 16) return;
    c->stats->ran[v][w]++;
    if (w > 1 && (off % w || (off + len) % w)) c->stats->cut[v][w]++;
    if (v == GDTE_KVAR_FLAT && c->wide) c->stats->flat_wide[w]++;
    if (v == GDTE_KVAR_PERIODIC && c->wide) c->stats->periodic_wide++;
    if (v == GDTE_KVAR_FLAT) c->stats->flat_nd[c->ndims < 3 ? c->ndims : 3]++;
}

static gdte_status_t run(ctx_t *c, const gdte_layout_t *L, const gdte_gpu_exec_opts_t *o, gdte_dir_t dir, void *user,
                         void *packed, int64_t off, int64_t len)
{
    gdte_status_t st = c->ops->exec(L, o, dir, user, packed, off, len);
    if (st != GDTE_OK) {
        if (c->failed++ < 1 || getenv("GDTETEST_VERBOSE"))
            fprintf(stderr, "FAIL seed=0x%llx variant=%s word=%d wide=%d %s [%lld,+%lld): %s\n  type: %s\n",
                    (unsigned long long)c->seed, kvar_name(c->variant), c->word, c->wide,
                    dir == GDTE_DIR_PACK ? "pack" : "unpack", (long long)off, (long long)len, gdte_status_name(st),
                    c->desc);
    } else {
        note_run(c, off, len);
        c->stats->bytes += len;
    }
    return st;
}

/* Where a fragment of stream offset `off` goes in the scratch buffer after `pos`: half the
 * time congruent to `off` modulo 16 (its words then line up as in a whole buffer). */
static int64_t slot_at(rt_rng_t *r, int64_t pos, int64_t off)
{
    int64_t base = (pos + GUARD + 15) / 16 * 16;
    return rt_below(r, 2) ? base + (off & 15) : pos + GUARD + rt_below(r, SLOT);
}

/* Random cut of [0, n) into up to 6 fragments, in shuffled order. */
static int cut(rt_rng_t *r, int64_t n, int64_t *offs, int64_t *lens)
{
    int k = 1 + (int)rt_below(r, 6);
    if (k > n) k = (int)n;
    int64_t pts[8];
    pts[0] = 0;
    for (int i = 1; i < k; i++) pts[i] = 1 + rt_below(r, n - 1);
    pts[k] = n;
    /* sort the interior points, drop duplicates */
    for (int i = 1; i < k; i++)
        for (int j = i + 1; j < k; j++)
            if (pts[j] < pts[i]) {
                int64_t t = pts[i];
                pts[i] = pts[j];
                pts[j] = t;
            }
    int m = 0;
    for (int i = 0; i < k; i++)
        if (pts[i + 1] > pts[i]) {
            offs[m] = pts[i];
            lens[m] = pts[i + 1] - pts[i];
            m++;
        }
    for (int i = m - 1; i > 0; i--) {
        int j = (int)rt_below(r, i + 1);
        int64_t t = offs[i];
        offs[i] = offs[j];
        offs[j] = t;
        t = lens[i];
        lens[i] = lens[j];
        lens[j] = t;
    }
    return m;
}

int kc_check(const kc_ops_t *ops, gdte_type_h type, int64_t count, uint64_t seed, const char *desc,
             const int *variants, const int *words, kc_stats_t *stats)
{
    gdte_layout_t L, Ld;
    gdte_type_info_t in;
    ctx_t c = {ops, desc, seed, count, 0, 0, 0, 1, stats, 0};
    if (gdte_engine_layout(type, count, &L) != GDTE_OK || gdte_type_get_info(type, &in) != GDTE_OK) {
        fprintf(stderr, "FAIL seed=0x%llx: no layout for %s\n", (unsigned long long)seed, desc);
        stats->failures++;
        return 1;
    }
    const int64_t n = L.total;
    if (L.kind == GDTE_LAYOUT_KIND_STRIDED && L.ndims > 1) c.ndims = L.ndims;
    if (n == 0) return 0;
    int64_t last = (count - 1) * in.extent;
    int64_t lo_off = (last < 0 ? last : 0) + in.true_lb;
    int64_t hi_off = (last > 0 ? last : 0) + in.true_lb + in.true_extent;
    size_t ubytes = (size_t)(hi_off - lo_off) + 2 * GUARD;
    rt_rng_t r = {seed ^ 0x5eed};
    rt_rng_t wr = {seed ^ 0x71de}; /* FLAT's index width: its own stream, so r's cases stay as they were */

    unsigned char *uh = malloc(ubytes), *uexp = malloc(ubytes), *uget = malloc(ubytes), *cov = calloc(1, ubytes);
    unsigned char *ref = malloc((size_t)n), *ones = malloc((size_t)n);
    size_t pbytes = (size_t)n + 6 * (2 * GUARD + SLOT); /* room for six fragments apart */
    unsigned char *ph = malloc(pbytes), *pget = malloc(pbytes), *pexp = malloc(pbytes);
    unsigned char *ud = ops->alloc(ubytes + SLOT), *pd = ops->alloc(pbytes + SLOT);
    if (!uh || !uexp || !uget || !cov || !ref || !ones || !ph || !pget || !pexp || !ud || !pd) {
        fprintf(stderr, "FAIL: out of memory for %s (%lld packed bytes)\n", desc, (long long)n);
        c.failed = 1;
        goto out;
    }
    fill_random(&r, uh, ubytes);
    char *user_h = (char *)uh + GUARD - lo_off;
    gdte_host_exec(&L, GDTE_DIR_PACK, user_h, ref, 0, n);
    /* Overlap-free iff every packed byte lands on its own user byte. */
    memset(ones, 0xff, (size_t)n);
    gdte_host_exec(&L, GDTE_DIR_UNPACK, (char *)cov + GUARD - lo_off, ones, 0, n);
    int64_t covered = 0;
    for (size_t i = 0; i < ubytes; i++) covered += cov[i] != 0;
    int can_unpack = covered == n;
    if (!can_unpack) stats->skipped_unpack++;
    Ld = L;
    if (L.kind == GDTE_LAYOUT_KIND_UNITS) Ld.units = ops->units(type, &L);

    for (const int *v = variants; *v >= 0 && !c.failed; v++) {
        for (const int *w = words; *w >= 0 && !c.failed; w++) {
            c.variant = *v;
            c.word = *w;
            gdte_gpu_exec_force_variant((gdte_kvar_t)*v);
            gdte_gpu_exec_force_word(*w);
            /* 64-bit indices on half the flat cases, and always while a word size has not run
             * with them yet (then aligned too), so coverage does not hang on the pool's luck. */
            int cover_wide = *v == GDTE_KVAR_FLAT && *w >= 1 && *w <= 16 && !stats->flat_wide[*w];
            c.wide = (*v == GDTE_KVAR_FLAT || *v == GDTE_KVAR_PERIODIC) && (cover_wide || rt_below(&wr, 2));
            gdte_gpu_exec_force_wide(c.wide);
            stats->cases++;
            gdte_gpu_exec_opts_t o;
            memset(&o, 0, sizeof o);
            static const int caps[] = {0, 1, 2, 5};
            o.max_blocks = caps[rt_below(&r, 4)];
            if (rt_below(&r, 2)) o.host_units = L.units;
            /* Half the cases aligned (so that 16-byte words can run), half misaligned. */
            int64_t mu = rt_below(&r, 2) ? 0 : rt_below(&r, 17), mp = rt_below(&r, 2) ? 0 : rt_below(&r, 17);
            if (cover_wide) mu = mp = 0;
            char *user_d = (char *)ud + mu + GUARD - lo_off;
            ops->to_dev(ud + mu, uh, ubytes);

            /* whole pack into a poisoned buffer */
            fill_random(&r, ph, pbytes);
            ops->to_dev(pd + mp, ph, (size_t)n + 2 * GUARD);
            if (run(&c, &Ld, &o, GDTE_DIR_PACK, user_d, pd + mp + GUARD, 0, n) != GDTE_OK) break;
            ops->to_host(pget, pd + mp, (size_t)n + 2 * GUARD);
            memcpy(pexp, ph, (size_t)n + 2 * GUARD);
            memcpy(pexp + GUARD, ref, (size_t)n);
            if (report(&c, "pack", 0, n, pget, pexp, (size_t)n + 2 * GUARD, -GUARD)) break;

            /* fragments, out of order, each at its own misalignment */
            int64_t offs[8], lens[8], at[8];
            int k = cut(&r, n, offs, lens);
            fill_random(&r, ph, pbytes);
            ops->to_dev(pd, ph, pbytes);
            memcpy(pexp, ph, pbytes);
            int64_t pos = 0;
            for (int i = 0; i < k; i++) {
                at[i] = slot_at(&r, pos, offs[i]);
                pos = at[i] + lens[i] + GUARD;
                memcpy(pexp + at[i], ref + offs[i], (size_t)lens[i]);
            }
            for (int i = 0; i < k; i++)
                if (run(&c, &Ld, &o, GDTE_DIR_PACK, user_d, pd + at[i], offs[i], lens[i]) != GDTE_OK) break;
            if (c.failed) break;
            ops->to_host(pget, pd, pbytes);
            if (report(&c, "pack fragments", offs[0], lens[0], pget, pexp, pbytes, 0)) break;

            if (!can_unpack) continue;
            /* whole unpack into a poisoned user buffer */
            fill_random(&r, uexp, ubytes);
            ops->to_dev(ud + mu, uexp, ubytes);
            ops->to_dev(pd + mp, ref, (size_t)n);
            if (run(&c, &Ld, &o, GDTE_DIR_UNPACK, user_d, pd + mp, 0, n) != GDTE_OK) break;
            ops->to_host(uget, ud + mu, ubytes);
            gdte_host_exec(&L, GDTE_DIR_UNPACK, (char *)uexp + GUARD - lo_off, ref, 0, n);
            if (report(&c, "unpack", 0, n, uget, uexp, ubytes, -GUARD + lo_off)) break;

            /* fragments, out of order */
            k = cut(&r, n, offs, lens);
            fill_random(&r, uexp, ubytes);
            ops->to_dev(ud + mu, uexp, ubytes);
            pos = 0;
            for (int i = 0; i < k; i++) {
                at[i] = slot_at(&r, pos, offs[i]);
                pos = at[i] + lens[i] + GUARD;
                ops->to_dev(pd + at[i], ref + offs[i], (size_t)lens[i]);
            }
            for (int i = 0; i < k; i++)
                if (run(&c, &Ld, &o, GDTE_DIR_UNPACK, user_d, pd + at[i], offs[i], lens[i]) != GDTE_OK) break;
            if (c.failed) break;
            ops->to_host(uget, ud + mu, ubytes);
            gdte_host_exec(&L, GDTE_DIR_UNPACK, (char *)uexp + GUARD - lo_off, ref, 0, n);
            if (report(&c, "unpack fragments", offs[0], lens[0], uget, uexp, ubytes, -GUARD + lo_off)) break;
        }
    }
out:
    gdte_gpu_exec_force_variant(GDTE_KVAR_NONE);
    gdte_gpu_exec_force_word(0);
    gdte_gpu_exec_force_wide(0);
    if (ud) ops->release(ud);
    if (pd) ops->release(pd);
    free(uh);
    free(uexp);
    free(uget);
    free(cov);
    free(ref);
    free(ones);
    free(ph);
    free(pget);
    free(pexp);
    if (c.failed) stats->failures++;
    return c.failed ? 1 : 0;
}

int kc_check_runs(const kc_ops_t *ops, gdte_type_h type, uint64_t seed, const char *desc, kc_stats_t *stats)
{
    const gdte_run_t *hr;
    const gdte_unit_t *hu;
    int64_t nr, us, nu;
    if (gdte_engine_runs(type, &hr, &nr, &us) != GDTE_OK || gdte_engine_units(type, &hu, &nu) != GDTE_OK) return 0;
    size_t ub = (size_t)nu * sizeof *hu, rb = (size_t)nr * sizeof *hr;
    char *dr = ops->alloc(rb), *du = ops->alloc(ub);
    unsigned char *got = malloc(ub);
    int fail = 0;
    memset(got, 0xa5, ub);
    ops->to_dev(du, got, ub); /* poison */
    ops->to_dev(dr, hr, rb);
    gdte_status_t st = gdte_gpu_expand_units((const gdte_run_t *)dr, nr, us, (gdte_unit_t *)du, NULL);
    if (st == GDTE_OK) st = ops->sync();
    ops->to_host(got, du, ub);
    if (st != GDTE_OK || memcmp(got, hu, ub)) {
        size_t i = 0;
        while (i < ub && got[i] == ((const unsigned char *)hu)[i]) i++;
        fprintf(stderr, "FAIL seed=0x%llx: units cut on the device differ from the host's at unit %lld (%s)\n  type: %s\n",
                (unsigned long long)seed, (long long)(i / sizeof *hu), gdte_status_name(st), desc);
        fail = 1;
        stats->failures++;
    }
    stats->runs_checked++;
    ops->release(dr);
    ops->release(du);
    free(got);
    return fail;
}

void kc_print_coverage(const kc_stats_t *s)
{
    printf("kernel launches by variant and word size:\n");
    for (int v = 1; v <= GDTE_KVAR_PERIODIC; v++) {
        if (v == GDTE_KVAR_COPY) continue;
        printf("  %-10s", kvar_name(v));
        for (int w = 0; w <= 16; w++)
            if (s->ran[v][w]) printf(" w%d:%lld", w, (long long)s->ran[v][w]);
        printf("\n");
    }
    printf("  of which ranges cutting a word:");
    for (int v = 1; v <= GDTE_KVAR_PERIODIC; v++)
        for (int w = 2; w <= 16; w++)
            if (s->cut[v][w]) printf(" %s/w%d:%lld", kvar_name(v), w, (long long)s->cut[v][w]);
    printf("\n  flat with 64-bit indices forced:");
    for (int w = 1; w <= 16; w++)
        if (s->flat_wide[w]) printf(" w%d:%lld", w, (long long)s->flat_wide[w]);
    printf("\n  flat by dimensions: 1:%lld 2:%lld 3+:%lld\n", (long long)s->flat_nd[1], (long long)s->flat_nd[2],
           (long long)s->flat_nd[3]);
    printf("cases %lld, failures %lld, bytes moved %lld, unpack skipped (overlapping types) %lld, "
           "plans cut from runs on the device %lld\n",
           (long long)s->cases, (long long)s->failures, (long long)s->bytes, (long long)s->skipped_unpack,
           (long long)s->runs_checked);
}

/* Bytes [lo_off, lo_off + *bytes) relative to the buffer pointer hold `count` elements of `type`. */
static int span_of(gdte_type_h type, int64_t count, int64_t *lo_off, size_t *bytes)
{
    gdte_type_info_t in;
    if (gdte_type_get_info(type, &in) != GDTE_OK) return 0;
    int64_t last = (count - 1) * in.extent;
    *lo_off = (last < 0 ? last : 0) + in.true_lb;
    int64_t hi_off = (last > 0 ? last : 0) + in.true_lb + in.true_extent;
    *bytes = (size_t)(hi_off - *lo_off) + 2 * GUARD;
    return 1;
}

/* Buffer-to-buffer copies of stream ranges, against the host executor (pack with Ls, unpack with
 * Ld): the whole stream, then random pieces that may cut words; poisoned destination and guards;
 * aligned and misaligned buffers. `units`: gdte_gpu_exec_copy_units over Ld_dev (Ls == Ld, one
 * UNITS layout), else gdte_gpu_exec_copy. Overlapping destinations are skipped. */
typedef struct copy_job {
    const gdte_layout_t *Ls, *Ld, *Ld_dev;
    int64_t slo, dlo, n;
    size_t sbytes, dbytes;
    int units;
} copy_job_t;

static int copy_cases(const kc_ops_t *ops, const copy_job_t *j, int64_t count, uint64_t seed, const char *desc,
                      kc_stats_t *stats)
{
    const int64_t n = j->n;
    ctx_t c = {ops, desc, seed, count, GDTE_KVAR_COPY, 0, 0, 0, stats, 0};
    rt_rng_t r = {seed ^ (j->units ? 0xc0b2 : 0xc0b1)};
    unsigned char *sh = malloc(j->sbytes), *dpo = malloc(j->dbytes), *dexp = malloc(j->dbytes);
    unsigned char *dget = malloc(j->dbytes), *cov = calloc(1, j->dbytes), *tmp = malloc((size_t)n);
    unsigned char *ones = malloc((size_t)n);
    unsigned char *sd = ops->alloc(j->sbytes + SLOT), *dd = ops->alloc(j->dbytes + SLOT);
    if (!sh || !dpo || !dexp || !dget || !cov || !tmp || !ones || !sd || !dd) {
        fprintf(stderr, "FAIL: out of memory for copy %s\n", desc);
        c.failed = 1;
        goto out;
    }
    /* An overlapping destination makes the order of writes matter: not a copy's business. */
    memset(ones, 0xff, (size_t)n);
    gdte_host_exec(j->Ld, GDTE_DIR_UNPACK, (char *)cov + GUARD - j->dlo, ones, 0, n);
    int64_t covered = 0;
    for (size_t i = 0; i < j->dbytes; i++) covered += cov[i] != 0;
    if (covered < n) goto out;
    fill_random(&r, sh, j->sbytes);
    for (int k = 0; k < 6 && !c.failed; k++) {
        int64_t off = 0, len = n;
        if (k > 0) {
            off = (int64_t)rt_below(&r, (uint64_t)n);
            len = 1 + (int64_t)rt_below(&r, (uint64_t)(n - off));
        }
        /* the unit copy's word follows the buffers' difference: congruent half the time */
        int64_t ms = rt_below(&r, 2) ? 0 : rt_below(&r, 17), md = rt_below(&r, 2) ? ms : rt_below(&r, 17);
        fill_random(&r, dpo, j->dbytes);
        memcpy(dexp, dpo, j->dbytes);
        gdte_host_exec(j->Ls, GDTE_DIR_PACK, (char *)sh + GUARD - j->slo, tmp, off, len);
        gdte_host_exec(j->Ld, GDTE_DIR_UNPACK, (char *)dexp + GUARD - j->dlo, tmp, off, len);
        ops->to_dev(sd + ms, sh, j->sbytes);
        ops->to_dev(dd + md, dpo, j->dbytes);
        stats->cases++;
        char *src = (char *)sd + ms + GUARD - j->slo, *dst = (char *)dd + md + GUARD - j->dlo;
        gdte_status_t st = j->units ? ops->copy_units(j->Ld_dev, src, dst, off, len)
                                    : ops->copy(j->Ls, src, j->Ld, dst, off, len);
        if (st != GDTE_OK) {
            fprintf(stderr, "FAIL seed=0x%llx %s [%lld,+%lld): %s\n  types: %s\n", (unsigned long long)seed,
                    j->units ? "copy_units" : "copy", (long long)off, (long long)len, gdte_status_name(st), desc);
            c.failed = 1;
            break;
        }
        note_run(&c, off, len);
        stats->bytes += len;
        ops->to_host(dget, dd + md, j->dbytes);
        if (report(&c, j->units ? "copy_units" : "copy", off, len, dget, dexp, j->dbytes, -GUARD + j->dlo)) break;
    }
out:
    if (sd) ops->release(sd);
    if (dd) ops->release(dd);
    free(sh);
    free(dpo);
    free(dexp);
    free(dget);
    free(cov);
    free(tmp);
    free(ones);
    if (c.failed) stats->failures++;
    return c.failed ? 1 : 0;
}

int kc_check_copy(const kc_ops_t *ops, gdte_type_h ts, int64_t cs, gdte_type_h td, int64_t cd, uint64_t seed,
                  const char *desc, kc_stats_t *stats)
{
    gdte_layout_t Ls, Ld;
    copy_job_t j = {&Ls, &Ld, &Ld, 0, 0, 0, 0, 0, 0};
    if (gdte_engine_layout(ts, cs, &Ls) != GDTE_OK || gdte_engine_layout(td, cd, &Ld) != GDTE_OK ||
        !span_of(ts, cs, &j.slo, &j.sbytes) || !span_of(td, cd, &j.dlo, &j.dbytes))
        return 0;
    int regular = (Ls.kind == GDTE_LAYOUT_KIND_CONTIG || Ls.kind == GDTE_LAYOUT_KIND_STRIDED) &&
                  (Ld.kind == GDTE_LAYOUT_KIND_CONTIG || Ld.kind == GDTE_LAYOUT_KIND_STRIDED);
    j.n = Ls.total < Ld.total ? Ls.total : Ld.total;
    if (!regular || j.n == 0) return 0;
    return copy_cases(ops, &j, cs, seed, desc, stats);
}

int kc_check_copy_units(const kc_ops_t *ops, gdte_type_h type, int64_t count, uint64_t seed, const char *desc,
                        kc_stats_t *stats)
{
    gdte_layout_t L, Ldev;
    copy_job_t j = {&L, &L, &Ldev, 0, 0, 0, 0, 0, 1};
    if (gdte_engine_layout(type, count, &L) != GDTE_OK || L.kind != GDTE_LAYOUT_KIND_UNITS || L.total == 0 ||
        !span_of(type, count, &j.slo, &j.sbytes))
        return 0;
    j.dlo = j.slo;
    j.dbytes = j.sbytes;
    j.n = L.total;
    Ldev = L;
    Ldev.units = ops->units(type, &L);
    return copy_cases(ops, &j, count, seed, desc, stats);
}
