/* The GPU runtime layer when gdte is built without a GPU backend: no device, host memory. */
#include <string.h>
#include "gpu.h"

gdte_gpu_backend_t gdte_gpu_backend(void) { return GDTE_GPU_BACKEND_NONE; }
const char *gdte_gpu_backend_name(void) { return "none"; }
gdte_status_t gdte_gpu_init(int device) { (void)device; return GDTE_OK; }
void gdte_gpu_finalize(void) {}
int gdte_gpu_available(void) { return 0; }
int gdte_gpu_device_count(void) { return 0; }
int gdte_gpu_current_device(void) { return -1; }
gdte_status_t gdte_gpu_set_device(int d) { (void)d; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_get_props(int d, gdte_gpu_props_t *p) { (void)d; (void)p; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_can_access_peer(int d, int p, int *c) { (void)d; (void)p; if (c) *c = 0; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_enable_peer(int p) { (void)p; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_malloc(void **p, size_t n) { (void)p; (void)n; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_free(void *p) { (void)p; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_host_alloc(void **p, size_t n, int m) { (void)p; (void)n; (void)m; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_host_free(void *p) { (void)p; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_host_register(void *p, size_t n) { (void)p; (void)n; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_host_unregister(void *p) { (void)p; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_host_device_pointer(void *h, void **d) { (void)h; (void)d; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_pointer_query(const void *ptr, gdte_mem_info_t *info)
{
    (void)ptr;
    info->kind = GDTE_MEM_HOST;
    info->device = -1;
    return GDTE_OK;
}
gdte_status_t gdte_gpu_mem_range(const void *p, void **b, size_t *n) { (void)p; (void)b; (void)n; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_buffer_id(const void *p, uint64_t *id) { (void)p; (void)id; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_memset(void *p, int v, size_t n) { (void)p; (void)v; (void)n; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_memset_async(void *p, int v, size_t n, gdte_stream_t s) { (void)p; (void)v; (void)n; (void)s; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_memcpy(void *d, const void *s, size_t n) { (void)d; (void)s; (void)n; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_memcpy_async(void *d, const void *s, size_t n, gdte_stream_t st) { (void)d; (void)s; (void)n; (void)st; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_memcpy2d_async(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h, gdte_stream_t st)
{ (void)d; (void)dp; (void)s; (void)sp; (void)w; (void)h; (void)st; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_memcpy3d_async(void *d, size_t dp, size_t dr, const void *s, size_t sp, size_t sr, size_t w, size_t h,
                                      size_t z, gdte_stream_t st)
{ (void)d; (void)dp; (void)dr; (void)s; (void)sp; (void)sr; (void)w; (void)h; (void)z; (void)st; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_memcpy_peer_async(void *d, int dd, const void *s, int sd, size_t n, gdte_stream_t st)
{ (void)d; (void)dd; (void)s; (void)sd; (void)n; (void)st; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_stream_create(gdte_stream_t *s) { (void)s; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_stream_create_urgent(gdte_stream_t *s) { (void)s; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_stream_destroy(gdte_stream_t s) { (void)s; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_stream_synchronize(gdte_stream_t s) { (void)s; return GDTE_OK; }
gdte_status_t gdte_gpu_event_create(gdte_gpu_event_t *e, int t) { (void)e; (void)t; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_event_destroy(gdte_gpu_event_t e) { (void)e; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_event_record(gdte_gpu_event_t e, gdte_stream_t s) { (void)e; (void)s; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_event_query(gdte_gpu_event_t e) { (void)e; return GDTE_OK; }
gdte_status_t gdte_gpu_event_synchronize(gdte_gpu_event_t e) { (void)e; return GDTE_OK; }
gdte_status_t gdte_gpu_event_elapsed_ms(gdte_gpu_event_t a, gdte_gpu_event_t b, float *ms) { (void)a; (void)b; (void)ms; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_stream_wait_event(gdte_stream_t s, gdte_gpu_event_t e) { (void)s; (void)e; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_device_synchronize(void) { return GDTE_OK; }
gdte_status_t gdte_gpu_capture_begin(gdte_stream_t s) { (void)s; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_capture_end(gdte_stream_t s, gdte_gpu_graph_t *g) { (void)s; (void)g; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_graph_launch(gdte_gpu_graph_t g, gdte_stream_t s) { (void)g; (void)s; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_graph_destroy(gdte_gpu_graph_t g) { (void)g; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_ipc_get_handle(void *p, gdte_gpu_ipc_handle_t *h) { (void)p; (void)h; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_ipc_open(const gdte_gpu_ipc_handle_t *h, void **p) { (void)h; (void)p; return GDTE_ERR_NO_DEVICE; }
gdte_status_t gdte_gpu_ipc_close(void *p) { (void)p; return GDTE_ERR_NO_DEVICE; }
uint64_t gdte_gpu_unmap_epoch(void) { return 0; }
const char *gdte_gpu_last_error(void) { return "no GPU backend in this build"; }
