/*
 * copy_bench: the GPU time of the node path's buffer-to-buffer copies, alone, in one process:
 * what a receiver's kernel costs per message without the protocol around it (markers, FINs,
 * synchronisation, the other process). For each payload size: a window of 64 back-to-back
 * copies on one stream, timed by events (us per copy, median of RUNS windows), for
 *   memcpy       cudaMemcpyAsync of the payload (the raw baseline's copy),
 *   memcpy_span  cudaMemcpyAsync of the vector's whole span (twice the payload),
 *   vec_vec      gdte_gpu_exec_copy, 8-byte blocks at a 16-byte stride on both sides (bench/mpi's
 *                vector, the node path's mirror copy),
 *   vec_contig   the same into a dense buffer (a packed copy's kernel),
 *   batch_vec    the window's 64 vec_vec copies as one batched kernel (gdte_gpu_exec_batch, mirror
 *                pieces: what the node path's receiver launches for a pass's arrivals),
 *   memcpy_one / vec_vec_one  one copy alone between two events, synchronized: the GPU time of
 *                the copy without the host's submission rate (median of RUNS * 4).
 * The buffers are reused across the window, as bench/mpi's are (they stay in L2 up to ~16 MiB).
 * CSV: device,commit,method,bytes,us_per_copy,gbps_payload,ratio_to_memcpy
 * Usage: copy_bench OUT.csv [sizes in bytes, comma-separated]   (commit from GDTETEST_COMMIT)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/layout.h"
#include "gpu/gpu.h"
#include "kernels/kernels.h"
#include "util/util.h"

#define RUNS 15
#define WINDOW 64

static int cmpf(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

#define CK(call)                                                                                  \
    do {                                                                                          \
        gdte_status_t st_ = (call);                                                               \
        if (st_ != GDTE_OK) {                                                                     \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, gdte_status_name(st_)); \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static gdte_layout_t vec(int64_t bytes)
{
    gdte_layout_t L;
    memset(&L, 0, sizeof L);
    L.kind = GDTE_LAYOUT_KIND_STRIDED;
    L.ndims = 1;
    L.blocklen = 8;
    L.count[0] = bytes / 8;
    L.stride[0] = 16;
    L.total = bytes;
    L.align = 8;
    return L;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: copy_bench OUT.csv [sizes]\n");
        return 2;
    }
    int64_t sizes[16], ns = 0;
    const char *list = argc > 2 ? argv[2] : "1048576,4194304,16777216";
    for (const char *p = list; *p && ns < 16;) {
        sizes[ns++] = atoll(p);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    CK(gdte_gpu_init(0));
    gdte_gpu_props_t pr;
    CK(gdte_gpu_get_props(0, &pr));
    const char *commit = getenv("GDTETEST_COMMIT") ? getenv("GDTETEST_COMMIT") : "unknown";
    FILE *csv = fopen(argv[1], "w");
    if (!csv) return 1;
    fprintf(csv, "device,commit,method,bytes,us_per_copy,gbps_payload,ratio_to_memcpy\n");
    gdte_stream_t s;
    CK(gdte_gpu_stream_create(&s));
    gdte_gpu_event_t e0, e1;
    CK(gdte_gpu_event_create(&e0, 1));
    CK(gdte_gpu_event_create(&e1, 1));
    for (int64_t si = 0; si < ns; si++) {
        int64_t n = sizes[si];
        void *a, *b;
        CK(gdte_gpu_malloc(&a, (size_t)(2 * n)));
        CK(gdte_gpu_malloc(&b, (size_t)(2 * n)));
        gdte_layout_t V = vec(n), C;
        memset(&C, 0, sizeof C);
        C.kind = GDTE_LAYOUT_KIND_CONTIG;
        C.blocklen = n;
        C.total = n;
        C.align = 16;
        const char *names[7] = {"memcpy", "memcpy_span", "vec_vec", "vec_contig", "batch_vec", "memcpy_one", "vec_vec_one"};
        gdte_batch_piece_t pieces[WINDOW];
        for (int w = 0; w < WINDOW; w++) {
            memset(&pieces[w], 0, sizeof pieces[w]);
            pieces[w].L = V;
            pieces[w].user = (char *)b;
            pieces[w].packed = (int64_t)(uintptr_t)a;
            pieces[w].mirror = 1;
        }
        void *scratch;
        CK(gdte_gpu_malloc(&scratch, gdte_gpu_exec_batch_scratch(WINDOW)));
        float memcpy_us = 0;
        for (int m = 0; m < 7; m++) {
            const int one = m >= 5, runs = one ? 4 * RUNS : RUNS;
            float t[4 * RUNS];
            for (int r = -2; r < runs; r++) {
                CK(gdte_gpu_event_record(e0, s));
                for (int w = 0; w < (one ? 1 : WINDOW); w++) {
                    if (m == 0 || m == 5) CK(gdte_gpu_memcpy_async(b, a, (size_t)n, s));
                    else if (m == 1) CK(gdte_gpu_memcpy_async(b, a, (size_t)(2 * n), s));
                    else if (m == 2 || m == 6) CK(gdte_gpu_exec_copy(&V, a, &V, b, 0, n, s, 0));
                    else if (m == 3) CK(gdte_gpu_exec_copy(&V, a, &C, b, 0, n, s, 0));
                    else if (w == 0) CK(gdte_gpu_exec_batch(pieces, WINDOW, GDTE_DIR_UNPACK, NULL, scratch, s));
                }
                CK(gdte_gpu_event_record(e1, s));
                CK(gdte_gpu_event_synchronize(e1));
                float ms = 0;
                CK(gdte_gpu_event_elapsed_ms(e0, e1, &ms));
                if (r >= 0) t[r] = ms * 1000.0f / (one ? 1 : WINDOW);
            }
            qsort(t, runs, sizeof *t, cmpf);
            float us = t[runs / 2];
            if (m == 0) memcpy_us = us;
            printf("copy_bench %-12s %10lld B %9.2f us per copy %9.1f GB/s payload  x%.3f\n", names[m], (long long)n,
                   us, n / (us * 1e3), memcpy_us / us);
            fprintf(csv, "%s,%s,%s,%lld,%.3f,%.1f,%.3f\n", pr.name, commit, names[m], (long long)n, us, n / (us * 1e3),
                    memcpy_us / us);
        }
        gdte_gpu_free(scratch);
        gdte_gpu_free(a);
        gdte_gpu_free(b);
    }
    fclose(csv);
    return 0;
}
