/*
 * flatlab: how a copy kernel should map threads to words, measured against cudaMemcpy.
 *
 * Made when the FLAT kernel (src/kernels/pack_kernels.cu) ran at 0.93 of cudaMemcpy even on a
 * plain contiguous 512 MiB copy (bench/pack, layout contig512). It times candidate mappings on
 * one-dimensional strided layouts (blocks of `blocklen` bytes every `stride` bytes; contiguous
 * when the two are equal), with FLAT's own index arithmetic (one fastdiv per word):
 *   map 0  grid-strided: thread t moves words t, t + T, ..., U of them loaded before any is
 *          stored (FLAT's loop, which it keeps under a GDTE_MAX_BLOCKS cap)
 *   map 1  block-contiguous: a block's round covers U * NT consecutive words, thread t taking
 *          t, t + NT, ...; rounds stride through the stream by the grid
 *   map 2  one word per thread, one block per NT words, no loop (FLAT's grid since 11da4a0)
 *   map 3  map 2 with arguments padded to the size of FLAT's (is argument size a cost?)
 *   gdte   gdte_pack / gdte_unpack of the same layout, timed alike
 *   hint   1: streaming cache hints (evict-first loads and stores); 0: plain accesses
 *   grid   resident blocks per SM for maps 0 and 1 (4 or 8); 0: one round, a block per U * NT
 *          words (small layouts)
 * Layouts: contig512, V, V64 (large: one operation per sample) and, with `small`, face_x (8-byte
 * words 4 KiB apart), face_y (4 KiB blocks 2 MiB apart) and contig2m (2 MiB): 20 operations
 * captured into a graph per sample, as bench/pack times layouts under 16 MiB.
 * Each variant's output is compared on the device with memcpy-made reference data before it is
 * timed. CSV: device,commit,layout,direction,word,map,hint,unroll,blocks_per_sm,bytes,
 * median_us,gbps,ratio_to_memcpy.
 *
 * With `writeprobe`: V64's half-line write and read patterns alone (write_probe).
 *
 * Usage: flatlab OUT.csv [small|writeprobe]   (commit from GDTETEST_COMMIT). CUDA only: the hints are CUDA
 * intrinsics, and the lab's answer is carried into the one-source kernel by hand.
 */
#include <cuda_runtime.h>
#include "gdte.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
extern "C" {
#include "kernels/fastdiv.h"
}

#define NT 256
#define RUNS 21

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

struct lay {
    char *user, *packed;
    uint32_t nwords;
    int64_t stride;
    gdte_fastdiv_t wpb;
};

template <int W> struct wt;
template <> struct wt<8> { typedef unsigned long long t; };
template <> struct wt<16> { typedef uint4 t; };
template <int W, int HINT> __device__ __forceinline__ typename wt<W>::t ldw(const char *p)
{
    typedef typename wt<W>::t T;
    return HINT ? __ldcs(reinterpret_cast<const T *>(p)) : *reinterpret_cast<const T *>(p);
}
template <int W, int HINT> __device__ __forceinline__ void stw(char *p, typename wt<W>::t v)
{
    typedef typename wt<W>::t T;
    if (HINT) __stcs(reinterpret_cast<T *>(p), v);
    else *reinterpret_cast<T *>(p) = v;
}
template <int W> __device__ __forceinline__ char *uaddr(const lay &a, uint32_t i)
{
    uint32_t b = gdte_fastdiv32(&a.wpb, i);
    return a.user + (int64_t)(i - b * (uint32_t)a.wpb.d) * W + (int64_t)b * a.stride;
}

/* The same arguments padded to the size of FLAT's (about 600 bytes: a layout, the edges and
 * one prepared division per dimension), for map 3. */
struct lay_big {
    lay a;
    char pad[560];
};
template <int W, bool PACK> __global__ void __launch_bounds__(NT) k_big(const lay_big b)
{
    const lay &a = b.a;
    uint32_t i = blockIdx.x * NT + threadIdx.x;
    if (i >= a.nwords) return;
    char *u = uaddr<W>(a, i), *p = a.packed + (int64_t)i * W;
    if (PACK) *reinterpret_cast<typename wt<W>::t *>(p) = *reinterpret_cast<const typename wt<W>::t *>(u);
    else *reinterpret_cast<typename wt<W>::t *>(u) = *reinterpret_cast<const typename wt<W>::t *>(p);
}

