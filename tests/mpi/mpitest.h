/*
 * Harness for the interposer tests. Each test is an ordinary MPI program; the only
 * gdte-specific part is here: "device" buffers are host buffers registered with the fake-device
 * hook of libgdte_mpi.so (reached through weak symbols, bound when the library is preloaded).
 *
 * Every test runs its exchange twice, once on device buffers and once on plain host buffers
 * (which gdte hands to the MPI untouched), and compares the two byte for byte.
 *
 * GDTETEST_MODE (set by CTest) says what the run must show:
 *   fake      the interposer is loaded and active: device phases must go through gdte
 *             (its counters move) and host phases must not;
 *   disabled  the interposer is loaded under GDTE_DISABLE=1: nothing goes through gdte;
 *   cuda      on a GPU machine (CUDA build): "device" buffers are cudaMallocManaged memory,
 *             which the interposer moves with its GPU kernels, as it does cudaMalloc memory,
 *             and which this harness can still fill and check from the host; each rank uses
 *             GPU (local rank mod GPUs). Without a GPU the program exits 77 (skipped);
 *   (unset)   plain MPI: no interposer expected.
 * The CUDA runtime is found at run time (libgdte_mpi.so links it), so the programs need no
 * CUDA to build.
 */
#ifndef GDTE_MPITEST_H
#define GDTE_MPITEST_H

#include <dlfcn.h>
#include <pthread.h>
#include <mpi.h>
/* Open MPI's extensions (MPIX_ persistent collectives) */
#if defined(OPEN_MPI) && OPEN_MPI && defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int gdte_fake_device_register(void *ptr, size_t size) __attribute__((weak));
extern int gdte_fake_device_unregister(void *ptr) __attribute__((weak));
extern int64_t gdte_mpi_counter(const char *name) __attribute__((weak));

static int mt_rank, mt_size;
static _Atomic int mt_failures, mt_checks; /* counted from any thread */
static const char *mt_mode;

#define MT_CHECK(cond, ...)                                                              \
    do {                                                                                 \
        mt_checks++;                                                                     \
        if (!(cond)) {                                                                   \
            mt_failures++;                                                               \
            fprintf(stderr, "[rank %d] FAIL %s:%d: %s: ", mt_rank, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, "\n");                                                       \
        }                                                                                \
    } while (0)

