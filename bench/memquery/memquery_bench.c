/*
 * bench/memquery: the host cost of gdte's memory-kind decision (gdte_mem_query), which every
 * interposed MPI call and every gdte_pack makes for each buffer, validated by the allocation's
 * unique id (src/kernels/memquery.c). Beside it, in the same run, the runtime's own
 * uncached pointer query (gdte_gpu_pointer_query: cudaPointerGetAttributes).
 *
 * Usage: memquery_bench [CSV]. Rows: device,commit,what,ns_per_call. Exits 77 without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "gdte.h"
#include "gpu/gpu.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

typedef gdte_status_t (*query_fn)(const void *, gdte_mem_info_t *);

/* Median over 15 runs of `iters` queries of `p`. */
static double time_query(query_fn f, const void *p, int iters)
{
    double t[15];
    gdte_mem_info_t mi;
    for (int r = 0; r < 15; r++) {
        double a = now_ns();
        for (int i = 0; i < iters; i++) f((const char *)p + (i & 255), &mi);
        t[r] = (now_ns() - a) / iters;
    }
    for (int i = 0; i < 15; i++)
        for (int j = i + 1; j < 15; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j];
                t[j] = x;
            }
    return t[7];
}

int main(int argc, char **argv)
{
    if (gdte_init(NULL) != GDTE_OK || !gdte_gpu_available()) {
        printf("memquery_bench: no GPU: skipped\n");
        return 77;
    }
    gdte_gpu_props_t pr;
    gdte_gpu_get_props(gdte_gpu_current_device(), &pr);
    const char *commit = getenv("GDTETEST_COMMIT");
    void *d, *pin;
    char *h = malloc(1 << 20);
    memset(h, 1, 1 << 20);
    if (gdte_gpu_malloc(&d, 1 << 20) != GDTE_OK || gdte_gpu_host_alloc(&pin, 1 << 20, 1) != GDTE_OK) return 1;
    uint64_t id = 0;
    int have_id = gdte_gpu_buffer_id(d, &id) == GDTE_OK && id != 0;
    struct {
        const char *what;
        query_fn f;
        const void *p;
    } rows[] = {
        {"gdte_mem_query_device", gdte_mem_query, d},
        {"gdte_mem_query_pageable", gdte_mem_query, h},
        {"gdte_mem_query_pinned", gdte_mem_query, pin},
        {"runtime_pointer_query_device", gdte_gpu_pointer_query, d},
        {"runtime_pointer_query_pageable", gdte_gpu_pointer_query, h},
    };
    FILE *csv = argc > 1 ? fopen(argv[1], "w") : NULL;
    if (csv) fprintf(csv, "device,commit,what,ns_per_call\n");
    printf("memory-kind decision (buffer-id validation %s):\n", have_id ? "on" : "unavailable");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        time_query(rows[i].f, rows[i].p, 2000); /* warm-up */
        double ns = time_query(rows[i].f, rows[i].p, 20000);
        printf("  %-32s %8.1f ns\n", rows[i].what, ns);
        if (csv) fprintf(csv, "%s,%s,%s,%.1f\n", pr.name, commit ? commit : "unknown", rows[i].what, ns);
    }
    if (csv) fclose(csv);
    gdte_gpu_free(d);
    gdte_gpu_host_free(pin);
    free(h);
    gdte_finalize();
    return 0;
}
