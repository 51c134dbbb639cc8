/* Datatype objects: constructors, bounds, signatures, reference counting, the handle
 * registry and commit. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "type_internal.h"

static _Atomic int64_t live_types;

/* ---------------------------------------------------------------------------------------- */
/* Signatures: a polynomial hash over the sequence of basic elements, mod 2^64, which composes
 * under concatenation and repetition in O(log count), so a signature of any count is cheap. */
#define SIG_BASE 0x9e3779b97f4a7c15ull

static uint64_t sig_pow(uint64_t b, int64_t e)
{
    uint64_t r = 1;
    while (e > 0) {
        if (e & 1) r *= b;
        b *= b;
        e >>= 1;
    }
    return r;
}

/* concat(a, b) where b has nb elements */
static uint64_t sig_concat(uint64_t ha, uint64_t hb, int64_t nb) { return ha * sig_pow(SIG_BASE, nb) + hb; }

/* hash of k repetitions of (h, n): h * (1 + B^n + ... + B^{(k-1)n}) */
static uint64_t sig_repeat(uint64_t h, int64_t n, int64_t k)
{
    /* geometric sum by doubling: S(k) = 1 + x + ... + x^{k-1}, x = B^n */
    uint64_t x = sig_pow(SIG_BASE, n);
    uint64_t sum = 0, xp = 1;   /* result sum, and x^(len of result) */
    uint64_t bsum = 1, bx = x;  /* block of length 2^i: S(2^i), x^(2^i) */
    while (k > 0) {
        if (k & 1) {
            sum = sum * bx + bsum; /* append block: careful order keeps S the same either way */
            xp *= bx;
        }
        bsum = bsum * bx + bsum;
        bx *= bx;
        k >>= 1;
    }
    (void)xp;
    return h * sum;
}

/* For blocks of one child: S(k) = 1 + x + ... + x^(k-1) and x^k, x = B^(child's element
 * count), so block k of the child appends as h * x^k + child_hash * S(k) (the same value
 * sig_concat(h, sig_repeat(...)) gives). Small k come from a table built as needed; an
 * indexed type of a million short blocks then costs a multiply-add per block. */
#define SIG_TABLE 17
typedef struct sig_blocks {
    uint64_t x;
    int n; /* table entries filled */
    uint64_t S[SIG_TABLE], P[SIG_TABLE];
} sig_blocks_t;

static void sig_blocks_init(sig_blocks_t *sb, int64_t child_n)
{
    sb->x = sig_pow(SIG_BASE, child_n);
    sb->n = 1;
    sb->S[0] = 0;
    sb->P[0] = 1;
}

static void sig_blocks_get(sig_blocks_t *sb, int64_t k, uint64_t *S_p, uint64_t *P_p)
{
    if (k < SIG_TABLE) {
        for (; sb->n <= k; sb->n++) {
            sb->S[sb->n] = sb->S[sb->n - 1] + sb->P[sb->n - 1];
            sb->P[sb->n] = sb->P[sb->n - 1] * sb->x;
        }
        *S_p = sb->S[k];
        *P_p = sb->P[k];
        return;
    }
    uint64_t S = 0, P = 1, bs = 1, bp = sb->x; /* bs = S(2^i), bp = x^(2^i) */
    for (; k > 0; k >>= 1) {
        if (k & 1) {
            S = S * bp + bs;
            P *= bp;
        }
        bs = bs * bp + bs;
        bp *= bp;
    }
    *S_p = S;
    *P_p = P;
}

static uint64_t sig_basic(uint32_t tag)
{
    uint64_t z = (uint64_t)tag + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) | 1;
}

/* ---------------------------------------------------------------------------------------- */
/* Handles. A handle is (generation << SLOT_BITS) | slot, cast to gdte_type_h: never an
 * address. The registry's slots live in chunks that are never moved or freed, so resolving a
 * handle takes no lock: load the slot's generation, its object, and the generation again.
 * Destroying an object bumps its slot's generation before clearing the slot, so a stale
 * handle never matches again, whoever reuses the slot or the object's memory; a slot whose
 * generation would wrap is retired, never reused. Slots below GDTE_BASIC_COUNT_ name the
 * predefined types (generation 1, permanent); other slots start at generation 1. */
#define SLOT_BITS GDTE_HANDLE_SLOT_BITS
#define SLOT_COUNT (UINT64_C(1) << SLOT_BITS) /* live types at most */
#define GEN_MAX ((UINT64_C(1) << (64 - SLOT_BITS)) - 1)
#define CHUNK_BITS 12
#define CHUNK_SLOTS (1u << CHUNK_BITS)
#define NCHUNKS (SLOT_COUNT >> CHUNK_BITS)
#define NO_SLOT UINT32_MAX
_Static_assert(sizeof(gdte_type_h) == sizeof(uint64_t), "a handle holds a slot and a generation in 64 bits");

typedef struct hslot {
    _Atomic uint64_t gen;
    _Atomic(gdte_tobj_t *) obj;
    uint32_t next_free; /* free list, under registry_lock */
} hslot_t;

static _Atomic(hslot_t *) chunks[NCHUNKS];
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t slots_made = GDTE_BASIC_COUNT_; /* slots handed out at least once */
static uint32_t free_slots = NO_SLOT;            /* LIFO of slots to reuse */

static gdte_type_h make_handle(uint64_t slot, uint64_t gen)
{
    return (gdte_type_h)(uintptr_t)((gen << SLOT_BITS) | slot);
}

static hslot_t *slot_at(uint64_t slot)
{
    hslot_t *c = atomic_load_explicit(&chunks[slot >> CHUNK_BITS], memory_order_acquire);
    return c ? &c[slot & (CHUNK_SLOTS - 1)] : NULL;
}