#define MT_MPI(call)                                                                      \
    do {                                                                                  \
        int mt_rc_ = (call);                                                              \
        MT_CHECK(mt_rc_ == MPI_SUCCESS, "%s returned %d", #call, mt_rc_);                  \
    } while (0)

static inline int mt_fake(void) { return mt_mode && !strcmp(mt_mode, "fake"); }
/* Persistent collectives: MPI-4's MPI_<name>_init where mpi.h has them, else Open MPI's MPIX_ */
#if defined(MPI_VERSION) && MPI_VERSION >= 4
#define HAVE_PINIT 1
#define PINIT(x) MPI_##x##_init
#elif defined(OMPI_HAVE_MPI_EXT_PCOLLREQ) && OMPI_HAVE_MPI_EXT_PCOLLREQ
#define HAVE_PINIT 1
#define PINIT(x) MPIX_##x##_init
#endif

static inline int mt_cuda(void) { return mt_mode && !strcmp(mt_mode, "cuda"); }
/* Device phases must go through gdte. */
static inline int mt_expect_gdte(void) { return mt_fake() || mt_cuda(); }

static int (*mt_cuda_malloc_managed)(void **, size_t, unsigned);
static int (*mt_cuda_malloc)(void **, size_t);
static int (*mt_cuda_memcpy)(void *, const void *, size_t, int);
static int (*mt_cuda_free)(void *);
static int (*mt_cuda_sync)(void);
static int (*mt_cuda_setdev)(int);
static int mt_cuda_dev = -1; /* the GPU this rank uses (local rank mod GPUs) */
static int mt_cuda_ndev;     /* GPUs this process sees */

/* A thread of its own uses the rank's GPU too (a new thread starts on GPU 0): gdte binds its
 * streams and events to the GPU the process works on, and a thread calling MPI with device
 * buffers must have that GPU current (docs/MPI_BACKEND.md). */
static inline void mt_thread_device(void)
{
    if (mt_cuda_setdev && mt_cuda_dev >= 0) mt_cuda_setdev(mt_cuda_dev);
}

static inline int64_t mt_counter(const char *name) { return gdte_mpi_counter ? gdte_mpi_counter(name) : 0; }

/* Device messages gdte has handled so far (sends + receives + packs + unpacks). */
/* Seeded pseudo-random numbers for the tests (splitmix64; the state is the seed). */
static _Thread_local uint64_t mt_rng_state; /* per thread: threaded tests draw their own streams */
static inline uint64_t mt_rnd(void)
{
    uint64_t z = (mt_rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* The error class of an MPI return code. */
static inline int mt_eclass(int rc)
{
    int c = rc;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &c);
    return c;
}

static inline int64_t mt_gdte_traffic(void)
{
    return mt_counter("sends") + mt_counter("recvs") + mt_counter("packs") + mt_counter("unpacks") +
           mt_counter("direct") + mt_counter("node_sends") + mt_counter("node_recvs");
}

static inline void mt_init_common(void);
static inline void mt_init(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    mt_init_common();
}
static inline int mt_init_thread(int *argc, char ***argv, int required)
{
    int provided = -1;
    MPI_Init_thread(argc, argv, required, &provided);
    mt_init_common();
    return provided;
}
static inline void mt_init_common(void)
{
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    mt_mode = getenv("GDTETEST_MODE");
    if (mt_cuda()) {
        int (*count)(int *) = (int (*)(int *))dlsym(RTLD_DEFAULT, "cudaGetDeviceCount");
        int (*setdev)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "cudaSetDevice");
        mt_cuda_malloc_managed = (int (*)(void **, size_t, unsigned))dlsym(RTLD_DEFAULT, "cudaMallocManaged");
        mt_cuda_free = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaFree");
        mt_cuda_malloc = (int (*)(void **, size_t))dlsym(RTLD_DEFAULT, "cudaMalloc");
        mt_cuda_memcpy = (int (*)(void *, const void *, size_t, int))dlsym(RTLD_DEFAULT, "cudaMemcpy");
        mt_cuda_sync = (int (*)(void))dlsym(RTLD_DEFAULT, "cudaDeviceSynchronize");
        int n = 0, ok = count && setdev && mt_cuda_malloc_managed && mt_cuda_free && mt_cuda_sync && mt_cuda_malloc &&
                        mt_cuda_memcpy &&
                        count(&n) == 0 && n > 0;
        int all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (mt_rank == 0) printf("no CUDA runtime or GPU: skipped\n");
            MPI_Finalize();
            exit(77);
        }
        MPI_Comm node;
        int local = 0;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
        MPI_Comm_rank(node, &local);
        MPI_Comm_free(&node);
        mt_cuda_setdev = setdev;
        mt_cuda_dev = local % n;
        mt_cuda_ndev = n;
        setdev(mt_cuda_dev);
    }
    if (mt_mode && (mt_fake() || mt_cuda() || !strcmp(mt_mode, "disabled"))) {
        MT_CHECK(gdte_mpi_counter && (mt_cuda() || gdte_fake_device_register), "libgdte_mpi.so is not loaded");
        if (gdte_mpi_counter) MT_CHECK(gdte_mpi_counter("active") == mt_expect_gdte(), "interposer active=%lld in mode %s",
                                       (long long)gdte_mpi_counter("active"), mt_mode);
    }
}

/* A "device" buffer: zero-filled host memory registered as fake device memory, or managed
 * memory in cuda mode. */
static inline void *mt_dev_alloc(size_t n)
{
    if (mt_cuda()) {
        void *d = NULL;
        MT_CHECK(mt_cuda_malloc_managed(&d, n ? n : 1, 1 /* cudaMemAttachGlobal */) == 0 && d, "cudaMallocManaged %zu", n);
        if (d) memset(d, 0, n ? n : 1);
        return d;
    }
    void *p = calloc(1, n ? n : 1);
    if (gdte_fake_device_register) MT_CHECK(gdte_fake_device_register(p, n ? n : 1) == 0, "register %zu", n);
    return p;
}

static inline void mt_dev_free(void *p)
{
    if (!p) return;
    if (mt_cuda()) {
        mt_cuda_sync();
        mt_cuda_free(p);
        return;
    }
    if (gdte_fake_device_unregister) gdte_fake_device_unregister(p);
    free(p);
}