/* PACK: user -> packed; else packed -> user. */
template <int W, int MAP, int HINT, int U, bool PACK> __global__ void __launch_bounds__(NT) k(const lay a)
{
    typedef typename wt<W>::t T;
    const uint32_t n = a.nwords;
    if (MAP == 2) {
        uint32_t i = blockIdx.x * NT + threadIdx.x;
        if (i >= n) return;
        char *u = uaddr<W>(a, i), *p = a.packed + (int64_t)i * W;
        if (PACK) stw<W, HINT>(p, ldw<W, HINT>(u));
        else stw<W, HINT>(u, ldw<W, HINT>(p));
        return;
    }
    /* first word of this thread, distance between its words in a round, between rounds */
    const uint32_t first = MAP == 0 ? blockIdx.x * NT + threadIdx.x : blockIdx.x * U * NT + threadIdx.x;
    const uint32_t kstep = MAP == 0 ? gridDim.x * NT : NT;
    const uint32_t rstep = gridDim.x * U * NT;
    for (uint64_t i0 = first; i0 < n; i0 += rstep) {
        uint32_t i = (uint32_t)i0;
        T v[U];
        char *u[U];
#pragma unroll
        for (int k = 0; k < U; k++)
            if (i0 + (uint64_t)k * kstep < n) {
                u[k] = uaddr<W>(a, i + k * kstep);
                v[k] = ldw<W, HINT>(PACK ? u[k] : a.packed + (int64_t)(i + k * kstep) * W);
            }
#pragma unroll
        for (int k = 0; k < U; k++)
            if (i0 + (uint64_t)k * kstep < n) stw<W, HINT>(PACK ? a.packed + (int64_t)(i + k * kstep) * W : u[k], v[k]);
    }
}

typedef void (*kfn)(const lay);
template <int W, int MAP, int HINT, int U> static kfn pick(bool pack)
{
    return pack ? k<W, MAP, HINT, U, true> : k<W, MAP, HINT, U, false>;
}
template <int W> static kfn kernel_w(int map, int hint, int u, bool pack)
{
#define P(M, H, UU) if (map == M && hint == H && u == UU) return pick<W, M, H, UU>(pack);
    P(0, 0, 1) P(0, 0, 2) P(0, 0, 4) P(0, 1, 4) P(0, 0, 8) P(0, 1, 8) P(1, 0, 2) P(1, 0, 4) P(1, 1, 4)
    P(1, 0, 8) P(1, 1, 8) P(2, 0, 1) P(2, 1, 1)
#undef P
    return NULL;
}
static kfn kernel_of(int W, int map, int hint, int u, bool pack)
{
    return W == 8 ? kernel_w<8>(map, hint, u, pack) : kernel_w<16>(map, hint, u, pack);
}

/* mismatching 16-byte words between a and b */
__global__ void kcmp(const uint4 *a, const uint4 *b, uint64_t n, unsigned long long *bad)
{
    unsigned long long c = 0;
    for (uint64_t i = blockIdx.x * (uint64_t)NT + threadIdx.x; i < n; i += (uint64_t)gridDim.x * NT) {
        uint4 x = a[i], y = b[i];
        c += x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w;
    }
    if (c) atomicAdd(bad, c);
}

__global__ void kfill(uint32_t *p, uint64_t n, uint32_t seed)
{
    for (uint64_t i = blockIdx.x * (uint64_t)NT + threadIdx.x; i < n; i += (uint64_t)gridDim.x * NT)
        p[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

static cudaEvent_t e0, e1;
static cudaStream_t S;
static double median(double *t, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[n / 2];
}

/* Median time of one op (us): RUNS samples after 3 warm-ups; with `graphed`, a sample is
 * GRAPH_OPS ops captured once into a graph and replayed, divided by GRAPH_OPS. */
#define GRAPH_OPS 20
template <typename F> static double time_op(F op, bool graphed)
{
    double t[RUNS];
    cudaGraphExec_t ge = NULL;
    if (graphed) {
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(S, cudaStreamCaptureModeRelaxed));
        for (int i = 0; i < GRAPH_OPS; i++) op();
        CK(cudaStreamEndCapture(S, &g));
        CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
        CK(cudaGraphDestroy(g));
    }
    for (int r = -3; r < RUNS; r++) {
        CK(cudaEventRecord(e0, S));
        if (graphed) CK(cudaGraphLaunch(ge, S));
        else op();
        CK(cudaEventRecord(e1, S));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) t[r] = ms * 1e3 / (graphed ? GRAPH_OPS : 1);
    }
    if (ge) CK(cudaGraphExecDestroy(ge));
    return median(t, RUNS);
}

/* The write and read patterns alone, no index arithmetic, no other side: thread i moves 16
 * bytes, at i * 16 (full lines) or, HALF, in the first 64 bytes of each 128-byte line (V64's
 * destination on unpack, its source on pack): the same bytes, twice the span. What a kernel
 * can reach on V64 with no gdte code in the way. */
