/* The backend of bench/coll without CUDA (collbench_backend.h): host memory, the boxes copied
 * by loops, no IPC. Runs in CI on fake device memory as a smoke test. */
#include <stdlib.h>
#include <string.h>
#include "collbench_backend.h"

int cb_init(int rank)
{
    (void)rank;
    return -1;
}
int cb_has_ipc(void) { return 0; }
const char *cb_device_name(void) { return "host"; }
void *cb_alloc(size_t bytes) { return calloc(1, bytes ? bytes : 1); }
void cb_free(void *p) { free(p); }
void cb_put(void *dev, const void *host, size_t bytes) { memcpy(dev, host, bytes); }
void cb_get(void *host, const void *dev, size_t bytes) { memcpy(host, dev, bytes); }
void cb_box(int unpack, void *array, void *dense, const long sizes[3], const long sub[3], const long starts[3],
            int elem)
{
    char *a = array, *d = dense;
    size_t row = (size_t)sub[2] * elem;
    for (long i = 0; i < sub[0]; i++)
        for (long j = 0; j < sub[1]; j++) {
            char *p = a + (((starts[0] + i) * sizes[1] + starts[1] + j) * sizes[2] + starts[2]) * elem;
            if (unpack) memcpy(p, d, row);
            else memcpy(d, p, row);
            d += row;
        }
}
void cb_copy_async(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void cb_sum_rows(double *out, const double *rows, int nrows, long n)
{
    for (long i = 0; i < n; i++) {
        double a = 0;
        for (int r = 0; r < nrows; r++) a += rows[(long)r * n + i];
        out[i] = a;
    }
}
void cb_sync(void) {}
size_t cb_ipc_handle_size(void) { return 0; }
int cb_ipc_get(void *p, void *handle)
{
    (void)p, (void)handle;
    return -1;
}
void *cb_ipc_open(const void *handle)
{
    (void)handle;
    return NULL;
}
void cb_ipc_close(void *p) { (void)p; }