/* Give `t` a slot and a handle, and make the handle resolve to it. */
static gdte_status_t slot_publish(gdte_tobj_t *t)
{
    pthread_mutex_lock(&registry_lock);
    uint32_t slot;
    hslot_t *s;
    if (free_slots != NO_SLOT) {
        slot = free_slots;
        s = slot_at(slot);
        free_slots = s->next_free;
    } else {
        if (slots_made == SLOT_COUNT) {
            pthread_mutex_unlock(&registry_lock);
            gdte_error("more than %llu live datatypes", (unsigned long long)SLOT_COUNT - GDTE_BASIC_COUNT_);
            return GDTE_ERR_NO_MEMORY;
        }
        slot = slots_made;
        if (!(s = slot_at(slot))) {
            hslot_t *c = calloc(CHUNK_SLOTS, sizeof *c);
            if (!c) {
                pthread_mutex_unlock(&registry_lock);
                return GDTE_ERR_NO_MEMORY;
            }
            for (uint32_t i = 0; i < CHUNK_SLOTS; i++) atomic_init(&c[i].gen, 1);
            atomic_store_explicit(&chunks[slot >> CHUNK_BITS], c, memory_order_release);
            s = &c[slot & (CHUNK_SLOTS - 1)];
        }
        slots_made++;
    }
    t->handle = make_handle(slot, atomic_load_explicit(&s->gen, memory_order_relaxed));
    atomic_store_explicit(&s->obj, t, memory_order_release);
    pthread_mutex_unlock(&registry_lock);
    live_types++;
    return GDTE_OK;
}

/* The slot stops naming `t`: its generation moves on first, then the object goes. */
static void slot_retire(gdte_tobj_t *t)
{
    uint64_t slot = gdte_handle_slot(t->handle), gen = gdte_handle_gen(t->handle);
    pthread_mutex_lock(&registry_lock);
    hslot_t *s = slot_at(slot);
    atomic_store_explicit(&s->gen, gen + 1, memory_order_release);
    atomic_store_explicit(&s->obj, NULL, memory_order_release);
    if (gen + 1 < GEN_MAX) { /* else the slot is worn out: never reused, so never ambiguous */
        s->next_free = free_slots;
        free_slots = (uint32_t)slot;
    }
    pthread_mutex_unlock(&registry_lock);
    live_types--;
}

static gdte_tobj_t predefined[GDTE_BASIC_COUNT_];
static pthread_once_t predefined_once = PTHREAD_ONCE_INIT;
static void predefined_init(void);

gdte_tobj_t *gdte_type_obj(gdte_type_h h)
{
    uint64_t slot = gdte_handle_slot(h), gen = gdte_handle_gen(h);
    if (gen == 1 && slot < GDTE_BASIC_COUNT_) {
        pthread_once(&predefined_once, predefined_init);
        return &predefined[slot];
    }
    hslot_t *s = gen ? slot_at(slot) : NULL;
    if (!s || atomic_load_explicit(&s->gen, memory_order_acquire) != gen) return NULL;
    gdte_tobj_t *t = atomic_load_explicit(&s->obj, memory_order_acquire);
    /* The slot may have been retired and reused between the loads: then the generation moved. */
    if (atomic_load_explicit(&s->gen, memory_order_acquire) != gen) return NULL;
    return t;
}

/* The object of a handle the user still holds (not freed by gdte_type_free). */
gdte_tobj_t *gdte_type_user_obj(gdte_type_h h)
{
    gdte_tobj_t *t = gdte_type_obj(h);
    return t && !atomic_load_explicit(&t->user_freed, memory_order_relaxed) ? t : NULL;
}

/* ---------------------------------------------------------------------------------------- */
static const int64_t predefined_size[GDTE_BASIC_COUNT_] = {1, 1, 1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 16, 8, 16};
/* The C alignment of each element (a complex number aligns like its parts); it decides the
 * padding of extents (see bounds_store). */
static const int32_t predefined_align[GDTE_BASIC_COUNT_] = {
    1, 1, 1, 1, 2, 2, 4, 4, _Alignof(int64_t), _Alignof(uint64_t), _Alignof(float), _Alignof(double),
    _Alignof(long double), _Alignof(float), _Alignof(double)};

/* Alignment assumed for an element of a size gdte does not know: the largest power of two
 * dividing the size, at most 16 (what C compilers give such elements on the targets we run). */
static int32_t size_align(int64_t size)
{
    int32_t a = 1;
    while (a < 16 && size % (2 * a) == 0) a *= 2;
    return a;
}

static void init_basic(gdte_tobj_t *t, int64_t size, uint32_t tag)
{
    t->kind = GDTE_NODE_BASIC;
    t->size = size;
    t->lb = 0;
    t->ub = size;
    t->true_lb = 0;
    t->true_ub = size;
    t->markers = 0;
    t->align = size_align(size);
    t->basic_tag = tag;
    t->sig_hash = sig_basic(tag);
    t->sig_n = 1;
    t->depth = 0;
}

static gdte_status_t commit_locked(gdte_tobj_t *t);

static void predefined_init(void)
{
    for (int i = 0; i < GDTE_BASIC_COUNT_; i++) {
        gdte_tobj_t *t = &predefined[i];
        init_basic(t, predefined_size[i], (uint32_t)i);
        t->align = predefined_align[i];
        t->predefined = 1;
        t->refcount = 1;
        t->handle = make_handle((uint64_t)i, 1);
        commit_locked(t);
    }
}

GDTE_API gdte_type_h gdte_type_predefined(gdte_basic_t basic)
{
    if ((int)basic < 0 || basic >= GDTE_BASIC_COUNT_) return NULL;
    pthread_once(&predefined_once, predefined_init);
    return predefined[basic].handle;
}