/* Memory from the driver's virtual memory management (cuMemCreate + cuMemAddressReserve +
 * cuMemMap + cuMemSetAccess), as frameworks with growable pools allocate it: device memory that
 * the legacy CUDA IPC (cudaIpcGetMemHandle) cannot export. The CUDA headers are not used here
 * (the tests build without them): the structures below are the driver API's, field for field. */
typedef struct {
    int type, handle_types, loc_type, loc_id; /* CUmemAllocationProp: type, requestedHandleTypes, location */
    void *win32;
    unsigned char compression, rdma;
    unsigned short usage;
    unsigned char reserved[4];
} mt_cu_prop_t;
typedef struct {
    int loc_type, loc_id, flags; /* CUmemAccessDesc */
} mt_cu_access_t;
typedef struct mt_vmm_s {
    unsigned long long ptr, handle;
    size_t size;
    struct mt_vmm_s *next;
} mt_vmm_t;
static mt_vmm_t *mt_vmm_list;
static pthread_mutex_t mt_vmm_lock = PTHREAD_MUTEX_INITIALIZER; /* random_test --threads */
static struct {
    int (*gran)(size_t *, const mt_cu_prop_t *, int);
    int (*reserve)(unsigned long long *, size_t, size_t, unsigned long long, unsigned long long);
    int (*create)(unsigned long long *, size_t, const mt_cu_prop_t *, unsigned long long);
    int (*map)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
    int (*access)(unsigned long long, size_t, const mt_cu_access_t *, size_t);
    int (*unmap)(unsigned long long, size_t);
    int (*release)(unsigned long long);
    int (*addr_free)(unsigned long long, size_t);
} mt_cu;
static inline void *mt_vmm_alloc(size_t n)
{
    pthread_mutex_lock(&mt_vmm_lock);
    if (!mt_cu.map) {
        void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
        MT_CHECK(lib != NULL, "VMM: libcuda.so.1 not found");
        if (!lib) {
            pthread_mutex_unlock(&mt_vmm_lock);
            return NULL;
        }
        *(void **)&mt_cu.gran = dlsym(lib, "cuMemGetAllocationGranularity");
        *(void **)&mt_cu.reserve = dlsym(lib, "cuMemAddressReserve");
        *(void **)&mt_cu.create = dlsym(lib, "cuMemCreate");
        *(void **)&mt_cu.access = dlsym(lib, "cuMemSetAccess");
        *(void **)&mt_cu.unmap = dlsym(lib, "cuMemUnmap");
        *(void **)&mt_cu.release = dlsym(lib, "cuMemRelease");
        *(void **)&mt_cu.addr_free = dlsym(lib, "cuMemAddressFree");
        *(void **)&mt_cu.map = dlsym(lib, "cuMemMap");
        MT_CHECK(mt_cu.gran && mt_cu.reserve && mt_cu.create && mt_cu.access && mt_cu.unmap && mt_cu.release &&
                 mt_cu.addr_free && mt_cu.map, "VMM: the driver's cuMem* functions not found");
        mt_cuda_sync(); /* the runtime's primary context is current from here on */
    }
    pthread_mutex_unlock(&mt_vmm_lock);
    mt_cu_prop_t prop;
    memset(&prop, 0, sizeof prop);
    prop.type = 1;     /* CU_MEM_ALLOCATION_TYPE_PINNED */
    prop.loc_type = 1; /* CU_MEM_LOCATION_TYPE_DEVICE */
    prop.loc_id = mt_cuda_dev;
    size_t g = 0;
    MT_CHECK(mt_cu.gran(&g, &prop, 0) == 0 && g, "cuMemGetAllocationGranularity");
    if (!g) return NULL;
    size_t size = ((n ? n : 1) + g - 1) / g * g;
    mt_vmm_t *v = (mt_vmm_t *)calloc(1, sizeof *v);
    v->size = size;
    mt_cu_access_t acc = {1, mt_cuda_dev, 3 /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */};
    int ok = v && mt_cu.reserve(&v->ptr, size, 0, 0, 0) == 0 && mt_cu.create(&v->handle, size, &prop, 0) == 0 &&
             mt_cu.map(v->ptr, size, 0, v->handle, 0) == 0 && mt_cu.access(v->ptr, size, &acc, 1) == 0;
    MT_CHECK(ok, "VMM allocation of %zu bytes", size);
    if (!ok) return NULL;
    pthread_mutex_lock(&mt_vmm_lock);
    v->next = mt_vmm_list;
    mt_vmm_list = v;
    pthread_mutex_unlock(&mt_vmm_lock);
    return (void *)(uintptr_t)v->ptr;
}
static inline void mt_vmm_free(void *p)
{
    pthread_mutex_lock(&mt_vmm_lock);
    mt_vmm_t **pp = &mt_vmm_list;
    while (*pp && (*pp)->ptr != (unsigned long long)(uintptr_t)p) pp = &(*pp)->next;
    mt_vmm_t *v = *pp;
    if (v) *pp = v->next;
    pthread_mutex_unlock(&mt_vmm_lock);
    MT_CHECK(v != NULL, "VMM free of %p: not allocated here", p);
    if (!v) return;
    mt_cuda_sync();
    MT_CHECK(mt_cu.unmap(v->ptr, v->size) == 0 && mt_cu.release(v->handle) == 0 && mt_cu.addr_free(v->ptr, v->size) == 0,
             "VMM free of %zu bytes", v->size);
    free(v);
}