template <bool HALF> __device__ __forceinline__ size_t probe_off(size_t i)
{
    return HALF ? (i >> 2) * 128 + (i & 3) * 16 : i * 16;
}
template <bool HALF> __global__ void __launch_bounds__(NT) k_wprobe(char *base, size_t n)
{
    const size_t i = (size_t)blockIdx.x * NT + threadIdx.x;
    if (i < n) *(uint4 *)(base + probe_off<HALF>(i)) = make_uint4((unsigned)i, 1, 2, 3);
}
template <bool HALF> __global__ void __launch_bounds__(NT) k_rprobe(const char *base, size_t n, unsigned *sink)
{
    const size_t i = (size_t)blockIdx.x * NT + threadIdx.x;
    if (i < n) {
        const uint4 v = *(const uint4 *)(base + probe_off<HALF>(i));
        if ((v.x ^ v.y ^ v.z ^ v.w) == 0x9e3779b9u) atomicAdd(sink, 1u); /* keeps the load */
    }
}

/* Usage `flatlab OUT.csv writeprobe`: V64's 256 MiB written (read) as half lines against the
 * same bytes as full lines. Rows: layout wprobe/rprobe, direction full/half, ratio = full time
 * over this row's. */
static int write_probe(FILE *csv, const char *dev, const char *commit)
{
    const size_t bytes = (size_t)256 << 20, n = bytes / 16;
    char *buf;
    unsigned *sink;
    CK(cudaMalloc(&buf, 2 * bytes));
    CK(cudaMalloc(&sink, sizeof *sink));
    CK(cudaMemset(buf, 0, 2 * bytes));
    const unsigned grid = (unsigned)((n + NT - 1) / NT);
    double t[4];
    t[0] = time_op([&] { k_wprobe<false><<<grid, NT, 0, S>>>(buf, n); }, false);
    t[1] = time_op([&] { k_wprobe<true><<<grid, NT, 0, S>>>(buf, n); }, false);
    t[2] = time_op([&] { k_rprobe<false><<<grid, NT, 0, S>>>(buf, n, sink); }, false);
    t[3] = time_op([&] { k_rprobe<true><<<grid, NT, 0, S>>>(buf, n, sink); }, false);
    CK(cudaGetLastError());
    const char *name[4] = {"wprobe,full", "wprobe,half", "rprobe,full", "rprobe,half"};
    for (int k = 0; k < 4; k++) {
        const double base = t[k & 2];
        fprintf(csv, "%s,%s,%s,16,probe,0,0,0,%zu,%.3f,%.2f,%.3f\n", dev, commit, name[k], bytes, t[k],
                bytes / t[k] / 1e3, base / t[k]);
        printf("%-12s %9.2f us %8.1f GB/s x%.3f of full lines\n", name[k], t[k], bytes / t[k] / 1e3, base / t[k]);
    }
    CK(cudaFree(buf));
    CK(cudaFree(sink));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: flatlab OUT.csv [small|writeprobe]\n");
        return 2;
    }
    const bool small = argc > 2 && !strcmp(argv[2], "small");
    const char *commit = getenv("GDTETEST_COMMIT") ? getenv("GDTETEST_COMMIT") : "unknown";
    cudaDeviceProp pr;
    CK(cudaGetDeviceProperties(&pr, 0));
    char dev[256];
    snprintf(dev, sizeof dev, "%s", pr.name);
    for (char *c = dev; *c; c++)
        if (*c == ' ') *c = '-';
    FILE *csv = fopen(argv[1], "w");
    if (!csv) return 1;
    fprintf(csv, "device,commit,layout,direction,word,map,hint,unroll,blocks_per_sm,bytes,median_us,gbps,ratio_to_memcpy\n");
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaStreamCreateWithFlags(&S, cudaStreamNonBlocking));
    if (gdte_init(NULL) != GDTE_OK) {
        fprintf(stderr, "flatlab: gdte_init failed\n");
        return 1;
    }
    if (argc > 2 && !strcmp(argv[2], "writeprobe")) {
        const int rc = write_probe(csv, dev, commit);
        fclose(csv);
        gdte_finalize();
        return rc;
    }
    struct lspec {
        const char *name;
        int64_t blocklen, stride, nblocks;
        int W;
    };
    const lspec big[] = {{"contig512", 536870912, 536870912, 1, 16},
                         {"V", 65536, 131072, 8192, 16},
                         {"V64", 64, 128, 4194304, 16}};
    const lspec sml[] = {{"face_x", 8, 4096, 262144, 8},
                         {"face_y", 4096, 2097152, 512, 16},
                         {"contig2m", 2097152, 2097152, 1, 16}};
    /* {map, hint, unroll, blocks per SM (0: one round)} */
    const int vbig[][4] = {{0, 0, 4, 4}, {0, 0, 4, 8}, {0, 1, 4, 4}, {0, 1, 4, 8}, {0, 0, 8, 4}, {0, 1, 8, 4},
                           {1, 0, 4, 4}, {1, 0, 4, 8}, {1, 1, 4, 4}, {1, 1, 4, 8}, {1, 0, 8, 4}, {1, 1, 8, 4},
                           {2, 0, 1, 0}, {2, 1, 1, 0}};
    const int vsml[][4] = {{0, 0, 4, 4}, {0, 0, 4, 8}, {0, 0, 2, 8}, {0, 0, 1, 8}, {0, 0, 2, 0}, {0, 0, 4, 0},
                           {0, 0, 8, 0}, {1, 0, 2, 0}, {1, 0, 4, 0}, {1, 0, 8, 0}, {2, 0, 1, 0}, {2, 1, 1, 0}};
    const lspec *Ls = small ? sml : big;
    const int nL = 3;
    const int(*vars)[4] = small ? vsml : vbig;
    const int nvars = small ? (int)(sizeof vsml / sizeof vsml[0]) : (int)(sizeof vbig / sizeof vbig[0]);
    unsigned long long *bad;
    CK(cudaMalloc(&bad, sizeof *bad));
    for (int li = 0; li < nL; li++) {
        const lspec &l = Ls[li];
        const int W = l.W;
        const int64_t bytes = l.blocklen * l.nblocks, span = l.stride * l.nblocks;
        char *user, *packed, *ref_user, *ref_packed;
        CK(cudaMalloc(&user, span));
        CK(cudaMalloc(&packed, bytes));
        CK(cudaMalloc(&ref_packed, bytes));
        CK(cudaMalloc(&ref_user, span));
        kfill<<<1024, NT>>>((uint32_t *)user, span / 4, 7);
        kfill<<<1024, NT>>>((uint32_t *)ref_user, span / 4, 99);
        /* references: 2-D copies of the layout */
        CK(cudaMemcpy2D(ref_packed, l.blocklen, user, l.stride, l.blocklen, l.nblocks, cudaMemcpyDeviceToDevice));
        CK(cudaMemcpy2D(ref_user, l.stride, ref_packed, l.blocklen, l.blocklen, l.nblocks, cudaMemcpyDeviceToDevice));
        for (int dir = 0; dir < 2; dir++) {
            const bool pack = dir == 0;
            const char *dn = pack ? "pack" : "unpack";
            /* the yardstick: memcpy of the packed bytes */
            const double tm = time_op([&] { CK(cudaMemcpyAsync(packed, ref_packed, bytes, cudaMemcpyDeviceToDevice, S)); },
                                      small);
            fprintf(csv, "%s,%s,%s,%s,%d,memcpy,0,0,0,%lld,%.3f,%.2f,1.000\n", dev, commit, l.name, dn, W,
                    (long long)bytes, tm, bytes / tm / 1e3);
            printf("%-10s %-6s memcpy                 %9.2f us %8.1f GB/s\n", l.name, dn, tm, bytes / tm / 1e3);
            for (int vi = 0; vi < nvars; vi++) {
                const int map = vars[vi][0], hint = vars[vi][1], u = vars[vi][2], bps = vars[vi][3];
                kfn f = kernel_of(W, map, hint, u, pack);
                if (!f) continue;
                lay a;
                a.user = user;
                a.packed = packed;
                a.nwords = (uint32_t)(bytes / W);
                a.stride = l.stride;
                gdte_fastdiv_init(&a.wpb, (uint64_t)(l.blocklen / W));
                int occ = 0;
                CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, f, NT, 0));
                if (bps > occ) continue;
                const int64_t per_block = (int64_t)NT * (map == 2 ? 1 : u);
                const unsigned grid = bps == 0 ? (unsigned)((a.nwords + per_block - 1) / per_block)
                                               : (unsigned)(bps * pr.multiProcessorCount);
                /* check: pack into poison; unpack into the reference's gaps with poisoned blocks */
                if (pack) CK(cudaMemset(packed, 0xa5, bytes));
                else {
                    kfill<<<1024, NT>>>((uint32_t *)user, span / 4, 99);
                    CK(cudaMemset2D(user, l.stride, 0xa5, l.blocklen, l.nblocks));
                    CK(cudaMemcpy(packed, ref_packed, bytes, cudaMemcpyDeviceToDevice));
                }
                f<<<grid, NT>>>(a);
                CK(cudaGetLastError());
                CK(cudaMemset(bad, 0, sizeof *bad));
                if (pack) kcmp<<<1024, NT>>>((const uint4 *)packed, (const uint4 *)ref_packed, bytes / 16, bad);
                else kcmp<<<1024, NT>>>((const uint4 *)user, (const uint4 *)ref_user, span / 16, bad);
                unsigned long long nbad = 0;
                CK(cudaMemcpy(&nbad, bad, sizeof nbad, cudaMemcpyDeviceToHost));
                if (nbad) {
                    fprintf(stderr, "VERIFY FAILED: %s %s map %d hint %d U %d: %llu words\n", l.name, dn, map, hint, u,
                            nbad);
                    return 1;
                }
                const double tk = time_op([&] { f<<<grid, NT, 0, S>>>(a); }, small);
                fprintf(csv, "%s,%s,%s,%s,%d,%d,%d,%d,%d,%lld,%.3f,%.2f,%.3f\n", dev, commit, l.name, dn, W, map, hint,
                        u, bps, (long long)bytes, tk, bytes / tk / 1e3, tm / tk);
                printf("%-10s %-6s map %d hint %d U %d bps %d (occ %d, grid %u) %9.2f us %8.1f GB/s x%.3f\n", l.name,
                       dn, map, hint, u, bps, occ, grid, tk, bytes / tk / 1e3, tm / tk);
                fflush(stdout);
            }
            /* map 3: map 2 with FLAT-sized arguments; gdte: the library's own pack of this layout */
            {
                lay_big b;
                memset(&b, 0, sizeof b);
                b.a.user = user;
                b.a.packed = packed;
                b.a.nwords = (uint32_t)(bytes / W);
                b.a.stride = l.stride;
                gdte_fastdiv_init(&b.a.wpb, (uint64_t)(l.blocklen / W));
                void (*f)(const lay_big) = W == 8 ? (pack ? k_big<8, true> : k_big<8, false>)
                                                  : (pack ? k_big<16, true> : k_big<16, false>);
                const unsigned grid = (unsigned)((b.a.nwords + NT - 1) / NT);
                const double tk = time_op([&] { f<<<grid, NT, 0, S>>>(b); }, small);
                fprintf(csv, "%s,%s,%s,%s,%d,3,0,1,0,%lld,%.3f,%.2f,%.3f\n", dev, commit, l.name, dn, W,
                        (long long)bytes, tk, bytes / tk / 1e3, tm / tk);
                printf("%-10s %-6s map 3 (FLAT-sized arguments)          %9.2f us %8.1f GB/s x%.3f\n", l.name, dn, tk,
                       bytes / tk / 1e3, tm / tk);
            }
            {
                gdte_type_h t = NULL, v = NULL;
                if (gdte_type_create_vector(l.nblocks, l.blocklen / 8, l.stride / 8, gdte_type_predefined(GDTE_BASIC_DOUBLE),
                                            &v) != GDTE_OK ||
                    gdte_type_commit(v) != GDTE_OK) {
                    fprintf(stderr, "flatlab: could not build the gdte type\n");
                    return 1;
                }
                t = v;
                gdte_pack_params_t p = {GDTE_PACK_FIELD_STREAM | GDTE_PACK_FIELD_FLAGS, 0, 0, (gdte_stream_t)S,
                                        GDTE_PACK_FLAG_ASYNC};
                int64_t done;
                const double tk = time_op(
                    [&] {
                        gdte_status_t st = pack ? gdte_pack(user, 1, t, packed, bytes, &p, &done)
                                                : gdte_unpack(packed, bytes, user, 1, t, &p, &done);
                        if (st != GDTE_OK || done != bytes) {
                            fprintf(stderr, "flatlab: gdte failed: %s\n", gdte_status_string(st));
                            exit(1);
                        }
                    },
                    small);
                fprintf(csv, "%s,%s,%s,%s,%d,gdte,0,0,0,%lld,%.3f,%.2f,%.3f\n", dev, commit, l.name, dn, W,
                        (long long)bytes, tk, bytes / tk / 1e3, tm / tk);
                printf("%-10s %-6s gdte_pack/unpack                    %9.2f us %8.1f GB/s x%.3f\n", l.name, dn, tk,
                       bytes / tk / 1e3, tm / tk);
                gdte_type_free(&t);
            }
        }
        CK(cudaFree(user));
        CK(cudaFree(packed));
        CK(cudaFree(ref_packed));
        CK(cudaFree(ref_user));
    }
    fclose(csv);
    gdte_finalize();
    return 0;
}
