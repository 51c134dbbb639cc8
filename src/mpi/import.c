/* MPI datatypes into gdte types: a walk of MPI_Type_get_envelope/get_contents (iterative, on
 * a heap stack: an MPI type may nest as deep as the MPI allows), cached per MPI_Datatype (an
 * attribute for derived types, a small table for named ones). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "import.h"
#include "engine/engine.h"
#include "util/util.h"

/* ---------------------------------------------------------------------------------------- */
/* State. The miss path (building) runs under one lock; the hit path takes none: the named
 * table is published slot by slot with release stores, and MPI's attribute lookup is
 * MPI's business. */
static pthread_mutex_t import_lock = PTHREAD_MUTEX_INITIALIZER;
static int type_keyval = MPI_KEYVAL_INVALID;
static int self_keyval = MPI_KEYVAL_INVALID;
static _Atomic int keyval_ready;
static _Atomic int64_t stat_builds, stat_wrapped, stat_named;

/* What a derived datatype's attribute points to. `committed` lets the hit path skip
 * gdte_type_commit and the import lock (set once the type is committed). */
typedef struct import_entry {
    gdte_type_h type; /* one reference, owned by the entry */
    _Atomic int committed;
    _Atomic int validated; /* the MPI accepted the datatype (gdte_mpi_type_import_validated) */
} import_entry_t;

/* Predefined (named) types: MPI does not promise attributes on them, so they live here.
 * Open addressing over the handle's bits; key 0 is an empty slot. Our own table rather than
 * uthash: every device message with a predefined type looks it up, and here readers take no
 * lock (a slot's key is published last, with release order, and entries are never removed
 * while MPI runs); uthash would need a lock around every lookup. */
#define NAMED_SLOTS 512
typedef struct named_slot {
    _Atomic uint64_t key;
    gdte_type_h type;
} named_slot_t;
static named_slot_t named_table[NAMED_SLOTS];

static uint64_t dt_key(MPI_Datatype dt)
{
    uint64_t k = 0;
    memcpy(&k, &dt, sizeof dt < sizeof k ? sizeof dt : sizeof k);
    return k + 1; /* never 0, whatever the handle's representation */
}

static size_t dt_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k & (NAMED_SLOTS - 1);
}

static gdte_type_h named_find(MPI_Datatype dt)
{
    uint64_t k = dt_key(dt);
    for (size_t i = dt_hash(k), n = 0; n < NAMED_SLOTS; i = (i + 1) & (NAMED_SLOTS - 1), n++) {
        uint64_t s = atomic_load_explicit(&named_table[i].key, memory_order_acquire);
        if (s == k) return named_table[i].type;
        if (s == 0) return NULL;
    }
    return NULL;
}

/* Called with import_lock held; `t`'s reference moves into the table. */
static gdte_status_t named_insert(MPI_Datatype dt, gdte_type_h t)
{
    uint64_t k = dt_key(dt);
    for (size_t i = dt_hash(k), n = 0; n < NAMED_SLOTS; i = (i + 1) & (NAMED_SLOTS - 1), n++) {
        uint64_t s = atomic_load_explicit(&named_table[i].key, memory_order_relaxed);
        if (s == 0) {
            named_table[i].type = t;
            atomic_store_explicit(&named_table[i].key, k, memory_order_release);
            return GDTE_OK;
        }
    }
    gdte_error("MPI import: more than %d predefined datatypes", NAMED_SLOTS);
    return GDTE_ERR_NO_MEMORY;
}

/* ---------------------------------------------------------------------------------------- */
/* Attribute callbacks. */
static int entry_copy(MPI_Datatype old, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)old, (void)keyval, (void)extra;
    import_entry_t *e = in, *n = malloc(sizeof *n);
    if (!n) {
        *flag = 0;
        return MPI_SUCCESS; /* the dup is imported again on first use */
    }
    /* A dup has the same type map: share the gdte type. */
    gdte_type_retain(e->type);
    n->type = e->type;
    atomic_init(&n->committed, atomic_load(&e->committed));
    atomic_init(&n->validated, atomic_load(&e->validated)); /* a dup is committed as its parent is */
    *(void **)out = n;
    *flag = 1;
    return MPI_SUCCESS;
}