/* Real device memory (cudaMalloc) in cuda mode, which the host cannot touch: filled and read
 * back with mt_put/mt_get. In fake mode, registered host memory as mt_dev_alloc.
 * GDTETEST_DEVMEM=async: from cudaMallocAsync's stream-ordered pool instead (memory CUDA IPC
 * cannot export, addresses reused from one allocation to the next); GDTETEST_DEVMEM=vmm: from
 * the driver's cuMemCreate/cuMemMap (mt_vmm_alloc; not exportable by CUDA IPC either). */
static int mt_devmem_kind = -1; /* 0 cudaMalloc, 1 async, 2 vmm */
static int (*mt_malloc_async)(void **, size_t, void *), (*mt_free_async)(void *, void *), (*mt_stream_sync)(void *);
/* cudaMallocAsync on the default stream, and its free (both waited for). */
static inline void *mt_async_alloc(size_t n)
{
    if (!mt_malloc_async) {
        mt_malloc_async = (int (*)(void **, size_t, void *))dlsym(RTLD_DEFAULT, "cudaMallocAsync");
        mt_free_async = (int (*)(void *, void *))dlsym(RTLD_DEFAULT, "cudaFreeAsync");
        mt_stream_sync = (int (*)(void *))dlsym(RTLD_DEFAULT, "cudaStreamSynchronize");
    }
    void *d = NULL;
    MT_CHECK(mt_malloc_async && mt_free_async && mt_stream_sync, "no cudaMallocAsync in the CUDA runtime");
    if (mt_malloc_async)
        MT_CHECK(mt_malloc_async(&d, n ? n : 1, NULL) == 0 && d && mt_stream_sync(NULL) == 0, "cudaMallocAsync %zu", n);
    return d;
}
static inline void mt_async_free(void *p)
{
    if (!p || !mt_free_async) return;
    mt_cuda_sync();
    mt_free_async(p, NULL);
    mt_stream_sync(NULL);
}
static inline int mt_devmem_which(void)
{
    if (mt_devmem_kind < 0) {
        const char *e = getenv("GDTETEST_DEVMEM");
        mt_devmem_kind = !mt_cuda() || !e ? 0 : !strcmp(e, "async") ? 1 : !strcmp(e, "vmm") ? 2 : 0;
    }
    return mt_devmem_kind;
}
static inline int mt_devmem_is_async(void) { return mt_devmem_which() == 1; }
static inline void *mt_devmem_alloc(size_t n)
{
    if (!mt_cuda()) return mt_dev_alloc(n);
    if (mt_devmem_which() == 1) return mt_async_alloc(n);
    if (mt_devmem_which() == 2) return mt_vmm_alloc(n);
    void *d = NULL;
    MT_CHECK(mt_cuda_malloc(&d, n ? n : 1) == 0 && d, "cudaMalloc %zu", n);
    return d;
}
static inline void mt_devmem_free(void *p)
{
    if (p && mt_cuda() && mt_devmem_which() == 1) {
        mt_async_free(p);
    } else if (p && mt_cuda() && mt_devmem_which() == 2) {
        mt_vmm_free(p);
    } else if (p && mt_cuda()) {
        mt_cuda_free(p);
    } else {
        mt_dev_free(p);
    }
}
/* Copies between host memory and a buffer of either kind (cudaMemcpyDefault infers). */
static inline void mt_put(void *dst, const void *src, size_t n)
{
    if (mt_cuda()) MT_CHECK(mt_cuda_memcpy(dst, src, n, 4 /* cudaMemcpyDefault */) == 0, "cudaMemcpy to %zu", n);
    else memcpy(dst, src, n);
}
static inline void mt_get(void *dst, const void *src, size_t n)
{
    if (mt_cuda()) MT_CHECK(mt_cuda_memcpy(dst, src, n, 4) == 0, "cudaMemcpy from %zu", n);
    else memcpy(dst, src, n);
}