gdte_status_t gdte_type_check(gdte_type_h h) { return gdte_type_user_obj(h) ? GDTE_OK : GDTE_ERR_INVALID_TYPE; }

static void obj_retain(gdte_tobj_t *t)
{
    if (!t->predefined) atomic_fetch_add(&t->refcount, 1);
}

/* Drop one reference. Destroying a type drops its children's references, which may destroy
 * them too: those go on a work list threaded through the objects, so a chain of any length
 * is released in constant stack. An object a constructor gave up on was never published
 * (no handle): it goes the same way. */
static void obj_release(gdte_tobj_t *t)
{
    if (!t || t->predefined || atomic_fetch_sub(&t->refcount, 1) != 1) return;
    t->next_dead = NULL;
    while (t) {
        gdte_tobj_t *d = t;
        t = d->next_dead;
        if (d->handle) slot_retire(d);
        if (d->backend_free && d->backend_slot) d->backend_free(d->backend_slot);
        gdte_plan_release(d->plan);
        int64_t nc = d->children ? d->count : d->child ? 1 : 0;
        for (int64_t i = 0; i < nc; i++) {
            gdte_tobj_t *c = d->children ? d->children[i] : d->child;
            if (c && !c->predefined && atomic_fetch_sub(&c->refcount, 1) == 1) {
                c->next_dead = t;
                t = c;
            }
        }
        free(d->children);
        free(d->blocklens);
        free(d->displs);
        free(d);
    }
}

void gdte_type_retain(gdte_type_h h)
{
    gdte_tobj_t *t = gdte_type_obj(h);
    if (t) obj_retain(t);
}

void gdte_type_release(gdte_type_h h) { obj_release(gdte_type_obj(h)); }

static gdte_tobj_t *type_new(gdte_node_kind_t kind)
{
    gdte_tobj_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->refcount = 1;
    return t;
}

/* ---------------------------------------------------------------------------------------- */
/* Bounds as MPI defines them over the type map: explicit markers (from resized) of every
 * copied child decide lb/ub when there are any; otherwise lb/ub come from the data itself,
 * never from the children's padded bounds, and ub is padded once for the whole type. */
typedef struct bounds {
    int64_t mlb, mub;  /* markers */
    int64_t tlb, tub;  /* data */
    int any_markers;   /* some copied child has markers */
    int any_data;      /* some data (size > 0) */
    int32_t align;     /* largest alignment of the data's elements */
} bounds_t;

/* Add `bl` consecutive copies of child `c`, the first at byte displacement d. */
static gdte_status_t bounds_add_block(bounds_t *b, int64_t d, int64_t bl, const gdte_tobj_t *c)
{
    if (bl == 0) return GDTE_OK;
    int64_t E = gdte_type_extent_(c), span, lo, hi;
    if (gdte_mul_ovf(bl - 1, E, &span)) return GDTE_ERR_OVERFLOW;
    int64_t smin = span < 0 ? span : 0, smax = span > 0 ? span : 0;
    if (gdte_add_ovf(d, smin, &lo) || gdte_add_ovf(d, smax, &hi)) return GDTE_ERR_OVERFLOW;
    int64_t l, u;
    if (c->markers) {
        if (gdte_add_ovf(lo, c->lb, &l) || gdte_add_ovf(hi, c->ub, &u)) return GDTE_ERR_OVERFLOW;
        if (!b->any_markers || l < b->mlb) b->mlb = l;
        if (!b->any_markers || u > b->mub) b->mub = u;
        b->any_markers = 1;
    }
    if (c->size > 0) {
        if (gdte_add_ovf(lo, c->true_lb, &l) || gdte_add_ovf(hi, c->true_ub, &u)) return GDTE_ERR_OVERFLOW;
        if (!b->any_data || l < b->tlb) b->tlb = l;
        if (!b->any_data || u > b->tub) b->tub = u;
        b->any_data = 1;
        if (c->align > b->align) b->align = c->align;
    }
    return GDTE_OK;
}

static gdte_status_t bounds_store(gdte_tobj_t *t, const bounds_t *b)
{
    t->true_lb = b->any_data ? b->tlb : 0;
    t->true_ub = b->any_data ? b->tub : 0;
    t->align = b->align > 0 ? b->align : 1;
    t->markers = b->any_markers;
    if (b->any_markers) {
        t->lb = b->mlb;
        t->ub = b->mub;
    } else if (b->any_data) {
        /* epsilon: the least increment making the extent a multiple of the alignment */
        int64_t ext;
        if (gdte_sub_ovf(b->tub, b->tlb, &ext)) return GDTE_ERR_OVERFLOW;
        int64_t eps = (t->align - ext % t->align) % t->align;
        t->lb = b->tlb;
        if (gdte_add_ovf(b->tub, eps, &t->ub)) return GDTE_ERR_OVERFLOW;
    } else {
        t->lb = t->ub = 0; /* empty type map */
    }
    return GDTE_OK;
}

/* The object of a handle a constructor was given. */
static gdte_status_t get_old(gdte_type_h h, gdte_tobj_t **o_p)
{
    return (*o_p = gdte_type_user_obj(h)) ? GDTE_OK : GDTE_ERR_INVALID_TYPE;
}

/* Byte displacements, strides, lb and extent from the caller: INT64_MIN has no negation. */
static int bytes_ok(int64_t v) { return v != INT64_MIN; }

static void log_depth_once(void)
{
    static _Atomic int logged;
    if (!atomic_exchange(&logged, 1))
        gdte_error("datatype nesting deeper than GDTE_MAX_TYPE_DEPTH (%d levels): GDTE_ERR_UNSUPPORTED",
                   GDTE_MAX_TYPE_DEPTH);
}