static int entry_delete(MPI_Datatype dt, int keyval, void *val, void *extra)
{
    (void)dt, (void)keyval, (void)extra;
    import_entry_t *e = val;
    gdte_type_release(e->type);
    free(e);
    return MPI_SUCCESS;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first: drop what the import holds. */
static int self_delete(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm, (void)keyval, (void)val, (void)extra;
    pthread_mutex_lock(&import_lock);
    for (size_t i = 0; i < NAMED_SLOTS; i++) {
        if (atomic_load(&named_table[i].key)) gdte_type_release(named_table[i].type);
        named_table[i].type = NULL;
        atomic_store(&named_table[i].key, 0);
    }
    if (type_keyval != MPI_KEYVAL_INVALID) MPI_Type_free_keyval(&type_keyval);
    atomic_store(&keyval_ready, 0);
    int kv = self_keyval;
    self_keyval = MPI_KEYVAL_INVALID;
    pthread_mutex_unlock(&import_lock);
    MPI_Comm_free_keyval(&kv);
    return MPI_SUCCESS;
}

static gdte_status_t keyvals_init(void)
{
    if (atomic_load(&keyval_ready)) return GDTE_OK;
    if (MPI_Type_create_keyval(entry_copy, entry_delete, &type_keyval, NULL) != MPI_SUCCESS) {
        gdte_error("MPI import: MPI_Type_create_keyval failed");
        return GDTE_ERR_INTERNAL;
    }
    if (MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &self_keyval, NULL) != MPI_SUCCESS ||
        MPI_Comm_set_attr(MPI_COMM_SELF, self_keyval, NULL) != MPI_SUCCESS) {
        gdte_error("MPI import: cannot register the MPI_Finalize hook");
        MPI_Type_free_keyval(&type_keyval);
        return GDTE_ERR_INTERNAL;
    }
    atomic_store(&keyval_ready, 1);
    return GDTE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Named types. Each known handle has a family; the gdte element then follows from the
 * family and MPI_Type_size, so an MPI whose `long` or Fortran INTEGER differs still maps
 * right. Handles are macros in every MPI we know, hence the #ifdef per name. */
typedef enum {
    FAM_BYTE,
    FAM_CHAR,
    FAM_SINT,
    FAM_UINT,
    FAM_REAL,
    FAM_LDOUBLE,
    FAM_COMPLEX,
    FAM_LDCOMPLEX,
    FAM_BOOL,
    FAM_WCHAR,
    FAM_LOGICAL,
    FAM_PAIR, /* a struct of two elements: first, second, second's offset */
} family_t;

typedef struct named_def {
    MPI_Datatype dt;
    family_t fam;
    MPI_Datatype first, second; /* FAM_PAIR */
    ptrdiff_t second_off;        /* FAM_PAIR; -1: right after first (Fortran pairs) */
} named_def_t;

#define PAIR_OFF(A, B) offsetof(struct { A a; B b; }, b)

/* Fills `defs` (at least 128 entries); returns the count. */
static int named_defs(named_def_t *defs)
{
    int n = 0;
#define E(name, f) defs[n++] = (named_def_t){name, f, MPI_DATATYPE_NULL, MPI_DATATYPE_NULL, 0}
#define P(name, a, b, off) defs[n++] = (named_def_t){name, FAM_PAIR, a, b, off}
    E(MPI_BYTE, FAM_BYTE);
    E(MPI_PACKED, FAM_BYTE);
    E(MPI_CHAR, FAM_CHAR);
    E(MPI_SIGNED_CHAR, FAM_SINT);
    E(MPI_UNSIGNED_CHAR, FAM_UINT);
    E(MPI_SHORT, FAM_SINT);
    E(MPI_UNSIGNED_SHORT, FAM_UINT);
    E(MPI_INT, FAM_SINT);
    E(MPI_UNSIGNED, FAM_UINT);
    E(MPI_LONG, FAM_SINT);
    E(MPI_UNSIGNED_LONG, FAM_UINT);
    E(MPI_LONG_LONG_INT, FAM_SINT);
#ifdef MPI_LONG_LONG
    E(MPI_LONG_LONG, FAM_SINT);
#endif
    E(MPI_UNSIGNED_LONG_LONG, FAM_UINT);
    E(MPI_FLOAT, FAM_REAL);
    E(MPI_DOUBLE, FAM_REAL);
    E(MPI_LONG_DOUBLE, FAM_LDOUBLE);
    E(MPI_WCHAR, FAM_WCHAR);
    E(MPI_C_BOOL, FAM_BOOL);
    E(MPI_INT8_T, FAM_SINT);
    E(MPI_INT16_T, FAM_SINT);
    E(MPI_INT32_T, FAM_SINT);
    E(MPI_INT64_T, FAM_SINT);
    E(MPI_UINT8_T, FAM_UINT);
    E(MPI_UINT16_T, FAM_UINT);
    E(MPI_UINT32_T, FAM_UINT);
    E(MPI_UINT64_T, FAM_UINT);
    E(MPI_AINT, FAM_SINT);
    E(MPI_OFFSET, FAM_SINT);
#ifdef MPI_COUNT
    E(MPI_COUNT, FAM_SINT);
#endif
    E(MPI_C_COMPLEX, FAM_COMPLEX);
    E(MPI_C_FLOAT_COMPLEX, FAM_COMPLEX);
    E(MPI_C_DOUBLE_COMPLEX, FAM_COMPLEX);
    E(MPI_C_LONG_DOUBLE_COMPLEX, FAM_LDCOMPLEX);
#ifdef MPI_CXX_BOOL
    E(MPI_CXX_BOOL, FAM_BOOL);
    E(MPI_CXX_FLOAT_COMPLEX, FAM_COMPLEX);
    E(MPI_CXX_DOUBLE_COMPLEX, FAM_COMPLEX);
    E(MPI_CXX_LONG_DOUBLE_COMPLEX, FAM_LDCOMPLEX);
#endif
    /* Fortran: present as handles even when Fortran support is absent (then NULL or size 0,
     * both handled below). */
    E(MPI_CHARACTER, FAM_CHAR);
    E(MPI_INTEGER, FAM_SINT);
    E(MPI_REAL, FAM_REAL);
    E(MPI_DOUBLE_PRECISION, FAM_REAL);
    E(MPI_COMPLEX, FAM_COMPLEX);
    E(MPI_DOUBLE_COMPLEX, FAM_COMPLEX);
    E(MPI_LOGICAL, FAM_LOGICAL);
#ifdef MPI_LOGICAL1
    E(MPI_LOGICAL1, FAM_LOGICAL);
    E(MPI_LOGICAL2, FAM_LOGICAL);
    E(MPI_LOGICAL4, FAM_LOGICAL);
    E(MPI_LOGICAL8, FAM_LOGICAL);
#endif
#ifdef MPI_INTEGER1
    E(MPI_INTEGER1, FAM_SINT);
    E(MPI_INTEGER2, FAM_SINT);
    E(MPI_INTEGER4, FAM_SINT);
    E(MPI_INTEGER8, FAM_SINT);
#endif
#ifdef MPI_INTEGER16
    E(MPI_INTEGER16, FAM_SINT);
#endif
#ifdef MPI_REAL2
    E(MPI_REAL2, FAM_REAL);
#endif
#ifdef MPI_REAL4
    E(MPI_REAL4, FAM_REAL);
    E(MPI_REAL8, FAM_REAL);
#endif
#ifdef MPI_REAL16
    E(MPI_REAL16, FAM_REAL);
#endif
#ifdef MPI_COMPLEX4
    E(MPI_COMPLEX4, FAM_COMPLEX);
#endif
#ifdef MPI_COMPLEX8
    E(MPI_COMPLEX8, FAM_COMPLEX);
    E(MPI_COMPLEX16, FAM_COMPLEX);
#endif
#ifdef MPI_COMPLEX32
    E(MPI_COMPLEX32, FAM_COMPLEX);
#endif
    /* The pair types of MINLOC/MAXLOC: structs with a gap, laid out as C lays them out. */
    P(MPI_FLOAT_INT, MPI_FLOAT, MPI_INT, PAIR_OFF(float, int));
    P(MPI_DOUBLE_INT, MPI_DOUBLE, MPI_INT, PAIR_OFF(double, int));
    P(MPI_LONG_INT, MPI_LONG, MPI_INT, PAIR_OFF(long, int));
    P(MPI_2INT, MPI_INT, MPI_INT, PAIR_OFF(int, int));
    P(MPI_SHORT_INT, MPI_SHORT, MPI_INT, PAIR_OFF(short, int));
    P(MPI_LONG_DOUBLE_INT, MPI_LONG_DOUBLE, MPI_INT, PAIR_OFF(long double, int));
    P(MPI_2REAL, MPI_REAL, MPI_REAL, -1);
    P(MPI_2DOUBLE_PRECISION, MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION, -1);
    P(MPI_2INTEGER, MPI_INTEGER, MPI_INTEGER, -1);
#undef E
#undef P
    return n;
}

/* FNV-1a: a tag from a datatype's name, the same in every process of a job. */
static uint32_t name_tag(MPI_Datatype dt)
{
    char name[MPI_MAX_OBJECT_NAME];
    int len = 0;
    name[0] = 0;
    if (MPI_Type_get_name(dt, name, &len) != MPI_SUCCESS) len = 0;
    uint32_t h = 2166136261u;
    for (int i = 0; i < len; i++) h = (h ^ (unsigned char)name[i]) * 16777619u;
    return h & 0x7fffffffu;
}

static gdte_status_t elem_of_size(int64_t size, family_t fam, gdte_type_h *t_p)
{
    gdte_basic_t b = GDTE_BASIC_COUNT_;
    switch (fam) {
    case FAM_BYTE: if (size == 1) b = GDTE_BASIC_BYTE; break;
    case FAM_CHAR: if (size == 1) b = GDTE_BASIC_CHAR; break;
    case FAM_SINT:
        b = size == 1 ? GDTE_BASIC_INT8 : size == 2 ? GDTE_BASIC_INT16 : size == 4 ? GDTE_BASIC_INT32
          : size == 8 ? GDTE_BASIC_INT64 : GDTE_BASIC_COUNT_;
        break;
    case FAM_UINT:
        b = size == 1 ? GDTE_BASIC_UINT8 : size == 2 ? GDTE_BASIC_UINT16 : size == 4 ? GDTE_BASIC_UINT32
          : size == 8 ? GDTE_BASIC_UINT64 : GDTE_BASIC_COUNT_;
        break;
    case FAM_REAL: b = size == 4 ? GDTE_BASIC_FLOAT : size == 8 ? GDTE_BASIC_DOUBLE : GDTE_BASIC_COUNT_; break;
    case FAM_LDOUBLE: if (size == (int64_t)sizeof(long double)) b = GDTE_BASIC_LONG_DOUBLE; break;
    case FAM_COMPLEX:
        b = size == 8 ? GDTE_BASIC_COMPLEX_FLOAT : size == 16 ? GDTE_BASIC_COMPLEX_DOUBLE : GDTE_BASIC_COUNT_;
        break;
    default: break;
    }
    if (b != GDTE_BASIC_COUNT_) {
        *t_p = gdte_type_predefined(b);
        return GDTE_OK;
    }
    if (size == 0) return gdte_type_create_contiguous(0, gdte_type_predefined(GDTE_BASIC_BYTE), t_p);
    if ((fam == FAM_COMPLEX || fam == FAM_LDCOMPLEX) && size % 2 == 0) {
        /* two parts: aligned like a part, as C and Fortran align complex numbers */
        gdte_type_h part;
        gdte_status_t st = fam == FAM_LDCOMPLEX && size == 2 * (int64_t)sizeof(long double)
                               ? (part = gdte_type_predefined(GDTE_BASIC_LONG_DOUBLE), GDTE_OK)
                               : gdte_type_create_basic(size / 2, ((uint32_t)FAM_REAL << 20) | (uint32_t)(size / 2), &part);
        if (st != GDTE_OK) return st;
        st = gdte_type_create_contiguous(2, part, t_p);
        gdte_type_release(part);
        return st;
    }
    return gdte_type_create_basic(size, ((uint32_t)fam << 20) | (uint32_t)size, t_p);
}

static gdte_status_t mpi_size(MPI_Datatype dt, int64_t *size_p)
{
    MPI_Count s;
    if (MPI_Type_size_x(dt, &s) != MPI_SUCCESS || s == MPI_UNDEFINED) return GDTE_ERR_INTERNAL;
    *size_p = (int64_t)s;
    return GDTE_OK;
}

/* Give `*t_p` (owned) MPI's lb and extent if they differ; check the data agrees. */
static gdte_status_t conform(MPI_Datatype dt, gdte_type_h *t_p)
{
    MPI_Count lb, ext, tlb, text, size;
    gdte_bounds_t in;
    gdte_status_t st = gdte_type_bounds(*t_p, &in);
    if (st != GDTE_OK) return st;
    if (MPI_Type_get_extent_x(dt, &lb, &ext) != MPI_SUCCESS ||
        MPI_Type_get_true_extent_x(dt, &tlb, &text) != MPI_SUCCESS || MPI_Type_size_x(dt, &size) != MPI_SUCCESS)
        return GDTE_ERR_INTERNAL;
    if (in.size != (int64_t)size || (size > 0 && (in.true_lb != (int64_t)tlb || in.true_extent != (int64_t)text))) {
        gdte_error("MPI import: data of the imported type differs from MPI's: size %lld/%lld, true lb %lld/%lld, "
                   "true extent %lld/%lld (gdte/MPI)",
                   (long long)in.size, (long long)size, (long long)in.true_lb, (long long)tlb,
                   (long long)in.true_extent, (long long)text);
        return GDTE_ERR_INTERNAL;
    }
    if (in.lb == (int64_t)lb && in.extent == (int64_t)ext) return GDTE_OK;
    gdte_type_h r;
    if ((st = gdte_type_create_resized(*t_p, (int64_t)lb, (int64_t)ext, &r)) != GDTE_OK) return st;
    gdte_debug("MPI import: lb/extent %lld/%lld resized to MPI's %lld/%lld", (long long)in.lb,
               (long long)in.extent, (long long)lb, (long long)ext);
    gdte_type_release(*t_p);
    *t_p = r;
    stat_wrapped++;
    return GDTE_OK;
}

static gdte_status_t import_rec(MPI_Datatype dt, gdte_type_h *t_p);

/* Build a predefined type (lock held); the result is a new reference. */
static gdte_status_t build_named(MPI_Datatype dt, int comb, gdte_type_h *t_p)
{
    named_def_t defs[128];
    int n = comb == MPI_COMBINER_NAMED ? named_defs(defs) : 0;
    const named_def_t *d = NULL;
    for (int i = 0; i < n; i++)
        if (defs[i].dt != MPI_DATATYPE_NULL && defs[i].dt == dt) {
            d = &defs[i];
            break;
        }
    int64_t size;
    gdte_status_t st = mpi_size(dt, &size);
    if (st != GDTE_OK) return st;
    gdte_type_h t = NULL;
    if (comb != MPI_COMBINER_NAMED) {
        /* F90 (p, r) types: one element of MPI's size, a number of the family asked for */
        family_t fam = comb == MPI_COMBINER_F90_REAL      ? FAM_REAL
                     : comb == MPI_COMBINER_F90_INTEGER ? FAM_SINT
                                                        : FAM_COMPLEX;
        st = elem_of_size(size, fam, &t);
    } else if (!d) {
        /* A predefined type we do not list: one element of its size, tagged by its name. */
        st = size ? gdte_type_create_basic(size, name_tag(dt), &t) : elem_of_size(0, FAM_BYTE, &t);
    } else if (d->fam == FAM_PAIR) {
        gdte_type_h parts[2];
        if ((st = import_rec(d->first, &parts[0])) != GDTE_OK) return st;
        if ((st = import_rec(d->second, &parts[1])) != GDTE_OK) {
            gdte_type_release(parts[0]);
            return st;
        }
        int64_t first_size = 0;
        mpi_size(d->first, &first_size);
        int64_t bl[2] = {1, 1}, disp[2] = {0, d->second_off >= 0 ? (int64_t)d->second_off : first_size};
        st = gdte_type_create_struct(2, bl, disp, parts, &t);
        gdte_type_release(parts[0]);
        gdte_type_release(parts[1]);
    } else {
        st = elem_of_size(size, d->fam, &t);
    }
    if (st != GDTE_OK) return st;
    if ((st = conform(dt, &t)) != GDTE_OK) {
        gdte_type_release(t);
        return st;
    }
    stat_named++;
    *t_p = t;
    return GDTE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Derived types. */
static gdte_order_t order_of(int o) { return o == MPI_ORDER_FORTRAN ? GDTE_ORDER_FORTRAN : GDTE_ORDER_C; }

/* Named types and the F90 parameterized types are predefined in MPI's sense: never freed,
 * and no attributes are relied on for them. */
static int comb_predefined(int comb)
{
    return comb == MPI_COMBINER_NAMED || comb == MPI_COMBINER_F90_REAL || comb == MPI_COMBINER_F90_COMPLEX ||
           comb == MPI_COMBINER_F90_INTEGER;
}

static int is_predefined(MPI_Datatype dt)
{
    int ni, na, nd, comb;
    return MPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) == MPI_SUCCESS && comb_predefined(comb);
}

/* Open MPI (4.1.4 here) builds a vector or hvector whose stride is -1 byte with the extent of
 * one block (blocklen old types) as its stride: -1 is its internal "default extent".
 * MPI_Type_vector(2, 1, -1, MPI_CHAR) moves bytes 0 and 1, not 0 and -1, and its bounds say so.
 * The MPI moves the host side of a message, so gdte must read the type as the MPI does, or a
 * device message of it is refused (conform) where a host one goes. True when the MPI's bounds
 * match that reading and not the standard one; *stride_p is then the MPI's stride. */
static int mpi_default_stride(MPI_Datatype dt, int count, int blocklen, int64_t child_extent, gdte_type_h child,
                              int64_t *stride_p)
{
    MPI_Count tlb, text;
    gdte_type_h std = NULL, alt = NULL;
    gdte_bounds_t bs, ba;
    int r = 0;
    if (MPI_Type_get_true_extent_x(dt, &tlb, &text) != MPI_SUCCESS) return 0;
    if (gdte_type_create_hvector(count, blocklen, -1, child, &std) == GDTE_OK &&
        gdte_type_create_hvector(count, blocklen, blocklen * child_extent, child, &alt) == GDTE_OK &&
        gdte_type_bounds(std, &bs) == GDTE_OK && gdte_type_bounds(alt, &ba) == GDTE_OK)
        r = (bs.true_lb != (int64_t)tlb || bs.true_extent != (int64_t)text) && ba.true_lb == (int64_t)tlb &&
            ba.true_extent == (int64_t)text;
    if (std) gdte_type_release(std);
    if (alt) gdte_type_release(alt);
    if (r) {
        *stride_p = blocklen * child_extent;
        gdte_debug("MPI import: a (h)vector of stride -1 byte read with stride %lld, as the MPI does",
                   (long long)*stride_p);
    }
    return r;
}

/* A derived type being imported: its contents, and the gdte types of its children imported
 * so far (G[0..next)). */
typedef struct frame {
    MPI_Datatype dt;
    int ni, na, nd, comb;
    int *I;
    MPI_Aint *A;
    MPI_Datatype *D;
    gdte_type_h *G;
    int next;
    int got; /* D holds handles from MPI_Type_get_contents (freed with the frame) */
} frame_t;

static void frame_free(frame_t *f)
{
    for (int i = 0; i < f->nd; i++)
        if (f->G && f->G[i]) gdte_type_release(f->G[i]);
    if (f->got)
        for (int i = 0; i < f->nd; i++)
            if (!is_predefined(f->D[i])) MPI_Type_free(&f->D[i]);
    free(f->I);
    free(f->A);
    free(f->D);
    free(f->G);
}

static gdte_status_t frame_open(frame_t *f, MPI_Datatype dt, int ni, int na, int nd, int comb)
{
    *f = (frame_t){.dt = dt, .ni = ni, .na = na, .nd = nd, .comb = comb};
    f->I = malloc((size_t)(ni ? ni : 1) * sizeof *f->I);
    f->A = malloc((size_t)(na ? na : 1) * sizeof *f->A);
    f->D = malloc((size_t)(nd ? nd : 1) * sizeof *f->D);
    f->G = calloc((size_t)(nd ? nd : 1), sizeof *f->G);
    if (!f->I || !f->A || !f->D || !f->G) return GDTE_ERR_NO_MEMORY;
    if (MPI_Type_get_contents(dt, ni, na, nd, f->I, f->A, f->D) != MPI_SUCCESS) return GDTE_ERR_INTERNAL;
    f->got = 1;
    return GDTE_OK;
}

/* The gdte type of a frame whose children are all imported (a new reference). */
static gdte_status_t build_derived(const frame_t *f, gdte_type_h *t_p)
{
    gdte_status_t st = GDTE_OK;
    const int *I = f->I, comb = f->comb;
    const MPI_Aint *A = f->A;
    gdte_type_h *G = f->G;
    int64_t *x = NULL, *y = NULL; /* int64 copies of count-long arrays */
    gdte_type_h t = NULL;
    size_t cnt = f->ni > 0 && I[0] > 0 ? (size_t)I[0] : 1;
    switch (comb) {
    case MPI_COMBINER_DUP:
        /* Same type map: share the child's gdte type. */
        gdte_type_retain(G[0]);
        t = G[0];
        break;
    case MPI_COMBINER_CONTIGUOUS: st = gdte_type_create_contiguous(I[0], G[0], &t); break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR: {
        gdte_bounds_t cb;
        st = gdte_type_bounds(G[0], &cb);
        if (st != GDTE_OK) break;
        int64_t stride = comb == MPI_COMBINER_HVECTOR ? (int64_t)A[0] : 0; /* in bytes */
        if (comb == MPI_COMBINER_VECTOR && __builtin_mul_overflow((int64_t)I[2], cb.extent, &stride)) {
            st = gdte_type_create_vector(I[0], I[1], I[2], G[0], &t); /* reports the overflow */
            break;
        }
        if (stride == -1) (void)mpi_default_stride(f->dt, I[0], I[1], cb.extent, G[0], &stride);
        st = gdte_type_create_hvector(I[0], I[1], stride, G[0], &t);
        break;
    }
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
    case MPI_COMBINER_STRUCT:
        x = malloc(cnt * sizeof *x);
        y = malloc(cnt * sizeof *y);
        if (!x || !y) {
            st = GDTE_ERR_NO_MEMORY;
            break;
        }
        for (int i = 0; i < I[0]; i++) {
            x[i] = I[1 + i];
            y[i] = comb == MPI_COMBINER_INDEXED ? I[1 + I[0] + i] : (int64_t)A[i];
        }
        st = comb == MPI_COMBINER_INDEXED    ? gdte_type_create_indexed(I[0], x, y, G[0], &t)
           : comb == MPI_COMBINER_HINDEXED ? gdte_type_create_hindexed(I[0], x, y, G[0], &t)
                                           : gdte_type_create_struct(I[0], x, y, G, &t);
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
        if (!(y = malloc(cnt * sizeof *y))) {
            st = GDTE_ERR_NO_MEMORY;
            break;
        }
        for (int i = 0; i < I[0]; i++) y[i] = comb == MPI_COMBINER_INDEXED_BLOCK ? I[2 + i] : (int64_t)A[i];
        st = comb == MPI_COMBINER_INDEXED_BLOCK ? gdte_type_create_indexed_block(I[0], I[1], y, G[0], &t)
                                                : gdte_type_create_hindexed_block(I[0], I[1], y, G[0], &t);
        break;
    case MPI_COMBINER_SUBARRAY: {
        int n = I[0];
        if (!(x = malloc((size_t)(3 * n) * sizeof *x))) {
            st = GDTE_ERR_NO_MEMORY;
            break;
        }
        for (int i = 0; i < 3 * n; i++) x[i] = I[1 + i];
        st = gdte_type_create_subarray(n, x, x + n, x + 2 * n, order_of(I[1 + 3 * n]), G[0], &t);
        break;
    }
    case MPI_COMBINER_DARRAY: {
        int n = I[2];
        gdte_distribute_t *dist = malloc((size_t)(n ? n : 1) * sizeof *dist);
        x = malloc((size_t)(3 * n + 1) * sizeof *x);
        if (!dist || !x) {
            free(dist);
            st = GDTE_ERR_NO_MEMORY;
            break;
        }
        const int *gs = I + 3, *di = gs + n, *da = di + n, *ps = da + n;
        for (int i = 0; i < n; i++) {
            x[i] = gs[i];
            x[n + i] = da[i] == MPI_DISTRIBUTE_DFLT_DARG ? GDTE_DISTRIBUTE_DFLT_DARG : da[i];
            x[2 * n + i] = ps[i];
            dist[i] = di[i] == MPI_DISTRIBUTE_BLOCK    ? GDTE_DISTRIBUTE_BLOCK
                    : di[i] == MPI_DISTRIBUTE_CYCLIC ? GDTE_DISTRIBUTE_CYCLIC
                                                     : GDTE_DISTRIBUTE_NONE;
        }
        st = gdte_type_create_darray(I[0], I[1], n, x, dist, x + n, x + 2 * n, order_of(ps[n]), G[0], &t);
        free(dist);
        break;
    }
    case MPI_COMBINER_RESIZED: st = gdte_type_create_resized(G[0], (int64_t)A[0], (int64_t)A[1], &t); break;
    default:
        gdte_error("MPI import: datatype combiner %d is not supported", comb);
        st = GDTE_ERR_UNSUPPORTED;
    }
    if (st == GDTE_OK && comb != MPI_COMBINER_DUP) {
        stat_builds++;
        st = conform(f->dt, &t);
    }
    free(x);
    free(y);
    if (st != GDTE_OK) {
        if (t) gdte_type_release(t);
        return st;
    }
    *t_p = t;
    return GDTE_OK;
}

/* Cache `t` (one reference moves into the attribute) on the derived type `dt`. */
static gdte_status_t cache_derived(MPI_Datatype dt, gdte_type_h t)
{
    import_entry_t *e = malloc(sizeof *e);
    if (!e) return GDTE_ERR_NO_MEMORY;
    e->type = t;
    /* Stores, not atomic_init: once the attribute is set another thread may read the flags
     * (MPI_THREAD_MULTIPLE; ThreadSanitizer saw atomic_init's plain write race such a read). */
    atomic_store_explicit(&e->committed, 0, memory_order_relaxed);
    atomic_store_explicit(&e->validated, 0, memory_order_relaxed);
    if (MPI_Type_set_attr(dt, type_keyval, e) != MPI_SUCCESS) {
        free(e);
        return GDTE_ERR_INTERNAL;
    }
    return GDTE_OK;
}

/* The gdte type of `dt` if it needs no walk (a named type, built here if new, or a derived
 * type imported before): *t_p is a new reference. Otherwise *t_p = NULL and the envelope is
 * returned for the walk. */
static gdte_status_t import_cached(MPI_Datatype dt, gdte_type_h *t_p, int *ni, int *na, int *nd, int *comb)
{
    gdte_status_t st;
    gdte_type_h t = named_find(dt);
    *t_p = NULL;
    if (t) {
        gdte_type_retain(t);
        *t_p = t;
        return GDTE_OK;
    }
    int flag = 0;
    if (MPI_Type_get_envelope(dt, ni, na, nd, comb) != MPI_SUCCESS) return GDTE_ERR_INVALID_TYPE;
    if (comb_predefined(*comb)) {
        /* committed before it is published: the hit path hands table entries out as they are */
        if ((st = build_named(dt, *comb, &t)) != GDTE_OK) return st;
        if ((st = gdte_type_commit(t)) != GDTE_OK || (st = named_insert(dt, t)) != GDTE_OK) {
            gdte_type_release(t);
            return st;
        }
        gdte_type_retain(t);
        *t_p = t;
        return GDTE_OK;
    }
    import_entry_t *e = NULL;
    if (MPI_Type_get_attr(dt, type_keyval, &e, &flag) == MPI_SUCCESS && flag && e) {
        gdte_type_retain(e->type);
        *t_p = e->type;
    }
    return GDTE_OK;
}

static void log_depth_once(void)
{
    static _Atomic int logged;
    if (!atomic_exchange(&logged, 1))
        gdte_error("MPI import: datatype nested deeper than GDTE_MAX_TYPE_DEPTH (%d levels): not imported",
                   GDTE_MAX_TYPE_DEPTH);
}

/* The gdte type of `dt` as a new reference, from a cache or built (and cached); lock held.
 * Post-order over the contents, on a heap stack of frames (one per derived type being built,
 * at most GDTE_MAX_TYPE_DEPTH), so no MPI type can exhaust the C stack. */
static gdte_status_t import_rec(MPI_Datatype dt, gdte_type_h *t_p)
{
    int ni, na, nd, comb;
    gdte_type_h t;
    gdte_status_t st = import_cached(dt, &t, &ni, &na, &nd, &comb);
    if (st != GDTE_OK || t) {
        *t_p = t;
        return st;
    }
    frame_t *stack = NULL;
    int64_t n = 0, cap = 0;
    for (;;) {
        /* here: `dt` (envelope ni, na, nd, comb) needs a frame */
        if (n >= GDTE_MAX_TYPE_DEPTH) {
            log_depth_once();
            st = GDTE_ERR_UNSUPPORTED;
            goto fail;
        }
        if ((st = gdte_grow(stack, &cap, n + 1, 64)) != GDTE_OK) goto fail;
        st = frame_open(&stack[n++], dt, ni, na, nd, comb);
        if (st != GDTE_OK) goto fail;
        /* Import children until one needs a frame of its own, or the top frame is complete. */
        for (;;) {
            frame_t *f = &stack[n - 1];
            if (f->next < f->nd) {
                dt = f->D[f->next];
                if ((st = import_cached(dt, &t, &ni, &na, &nd, &comb)) != GDTE_OK) goto fail;
                if (!t) break; /* descend */
                f->G[f->next++] = t;
                continue;
            }
            st = build_derived(f, &t);
            MPI_Datatype built = f->dt;
            frame_free(f);
            n--;
            if (st != GDTE_OK) goto fail;
            if ((st = cache_derived(built, t)) != GDTE_OK) {
                gdte_type_release(t);
                goto fail;
            }
            gdte_type_retain(t); /* the attribute holds one reference, the parent or caller another */
            if (n == 0) {
                free(stack);
                *t_p = t;
                return GDTE_OK;
            }
            stack[n - 1].G[stack[n - 1].next++] = t;
        }
    }
fail:
    while (n > 0) frame_free(&stack[--n]);
    free(stack);
    return st;
}

/* ---------------------------------------------------------------------------------------- */
gdte_status_t gdte_mpi_type_import(MPI_Datatype dt, gdte_type_h *type_p)
{
    if (!type_p) return GDTE_ERR_INVALID_ARG;
    if (dt == MPI_DATATYPE_NULL) return GDTE_ERR_INVALID_TYPE;
    /* Hit path: no lock, no engine call. */
    gdte_type_h t = named_find(dt);
    if (t) {
        *type_p = t;
        return GDTE_OK;
    }
    if (atomic_load_explicit(&keyval_ready, memory_order_acquire)) {
        import_entry_t *e = NULL;
        int flag = 0;
        if (MPI_Type_get_attr(dt, type_keyval, &e, &flag) == MPI_SUCCESS && flag && e &&
            atomic_load_explicit(&e->committed, memory_order_acquire)) {
            *type_p = e->type;
            return GDTE_OK;
        }
    }
    /* Miss: build (or commit what a parent's import built) under the lock. */
    gdte_status_t st;
    pthread_mutex_lock(&import_lock);
    if ((st = keyvals_init()) != GDTE_OK) goto out;
    if ((st = import_rec(dt, &t)) != GDTE_OK) goto out;
    st = gdte_type_commit(t);
    if (st == GDTE_OK) {
        import_entry_t *e = NULL;
        int flag = 0;
        if (MPI_Type_get_attr(dt, type_keyval, &e, &flag) == MPI_SUCCESS && flag && e)
            atomic_store_explicit(&e->committed, 1, memory_order_release);
        *type_p = t; /* borrowed: the cache holds a reference */
    }
    gdte_type_release(t);
out:
    pthread_mutex_unlock(&import_lock);
    return st;
}

gdte_status_t gdte_mpi_type_import_validated(MPI_Datatype dt, gdte_status_t (*validate)(MPI_Datatype),
                                           gdte_type_h *type_p)
{
    if (!type_p || !validate) return GDTE_ERR_INVALID_ARG;
    if (dt == MPI_DATATYPE_NULL) return GDTE_ERR_INVALID_TYPE;
    /* Predefined types are committed by definition. */
    gdte_type_h t = named_find(dt);
    if (t) {
        *type_p = t;
        return GDTE_OK;
    }
    import_entry_t *e = NULL;
    int flag = 0;
    if (atomic_load_explicit(&keyval_ready, memory_order_acquire) &&
        MPI_Type_get_attr(dt, type_keyval, &e, &flag) == MPI_SUCCESS && flag && e &&
        atomic_load_explicit(&e->validated, memory_order_acquire) &&
        atomic_load_explicit(&e->committed, memory_order_acquire)) {
        *type_p = e->type;
        return GDTE_OK;
    }
    /* First use (or the MPI refused it before): ask the MPI, then import. A committed
     * datatype cannot become uncommitted, and the entry dies with the datatype, so one
     * accepted check holds for the entry's life. */
    gdte_status_t st = validate(dt);
    if (st != GDTE_OK) return st;
    if ((st = gdte_mpi_type_import(dt, &t)) != GDTE_OK) return st;
    e = NULL, flag = 0;
    if (MPI_Type_get_attr(dt, type_keyval, &e, &flag) == MPI_SUCCESS && flag && e)
        atomic_store_explicit(&e->validated, 1, memory_order_release);
    *type_p = t;
    return GDTE_OK;
}

void gdte_mpi_import_get_stats(gdte_mpi_import_stats_t *s)
{
    s->builds = stat_builds;
    s->wrapped = stat_wrapped;
    s->named = stat_named;
}

int gdte_mpi_status_to_mpi_error(gdte_status_t status)
{
    switch (status) {
    case GDTE_OK:
    case GDTE_INPROGRESS: return MPI_SUCCESS;
    case GDTE_ERR_INVALID_ARG: return MPI_ERR_ARG;
    case GDTE_ERR_INVALID_TYPE:
    case GDTE_ERR_NOT_COMMITTED:
    case GDTE_ERR_MISMATCH: return MPI_ERR_TYPE;
    case GDTE_ERR_COUNT:
    case GDTE_ERR_OVERFLOW: return MPI_ERR_COUNT;
    case GDTE_ERR_NULL_BUFFER:
    case GDTE_ERR_MEMORY_KIND: return MPI_ERR_BUFFER;
    case GDTE_ERR_OFFSET: return MPI_ERR_ARG;
    case GDTE_ERR_TRUNCATE: return MPI_ERR_TRUNCATE;
    case GDTE_ERR_NO_MEMORY:
    case GDTE_ERR_NO_DEVICE_MEMORY: return MPI_ERR_NO_MEM;
    case GDTE_ERR_UNSUPPORTED: return MPI_ERR_UNSUPPORTED_OPERATION;
    case GDTE_ERR_CANCELED: return MPI_ERR_REQUEST;
    case GDTE_ERR_INTERNAL: return MPI_ERR_INTERN;
#ifdef MPIX_ERR_PROC_FAILED
    case GDTE_ERR_PEER_FAILED: return MPIX_ERR_PROC_FAILED;
#else
    case GDTE_ERR_PEER_FAILED:
#endif
    case GDTE_ERR_NO_DEVICE:
    case GDTE_ERR_GPU:
    case GDTE_ERR_TRANSPORT:
    case GDTE_ERR_TIMEOUT:
    case GDTE_ERR_NOT_INITIALIZED:
    case GDTE_ERR_BAD_KNOB: return MPI_ERR_OTHER;
    }
    return MPI_ERR_UNKNOWN;
}