static inline void *mt_alloc(int device, size_t n) { return device ? mt_dev_alloc(n) : calloc(1, n ? n : 1); }
static inline void mt_free(int device, void *p)
{
    if (device) mt_dev_free(p);
    else free(p);
}

/* A phase on device buffers must go through gdte in fake mode, and not otherwise; a phase on
 * host buffers never. */
typedef struct {
    int64_t before;
    int device;
} mt_phase_t;
static inline mt_phase_t mt_phase_begin(int device) { return (mt_phase_t){mt_gdte_traffic(), device}; }
static inline void mt_phase_end(mt_phase_t ph, const char *what)
{
    int64_t moved = mt_gdte_traffic() - ph.before;
    if (ph.device && mt_expect_gdte())
        MT_CHECK(moved > 0, "%s: device phase did not go through gdte", what);
    else
        MT_CHECK(moved == 0, "%s: %s phase went through gdte (%lld messages)", what, ph.device ? "device" : "host",
                 (long long)moved);
}

static inline void mt_fill(void *buf, size_t n, unsigned seed)
{
    unsigned char *b = buf;
    uint32_t x = seed * 2654435761u + 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (unsigned char)(x >> 16);
    }
}

/* Compare and report the first differing byte. */
static inline void mt_same(const void *a, const void *b, size_t n, const char *what)
{
    const unsigned char *x = a, *y = b;
    size_t i = 0;
    while (i < n && x[i] == y[i]) i++;
    MT_CHECK(i == n, "%s: device and host results differ at byte %zu of %zu (%d vs %d)", what, i, n,
             i < n ? x[i] : 0, i < n ? y[i] : 0);
}

/* Collect every rank's result; rank 0 prints the closing line. Returns the exit code. */
/* ---- buffers sized to a type map -------------------------------------------------------- */
/* Lowest and past-highest byte offsets (from buf) that `count` elements of `t` touch. */
static inline void mt_span(MPI_Datatype t, int count, ptrdiff_t *lo_p, ptrdiff_t *hi_p)
{
    MPI_Aint lb, ext, tlb, text;
    int size;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    MPI_Type_size(t, &size);
    ptrdiff_t lo = 0, hi = 0;
    if (size > 0 && count > 0) {
        lo = PTRDIFF_MAX;
        hi = PTRDIFF_MIN;
        for (int i = 0; i < count; i++) {
            ptrdiff_t a = (ptrdiff_t)i * ext + tlb, b = a + text;
            if (a < lo) lo = a;
            if (b > hi) hi = b;
        }
    }
    *lo_p = lo;
    *hi_p = hi;
}

/* An allocation covering the bytes the type map touches plus `margin` each side (and `slack`
 * unchecked bytes past it); `buf` is the user pointer (before the allocation when the data
 * starts far past it, after it when the data all lies before it), `img` the host image of the
 * whole checked allocation. Device buffers from mt_devmem_alloc. */
typedef struct {
    int dev;
    size_t len;
    unsigned char *base, *buf, *img;
} mt_ubuf_t;

