/* The backend of bench/mpi's programs when they are built without CUDA (mpibench_backend.h):
 * no device memory, so only --mem host runs; mb_init says why --mem device cannot. */
#include <stdio.h>
#include "mpibench_backend.h"

int mb_init(int r)
{
    (void)r;
    fprintf(stderr, "built without CUDA: --mem device is not available\n");
    return -1;
}
const char *mb_device_name(void) { return "host"; }
const char *mb_device_key(void) { return ""; }
void *mb_alloc(size_t bytes)
{
    (void)bytes;
    return NULL;
}
void mb_free(void *p) { (void)p; }
void mb_memcpy(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; }
void mb_copy_async(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; }
void mb_sync(void) {}
size_t mb_ipc_handle_size(void) { return 0; }
int mb_ipc_get(void *p, void *handle)
{
    (void)p, (void)handle;
    return -1;
}
void *mb_ipc_open(const void *handle)
{
    (void)handle;
    return NULL;
}
void mb_ipc_close(void *p) { (void)p; }