/* Publish `t` (st == GDTE_OK) after the checks every new type passes, or undo it. */
static gdte_status_t finish(gdte_tobj_t *t, gdte_status_t st, gdte_type_h *type_p)
{
    int64_t ext;
    if (st == GDTE_OK && t->depth > GDTE_MAX_TYPE_DEPTH) {
        log_depth_once();
        st = GDTE_ERR_UNSUPPORTED;
    }
    /* Every bound above INT64_MIN and every extent representable: whatever reads them may
     * negate or subtract them without overflow. */
    if (st == GDTE_OK && (t->lb == INT64_MIN || t->true_lb == INT64_MIN || t->ub == INT64_MIN ||
                          t->true_ub == INT64_MIN || gdte_sub_ovf(t->ub, t->lb, &ext) || ext == INT64_MIN ||
                          gdte_sub_ovf(t->true_ub, t->true_lb, &ext)))
        st = GDTE_ERR_OVERFLOW;
    if (st == GDTE_OK) st = slot_publish(t);
    if (st != GDTE_OK) {
        obj_release(t); /* not published: frees it and drops what it holds */
        return st;
    }
    *type_p = t->handle;
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_type_create_basic(int64_t size, uint32_t tag, gdte_type_h *type_p)
{
    if (!type_p) return GDTE_ERR_INVALID_ARG;
    if (size < 1 || size > (1 << 20)) return GDTE_ERR_INVALID_ARG;
    gdte_tobj_t *t = type_new(GDTE_NODE_BASIC);
    if (!t) return GDTE_ERR_NO_MEMORY;
    init_basic(t, size, tag + 0x10000u); /* keep custom tags apart from predefined ones */
    return finish(t, GDTE_OK, type_p);
}

GDTE_API gdte_status_t gdte_type_create_hvector(int64_t count, int64_t blocklength, int64_t stride,
                                                gdte_type_h old_h, gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if (!type_p) return GDTE_ERR_INVALID_ARG;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    if (count < 0 || blocklength < 0) return GDTE_ERR_COUNT;
    if (!bytes_ok(stride)) return GDTE_ERR_INVALID_ARG;
    gdte_tobj_t *t = type_new(GDTE_NODE_HVECTOR);
    if (!t) return GDTE_ERR_NO_MEMORY;
    obj_retain(old);
    t->child = old;
    t->count = count;
    t->blocklen = blocklength;
    t->stride = stride;
    t->depth = old->depth + 1;
    int64_t n, tmp;
    if (gdte_mul_ovf(count, blocklength, &n) || gdte_mul_ovf(n, old->size, &t->size) ||
        gdte_mul_ovf(n, old->sig_n, &t->sig_n))
        return finish(t, GDTE_ERR_OVERFLOW, type_p);
    t->sig_hash = n ? sig_repeat(old->sig_hash, old->sig_n, n) : 0;
    bounds_t b = {0};
    if (count > 0 && blocklength > 0) {
        if (gdte_mul_ovf(count - 1, stride, &tmp)) return finish(t, GDTE_ERR_OVERFLOW, type_p);
        if ((st = bounds_add_block(&b, 0, blocklength, old)) != GDTE_OK ||
            (st = bounds_add_block(&b, tmp, blocklength, old)) != GDTE_OK)
            return finish(t, st, type_p);
    }
    return finish(t, bounds_store(t, &b), type_p);
}

GDTE_API gdte_status_t gdte_type_create_vector(int64_t count, int64_t blocklength, int64_t stride,
                                               gdte_type_h old_h, gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    int64_t s;
    if (gdte_mul_ovf(stride, gdte_type_extent_(old), &s)) return GDTE_ERR_OVERFLOW;
    return gdte_type_create_hvector(count, blocklength, s, old_h, type_p);
}

GDTE_API gdte_status_t gdte_type_create_contiguous(int64_t count, gdte_type_h old_h, gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    return gdte_type_create_hvector(count, 1, gdte_type_extent_(old), old_h, type_p);
}

/* HINDEXED and STRUCT: one builder. `children` NULL means every block uses `old`. */
static gdte_status_t create_blocks(gdte_node_kind_t kind, int64_t count, const int64_t *bls, int64_t bl_all,
                                   const int64_t *displs, int64_t displ_unit, gdte_type_h old_h,
                                   const gdte_type_h *children, gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old = NULL, *c;
    if (!type_p) return GDTE_ERR_INVALID_ARG;
    if (count < 0) return GDTE_ERR_COUNT;
    if (count > 0 && (!displs || (!bls && bl_all < 0) || (kind == GDTE_NODE_STRUCT && !children)))
        return GDTE_ERR_INVALID_ARG;
    if (kind != GDTE_NODE_STRUCT && (st = get_old(old_h, &old)) != GDTE_OK) return st;
    if (bl_all < -1) return GDTE_ERR_COUNT;
    for (int64_t i = 0; i < count; i++) {
        if (bls && bls[i] < 0) return GDTE_ERR_COUNT;
        if (kind == GDTE_NODE_STRUCT && (st = get_old(children[i], &c)) != GDTE_OK) return st;
    }
    if (count > 0 && (size_t)count > SIZE_MAX / sizeof(int64_t)) return GDTE_ERR_NO_MEMORY;
    gdte_tobj_t *t = type_new(kind);
    if (!t) return GDTE_ERR_NO_MEMORY;
    t->count = count;
    size_t n = count > 0 ? (size_t)count : 1;
    t->blocklens = malloc(n * sizeof(int64_t));
    t->displs = malloc(n * sizeof(int64_t));
    if (kind == GDTE_NODE_STRUCT) t->children = calloc(n, sizeof(*t->children));
    if (!t->blocklens || !t->displs || (kind == GDTE_NODE_STRUCT && !t->children)) {
        t->count = 0; /* no children to release */
        return finish(t, GDTE_ERR_NO_MEMORY, type_p);
    }
    if (kind == GDTE_NODE_STRUCT) {
        t->depth = 0;
        for (int64_t i = 0; i < count; i++) {
            c = gdte_type_obj(children[i]);
            obj_retain(c);
            t->children[i] = c;
            if (c->depth + 1 > t->depth) t->depth = c->depth + 1;
        }
    } else {
        obj_retain(old);
        t->child = old;
        t->depth = old->depth + 1;
    }
    bounds_t b = {0};
    t->size = 0;
    t->sig_n = 0;
    t->sig_hash = 0;
    sig_blocks_t sb;
    sig_blocks_init(&sb, kind != GDTE_NODE_STRUCT ? old->sig_n : 0);
    for (int64_t i = 0; i < count; i++) {
        c = kind == GDTE_NODE_STRUCT ? t->children[i] : old;
        int64_t bl = bls ? bls[i] : bl_all, d, sz, sn;
        if (gdte_mul_ovf(displs[i], displ_unit, &d)) return finish(t, GDTE_ERR_OVERFLOW, type_p);
        if (!bytes_ok(d)) return finish(t, GDTE_ERR_INVALID_ARG, type_p);
        t->blocklens[i] = bl;
        t->displs[i] = d;
        if (gdte_mul_ovf(bl, c->size, &sz) || gdte_add_ovf(t->size, sz, &t->size) ||
            gdte_mul_ovf(bl, c->sig_n, &sn))
            return finish(t, GDTE_ERR_OVERFLOW, type_p);
        if (sn && kind == GDTE_NODE_STRUCT) {
            t->sig_hash = sig_concat(t->sig_hash, sig_repeat(c->sig_hash, c->sig_n, bl), sn);
        } else if (sn) {
            uint64_t S, P;
            sig_blocks_get(&sb, bl, &S, &P);
            t->sig_hash = t->sig_hash * P + c->sig_hash * S;
        }
        if (gdte_add_ovf(t->sig_n, sn, &t->sig_n)) return finish(t, GDTE_ERR_OVERFLOW, type_p);
        if ((st = bounds_add_block(&b, d, bl, c)) != GDTE_OK) return finish(t, st, type_p);
    }
    return finish(t, bounds_store(t, &b), type_p);
}

GDTE_API gdte_status_t gdte_type_create_hindexed(int64_t count, const int64_t *blocklengths,
                                                 const int64_t *displacements, gdte_type_h old,
                                                 gdte_type_h *type_p)
{
    if (count > 0 && !blocklengths) return GDTE_ERR_INVALID_ARG;
    return create_blocks(GDTE_NODE_HINDEXED, count, blocklengths, -1, displacements, 1, old, NULL, type_p);
}

GDTE_API gdte_status_t gdte_type_create_indexed(int64_t count, const int64_t *blocklengths,
                                                const int64_t *displacements, gdte_type_h old_h,
                                                gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    if (count > 0 && !blocklengths) return GDTE_ERR_INVALID_ARG;
    return create_blocks(GDTE_NODE_HINDEXED, count, blocklengths, -1, displacements,
                         gdte_type_extent_(old), old_h, NULL, type_p);
}

GDTE_API gdte_status_t gdte_type_create_hindexed_block(int64_t count, int64_t blocklength,
                                                       const int64_t *displacements, gdte_type_h old,
                                                       gdte_type_h *type_p)
{
    if (blocklength < 0) return GDTE_ERR_COUNT;
    return create_blocks(GDTE_NODE_HINDEXED, count, NULL, blocklength, displacements, 1, old, NULL, type_p);
}

GDTE_API gdte_status_t gdte_type_create_indexed_block(int64_t count, int64_t blocklength,
                                                      const int64_t *displacements, gdte_type_h old_h,
                                                      gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    if (blocklength < 0) return GDTE_ERR_COUNT;
    return create_blocks(GDTE_NODE_HINDEXED, count, NULL, blocklength, displacements,
                         gdte_type_extent_(old), old_h, NULL, type_p);
}

GDTE_API gdte_status_t gdte_type_create_struct(int64_t count, const int64_t *blocklengths,
                                               const int64_t *displacements, const gdte_type_h *types,
                                               gdte_type_h *type_p)
{
    if (count > 0 && !blocklengths) return GDTE_ERR_INVALID_ARG;
    return create_blocks(GDTE_NODE_STRUCT, count, blocklengths, -1, displacements, 1, NULL, types, type_p);
}

GDTE_API gdte_status_t gdte_type_create_resized(gdte_type_h old_h, int64_t lb, int64_t extent, gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if (!type_p) return GDTE_ERR_INVALID_ARG;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    if (!bytes_ok(lb) || !bytes_ok(extent)) return GDTE_ERR_INVALID_ARG;
    gdte_tobj_t *t = type_new(GDTE_NODE_RESIZED);
    if (!t) return GDTE_ERR_NO_MEMORY;
    obj_retain(old);
    t->child = old;
    t->depth = old->depth + 1;
    t->size = old->size;
    t->sig_hash = old->sig_hash;
    t->sig_n = old->sig_n;
    t->true_lb = old->true_lb;
    t->true_ub = old->true_ub;
    t->align = old->align;
    t->markers = 1; /* resized erases the old markers and sets its own */
    t->lb = lb;
    if (gdte_add_ovf(lb, extent, &t->ub)) return finish(t, GDTE_ERR_OVERFLOW, type_p);
    return finish(t, GDTE_OK, type_p);
}

GDTE_API gdte_status_t gdte_type_dup(gdte_type_h old_h, gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if (!type_p) return GDTE_ERR_INVALID_ARG;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    gdte_tobj_t *t = type_new(GDTE_NODE_DUP);
    if (!t) return GDTE_ERR_NO_MEMORY;
    /* A dup of a dup is a dup of the same type map: every dup hangs off a type that is not
     * one, so dups never chain and committing one is O(1), in whatever order. */
    gdte_tobj_t *base = old->kind == GDTE_NODE_DUP ? old->child : old;
    obj_retain(base);
    t->child = base;
    t->depth = old->depth; /* a dup adds no level of description */
    t->size = old->size;
    t->lb = old->lb;
    t->ub = old->ub;
    t->true_lb = old->true_lb;
    t->true_ub = old->true_ub;
    t->align = old->align;
    t->markers = old->markers;
    t->sig_hash = old->sig_hash;
    t->sig_n = old->sig_n;
    st = finish(t, GDTE_OK, type_p);
    /* MPI: a dup of a committed type is committed. It shares its child's plan (O(1)). */
    if (st == GDTE_OK && old->committed) gdte_type_commit(*type_p);
    return st;
}

/* ---------------------------------------------------------------------------------------- */
/* Subarray and darray are built from the nodes above, following MPI's definitions; the
 * canonical form then flattens them into strided dimensions. */

/* Wrap `t` (consumed) so its data starts at byte `disp` and its bounds are [0, extent). */
static gdte_status_t place_and_resize(gdte_type_h t, int64_t disp, int64_t extent, gdte_type_h *type_p)
{
    gdte_type_h placed, out;
    int64_t one = 1;
    gdte_status_t st = gdte_type_create_hindexed(1, &one, &disp, t, &placed);
    gdte_type_free(&t);
    if (st != GDTE_OK) return st;
    st = gdte_type_create_resized(placed, 0, extent, &out);
    gdte_type_free(&placed);
    if (st == GDTE_OK) *type_p = out;
    return st;
}

GDTE_API gdte_status_t gdte_type_create_subarray(int ndims, const int64_t *sizes, const int64_t *subsizes,
                                                 const int64_t *starts, gdte_order_t order, gdte_type_h old_h,
                                                 gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if (!type_p || ndims < 1 || ndims > 64 || !sizes || !subsizes || !starts) return GDTE_ERR_INVALID_ARG;
    if (order != GDTE_ORDER_C && order != GDTE_ORDER_FORTRAN) return GDTE_ERR_INVALID_ARG;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    for (int d = 0; d < ndims; d++) {
        if (sizes[d] < 1 || subsizes[d] < 0 || starts[d] < 0) return GDTE_ERR_COUNT;
        if (subsizes[d] > sizes[d] || starts[d] > sizes[d] - subsizes[d]) return GDTE_ERR_INVALID_ARG;
    }
    int64_t stride = gdte_type_extent_(old), disp = 0, tmp;
    gdte_type_h cur = old_h, next;
    obj_retain(old);
    for (int k = 0; k < ndims; k++) {
        int d = order == GDTE_ORDER_C ? ndims - 1 - k : k; /* fastest dimension first */
        st = gdte_type_create_hvector(subsizes[d], 1, stride, cur, &next);
        gdte_type_release(cur);
        if (st != GDTE_OK) return st;
        cur = next;
        if (gdte_mul_ovf(starts[d], stride, &tmp) || gdte_add_ovf(disp, tmp, &disp) ||
            gdte_mul_ovf(stride, sizes[d], &stride)) {
            gdte_type_release(cur);
            return GDTE_ERR_OVERFLOW;
        }
    }
    return place_and_resize(cur, disp, stride, type_p);
}

/* One dimension of a darray: the indices (0..g-1) that process coordinate c of p owns, as
 * `nfull` blocks of `b` indices `step` apart from index `first`, then `rem` indices more. */
typedef struct darray_dim {
    int64_t first, b, nfull, step, rem;
} darray_dim_t;

static darray_dim_t darray_dim(gdte_distribute_t dist, int64_t g, int64_t p, int64_t c, int64_t darg)
{
    darray_dim_t r = {0, 1, 0, 0, 0};
    if (dist == GDTE_DISTRIBUTE_NONE) {
        r.b = g;
        r.nfull = 1;
        return r;
    }
    if (dist == GDTE_DISTRIBUTE_BLOCK) {
        r.b = darg == GDTE_DISTRIBUTE_DFLT_DARG ? g / p + (g % p != 0) : darg;
        if (gdte_mul_ovf(c, r.b, &r.first) || r.first >= g) return (darray_dim_t){0, 1, 0, 0, 0};
        if (r.b > g - r.first) r.b = g - r.first;
        r.nfull = 1;
        return r;
    }
    /* CYCLIC, as MPI defines it: blocks of b, dealt round-robin; the last may be short. */
    r.b = darg == GDTE_DISTRIBUTE_DFLT_DARG ? 1 : darg;
    if (gdte_mul_ovf(c, r.b, &r.first) || r.first >= g) return (darray_dim_t){0, 1, 0, 0, 0};
    int64_t avail = g - r.first, left;
    if (gdte_mul_ovf(r.b, p, &r.step) || r.step > avail) { /* one block at most */
        r.nfull = 0;
        left = avail;
    } else {
        r.nfull = avail / r.step;
        left = avail % r.step;
    }
    if (left >= r.b) r.nfull++;
    else r.rem = left;
    return r;
}

GDTE_API gdte_status_t gdte_type_create_darray(int size, int rank, int ndims, const int64_t *gsizes,
                                               const gdte_distribute_t *distribs, const int64_t *dargs,
                                               const int64_t *psizes, gdte_order_t order, gdte_type_h old_h,
                                               gdte_type_h *type_p)
{
    gdte_status_t st;
    gdte_tobj_t *old;
    if (!type_p || ndims < 1 || ndims > 64 || !gsizes || !distribs || !dargs || !psizes) return GDTE_ERR_INVALID_ARG;
    if (size < 1 || rank < 0 || rank >= size) return GDTE_ERR_INVALID_ARG;
    if (order != GDTE_ORDER_C && order != GDTE_ORDER_FORTRAN) return GDTE_ERR_INVALID_ARG;
    if ((st = get_old(old_h, &old)) != GDTE_OK) return st;
    /* Every argument is checked before anything is built. Once the whole array's extent
     * (old's extent times every gsize) fits, no offset inside it can overflow. */
    int64_t nprocs = 1, array_extent = gdte_type_extent_(old), cover;
    for (int d = 0; d < ndims; d++) {
        if (gsizes[d] < 1 || psizes[d] < 1) return GDTE_ERR_INVALID_ARG;
        if (distribs[d] != GDTE_DISTRIBUTE_NONE && distribs[d] != GDTE_DISTRIBUTE_BLOCK &&
            distribs[d] != GDTE_DISTRIBUTE_CYCLIC)
            return GDTE_ERR_INVALID_ARG;
        if (distribs[d] == GDTE_DISTRIBUTE_NONE && psizes[d] != 1) return GDTE_ERR_INVALID_ARG;
        if (dargs[d] != GDTE_DISTRIBUTE_DFLT_DARG && dargs[d] < 1) return GDTE_ERR_INVALID_ARG;
        /* The process grid must have `size` processes: a product past `size` is wrong before it
         * can overflow. */
        if (psizes[d] > size / nprocs) return GDTE_ERR_INVALID_ARG;
        nprocs *= psizes[d];
        /* MPI: blocks of darg must cover the dimension (a product past 2^63 covers it). */
        if (distribs[d] == GDTE_DISTRIBUTE_BLOCK && dargs[d] != GDTE_DISTRIBUTE_DFLT_DARG &&
            !gdte_mul_ovf(dargs[d], psizes[d], &cover) && cover < gsizes[d])
            return GDTE_ERR_INVALID_ARG;
        if (gdte_mul_ovf(array_extent, gsizes[d], &array_extent)) return GDTE_ERR_OVERFLOW;
    }
    if (nprocs != size) return GDTE_ERR_INVALID_ARG;
    /* Process coordinates: row-major over psizes, whatever the array order (MPI). */
    int64_t coord[64], r = rank;
    for (int d = ndims - 1; d >= 0; d--) {
        coord[d] = r % psizes[d];
        r /= psizes[d];
    }
    /* Per dimension, fastest first: each index `stride` bytes apart, the owned indices as one
     * hvector of full blocks plus the short last block (a struct of at most two members), so
     * the description is as large as the arguments, never as the number of blocks. */
    int64_t stride = gdte_type_extent_(old);
    gdte_type_h cur = old_h, next = NULL, sized, vec = NULL;
    obj_retain(old);
    for (int k = 0; k < ndims; k++) {
        int d = order == GDTE_ORDER_C ? ndims - 1 - k : k;
        darray_dim_t dd = darray_dim(distribs[d], gsizes[d], psizes[d], coord[d], dargs[d]);
        st = gdte_type_create_resized(cur, 0, stride, &sized);
        gdte_type_release(cur);
        if (st != GDTE_OK) return st;
        /* Offsets below are of owned indices (< gsizes[d]): they fit in the array's extent. */
        int64_t bl[2], disp[2], n = 0;
        gdte_type_h member[2];
        if (dd.nfull > 0) {
            st = dd.nfull == 1 ? gdte_type_create_contiguous(dd.b, sized, &vec)
                               : gdte_type_create_hvector(dd.nfull, dd.b, dd.step * stride, sized, &vec);
            if (st != GDTE_OK) {
                gdte_type_release(sized);
                return st;
            }
            member[n] = vec;
            bl[n] = 1;
            disp[n++] = dd.first * stride;
        }
        if (dd.rem > 0) {
            member[n] = sized;
            bl[n] = dd.rem;
            disp[n++] = (dd.first + dd.nfull * dd.step) * stride;
        }
        st = gdte_type_create_struct(n, bl, disp, member, &next);
        if (dd.nfull > 0) gdte_type_release(vec);
        gdte_type_release(sized);
        if (st != GDTE_OK) return st;
        cur = next;
        stride *= gsizes[d]; /* fits: array_extent did */
    }
    return place_and_resize(cur, 0, stride, type_p);
}

/* ---------------------------------------------------------------------------------------- */
static pthread_mutex_t commit_lock = PTHREAD_MUTEX_INITIALIZER;

/* Commit with commit_lock held. A dup has its child's type map (and its child is no dup): it
 * shares the child's plan, built there if the child has none yet. */
static gdte_status_t commit_locked(gdte_tobj_t *t)
{
    if (t->committed) return GDTE_OK;
    gdte_tobj_t *base = t->kind == GDTE_NODE_DUP ? t->child : t;
    if (!base->plan) {
        gdte_ir_t ir;
        gdte_status_t st = gdte_ir_build(base, &ir);
        if (st != GDTE_OK) return st;
        st = gdte_plan_build(&ir, gdte_knob(GDTE_KNOB_DEV_UNIT), &base->plan);
        gdte_ir_free(&ir);
        if (st != GDTE_OK) return st;
    }
    if (t != base) {
        atomic_fetch_add(&base->plan->refs, 1);
        t->plan = base->plan;
    }
    t->committed = 1;
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_type_commit(gdte_type_h type)
{
    gdte_tobj_t *t = gdte_type_user_obj(type);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (t->committed) return GDTE_OK;
    pthread_mutex_lock(&commit_lock);
    gdte_status_t st = commit_locked(t);
    pthread_mutex_unlock(&commit_lock);
    if (st != GDTE_OK) gdte_warn("type commit failed: %s", gdte_status_string(st));
    return st;
}

GDTE_API gdte_status_t gdte_type_free(gdte_type_h *type_p)
{
    if (!type_p) return GDTE_ERR_INVALID_ARG;
    gdte_tobj_t *t = gdte_type_obj(*type_p);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (t->predefined) {
        *type_p = NULL;
        return GDTE_OK;
    }
    int was_live = 0;
    if (!atomic_compare_exchange_strong(&t->user_freed, &was_live, 1)) return GDTE_ERR_INVALID_TYPE;
    *type_p = NULL;
    obj_release(t);
    return GDTE_OK;
}

/* Internal references (parents, operations) may outlive the user's handle; a parent's
 * reference is not a user handle, so it is not flagged freed. gdte_type_release is used for
 * those; gdte_type_free only for the caller's own handle. Constructors above that build
 * temporaries use gdte_type_free on handles they created themselves. */

GDTE_API gdte_status_t gdte_type_get_info(gdte_type_h h, gdte_type_info_t *info_p)
{
    gdte_tobj_t *t = gdte_type_user_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (!info_p) return GDTE_ERR_INVALID_ARG;
    gdte_type_info_t in;
    memset(&in, 0, sizeof in);
    in.size = t->size;
    in.extent = t->ub - t->lb;
    in.lb = t->lb;
    in.true_lb = t->true_lb;
    in.true_extent = t->true_ub - t->true_lb;
    in.depth = t->depth;
    in.committed = t->committed;
    if (t->committed) {
        const gdte_plan_t *p = t->plan;
        in.num_blocks = p->nblocks;
        in.layout = (gdte_layout_kind_t)p->kind;
        in.ndims = p->ndims;
        in.block_bytes = p->blocklen;
        in.num_units = p->nunits;
        in.plan_bytes = p->bytes;
        in.is_contiguous = (p->kind == GDTE_LAYOUT_KIND_CONTIG && p->disp == 0 && in.extent == t->size) ||
                           (p->kind == GDTE_LAYOUT_KIND_EMPTY && in.extent == 0);
    } else {
        gdte_ir_t ir;
        gdte_status_t st = gdte_ir_build(t, &ir);
        if (st != GDTE_OK) return st;
        in.num_blocks = gdte_ir_nblocks(&ir);
        in.is_contiguous = (ir.nsegs == 1 && ir.nouter == 0 && ir.segs[0].nd == 0 && ir.segs[0].disp == 0 &&
                            in.extent == t->size) || (ir.nsegs == 0 && in.extent == 0);
        gdte_ir_free(&ir);
    }
    *info_p = in;
    return GDTE_OK;
}

gdte_status_t gdte_type_bounds(gdte_type_h h, gdte_bounds_t *b)
{
    gdte_tobj_t *t = gdte_type_user_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    *b = (gdte_bounds_t){t->size, t->lb, t->ub - t->lb, t->true_lb, t->true_ub - t->true_lb};
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_type_pack_size(int64_t count, gdte_type_h h, int64_t *size_p)
{
    gdte_tobj_t *t = gdte_type_user_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (!size_p) return GDTE_ERR_INVALID_ARG;
    if (count < 0) return GDTE_ERR_COUNT;
    int64_t s;
    if (gdte_mul_ovf(count, t->size, &s)) return GDTE_ERR_OVERFLOW;
    *size_p = s;
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_type_signature(int64_t count, gdte_type_h h, uint64_t *hash_p, int64_t *nelems_p)
{
    gdte_tobj_t *t = gdte_type_user_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (count < 0) return GDTE_ERR_COUNT;
    int64_t n;
    if (gdte_mul_ovf(count, t->sig_n, &n)) return GDTE_ERR_OVERFLOW;
    if (hash_p) *hash_p = n ? sig_repeat(t->sig_hash, t->sig_n, count) : 0;
    if (nelems_p) *nelems_p = n;
    return GDTE_OK;
}

GDTE_API gdte_status_t gdte_type_describe(gdte_type_h h, char *buf, size_t len)
{
    gdte_tobj_t *t = gdte_type_user_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (!buf || !len) return GDTE_ERR_INVALID_ARG;
    if (!t->committed) {
        snprintf(buf, len, "uncommitted (size %lld, extent %lld)", (long long)t->size, (long long)(t->ub - t->lb));
        return GDTE_OK;
    }
    gdte_plan_describe(t->plan, buf, len);
    return GDTE_OK;
}

/* The calls below serve other layers, which may hold a type after the user freed its handle
 * (operations in flight): they resolve without the user_freed check. */
void *gdte_type_backend_slot(gdte_type_h h)
{
    gdte_tobj_t *t = gdte_type_obj(h);
    return t ? t->backend_slot : NULL;
}

void gdte_type_set_backend_slot(gdte_type_h h, void *slot, void (*free_fn)(void *))
{
    gdte_tobj_t *t = gdte_type_obj(h);
    if (!t) return;
    t->backend_slot = slot;
    t->backend_free = free_fn;
}

uint64_t gdte_type_uid(gdte_type_h h)
{
    gdte_tobj_t *t = gdte_type_obj(h);
    return t ? (uint64_t)(uintptr_t)t->handle : 0; /* (slot, generation): never named again */
}

int64_t gdte_engine_live_types(void) { return live_types; }

gdte_status_t gdte_engine_units(gdte_type_h h, const gdte_unit_t **units_p, int64_t *nunits_p)
{
    gdte_tobj_t *t = gdte_type_obj(h);
    if (!t) return GDTE_ERR_INVALID_TYPE;
    if (!t->committed) return GDTE_ERR_NOT_COMMITTED;
    *units_p = t->plan->units;
    *nunits_p = t->plan->nunits;
    return GDTE_OK;
}