static inline mt_ubuf_t mt_ubuf_new(int dev, MPI_Datatype t, int count, size_t margin, size_t slack)
{
    ptrdiff_t lo, hi;
    mt_span(t, count, &lo, &hi);
    mt_ubuf_t u = {dev, (size_t)(hi - lo) + 2 * margin, NULL, NULL, NULL};
    u.base = dev ? mt_devmem_alloc(u.len + slack) : malloc(u.len + slack);
    u.buf = u.base + margin - lo;
    u.img = malloc(u.len);
    return u;
}
static inline void mt_ubuf_free(mt_ubuf_t *u)
{
    if (u->dev) mt_devmem_free(u->base);
    else free(u->base);
    free(u->img);
    u->base = u->img = NULL;
}
/* Fill image and buffer: random bytes (seed) or `poison` (seed 0). */
static inline void mt_ubuf_set(mt_ubuf_t *u, unsigned seed, unsigned char poison)
{
    if (seed) mt_fill(u->img, u->len, seed);
    else memset(u->img, poison, u->len);
    mt_put(u->base, u->img, u->len);
}
/* The buffer's bytes equal its image. */
static inline int mt_ubuf_check(const mt_ubuf_t *u, const char *what)
{
    unsigned char *got = malloc(u->len);
    mt_get(got, u->base, u->len);
    size_t i = 0;
    while (i < u->len && got[i] == u->img[i]) i++;
    MT_CHECK(i == u->len, "%s: byte %zu of %zu (buf at %+td) is 0x%02x, want 0x%02x", what, i, u->len,
             u->buf - u->base, i < u->len ? got[i] : 0, i < u->len ? u->img[i] : 0);
    free(got);
    return i == u->len;
}

/* Does the MPI itself agree with its own bounds for (t, count)? Open MPI 4.1 mis-optimises some
 * negative-stride layouts (it packs other bytes than its typemap says, or writes outside its
 * reported true extent): a case with such a type has no oracle. The check unpacks an all-ones
 * stream into a zeroed image with wide margins: exactly the type's bytes must be set, all inside
 * its span. */
static inline int mt_consistent(MPI_Datatype t, int count)
{
    MPI_Aint lb, ext, tlb, text;
    int size;
    MPI_Type_get_extent(t, &lb, &ext);
    MPI_Type_get_true_extent(t, &tlb, &text);
    MPI_Type_size(t, &size);
    int64_t a = tlb, b = tlb + (int64_t)(count - 1) * ext, lo = a < b ? a : b, hi = (a > b ? a : b) + text;
    const int64_t M = 1 << 16;
    size_t len = (size_t)(hi - lo + 2 * M), n = (size_t)size * (size_t)count;
    unsigned char *img = calloc(1, len), *ones = malloc(n + 1);
    memset(ones, 0xFF, n);
    int pos = 0;
    MPI_Unpack(ones, (int)n, &pos, img + M - lo, count, t, MPI_COMM_SELF);
    size_t inside = 0, outside = 0;
    for (size_t i = 0; i < len; i++)
        if (img[i]) {
            if ((int64_t)i >= M && (int64_t)i < M + hi - lo) inside++;
            else outside++;
        }
    free(img);
    free(ones);
    return outside == 0 && inside == n;
}

/* `count` elements of `t` at `buf` as one committed type to send or receive at MPI_BOTTOM: a
 * struct of one block at buf's absolute address. The caller frees it. */
static inline MPI_Datatype mt_bottom_type(const void *buf, int count, MPI_Datatype t)
{
    MPI_Aint a;
    MPI_Datatype b;
    MPI_Get_address(buf, &a);
    MPI_Type_create_struct(1, &count, &a, &t, &b);
    MPI_Type_commit(&b);
    return b;
}

static inline int mt_finish(const char *name)
{
    /* GDTETEST_EXPECT_COUNTER=name[,name...]: the run must have moved each of these counters of
     * the interposer on some rank (a variant that forces a path asserts the path was taken). */
    const char *ec = getenv("GDTETEST_EXPECT_COUNTER");
    if (ec && *ec && mt_expect_gdte()) {
        char names[256];
        snprintf(names, sizeof names, "%s", ec);
        for (char *save = NULL, *n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
            long long mine = (long long)mt_counter(n), all = 0;
            MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
            if (mt_rank == 0) MT_CHECK(all > 0, "counter %s never moved", n);
        }
    }
    int f = mt_failures, c = mt_checks, tf = 0, tc = 0;
    MPI_Allreduce(&f, &tf, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&c, &tc, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        printf("%s (np %d, mode %s): %d checks, %d failed; gdte: %lld sends, %lld recvs, %lld fragments\n", name,
               mt_size, mt_mode ? mt_mode : "plain", tc, tf, (long long)mt_counter("sends"),
               (long long)mt_counter("recvs"), (long long)mt_counter("fragments"));
        fflush(stdout);
    }
    MPI_Finalize();
    return tf ? 1 : 0;
}

#endif
