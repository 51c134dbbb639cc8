/*
 * Device memory as the protocols see it: allocation, IPC export/open/close, copies and
 * completion events. Normally the GPU runtime (src/gpu). For tests on machines without a GPU,
 * an emulation (gdte_proto_test_emulate_ipc) stands in: "device" buffers are POSIX shared
 * memory, an IPC handle is the segment's name, copies, packs and events are synchronous host
 * operations. The emulation runs the device paths of both protocols (RDMA rings, READY/DONE,
 * credits, shortcuts, mapping caches, fallbacks; copy-in/out's device staging and zero copy)
 * between two processes; it says nothing about GPUs themselves.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "kernels/memquery.h"
#include "proto_int.h"

static int emulate;
static int emu_delay; /* emulated GPU work stays pending for up to this many polls */

void gdte_proto_test_emulate_ipc(int on) { emulate = on; }
void gdte_proto_test_emulate_delay(int polls) { emu_delay = polls < 0 ? 0 : polls; }
int gdte_rdma_emulated(void) { return emulate; }

/* ---- the emulation's shared-memory segments -------------------------------------------------- */
#define EMU_SEGS 512
typedef struct {
    char *base;
    size_t size;
    char name[40];
    int mine; /* created here (unlink on free), or opened from a peer */
} emu_seg_t;
static emu_seg_t segs[EMU_SEGS];
static unsigned emu_counter;

typedef struct {
    char name[40];
    uint64_t size;
} emu_handle_t;
_Static_assert(sizeof(emu_handle_t) <= GDTE_GPU_IPC_HANDLE_BYTES, "emulated handle too large");

static emu_seg_t *seg_of(const void *p)
{
    for (int i = 0; i < EMU_SEGS; i++)
        if (segs[i].base && (const char *)p >= segs[i].base && (const char *)p < segs[i].base + segs[i].size)
            return &segs[i];
    return NULL;
}

static emu_seg_t *seg_free_slot(void)
{
    for (int i = 0; i < EMU_SEGS; i++)
        if (!segs[i].base) return &segs[i];
    return NULL;
}

void *gdte_proto_test_shm_alloc(size_t size)
{
    emu_seg_t *s = seg_free_slot();
    if (!s || size == 0) return NULL;
    /* Names carry a per-process nonce besides the pid: a segment left behind by a killed process
     * (the kill tests' victims exit without cleaning up) must not collide with a later process
     * that gets the same pid. An existing name is skipped, not reused. */
    static unsigned nonce;
    if (!nonce) nonce = (unsigned)time(NULL) ^ ((unsigned)getpid() << 16) ^ (unsigned)(uintptr_t)&nonce;
    int fd = -1;
    for (int tries = 0; tries < 64 && fd < 0; tries++) {
        snprintf(s->name, sizeof s->name, "/gdte-emu-%d-%x-%u", (int)getpid(), nonce, emu_counter++);
        fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return NULL;
    if (ftruncate(fd, (off_t)size) != 0) {
        close(fd);
        shm_unlink(s->name);
        return NULL;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(s->name);
        return NULL;
    }
    s->base = p;
    s->size = size;
    s->mine = 1;
    return p;
}

void gdte_proto_test_shm_free(void *p)
{
    emu_seg_t *s = p ? seg_of(p) : NULL;
    if (!s) return;
    munmap(s->base, s->size);
    if (s->mine) shm_unlink(s->name);
    s->base = NULL;
}

/* ---- the interface ----------------------------------------------------------------------------- */
int gdte_rdma_capable(const struct gdte_comm *ctx) { return ctx->gpu || emulate; }

int gdte_rdma_buffer_ok(const struct gdte_msg_req *req)
{
    if (emulate) {
        emu_seg_t *s = req->size > 0 ? seg_of((const char *)req->buf + req->L.disp) : NULL;
        return s && s->mine;
    }
    return req->on_dev;
}

int gdte_rdma_exportable(const struct gdte_msg_req *req)
{
    return emulate ? gdte_rdma_buffer_ok(req) : req->mem_kind == GDTE_MEM_DEVICE;
}

gdte_status_t gdte_rdma_alloc(struct gdte_comm *ctx, gdte_stg_class_t cls, int64_t bytes, int shared,
                              gdte_stg_buf_t **buf_p)
{
    if (!emulate) return gdte_stg_get(&ctx->pool, GDTE_STG_DEVICE, cls, bytes, buf_p);
    if (!shared) return gdte_stg_get(&ctx->pool, GDTE_STG_HOST, cls, bytes, buf_p);
    gdte_stg_buf_t *b = calloc(1, sizeof *b);
    if (!b) return GDTE_ERR_NO_MEMORY;
    b->ptr = gdte_proto_test_shm_alloc((size_t)bytes);
    if (!b->ptr) {
        free(b);
        return GDTE_ERR_NO_DEVICE_MEMORY;
    }
    b->size = (size_t)bytes;
    b->share = (uint8_t)cls;
    b->kind = GDTE_GPU_POOL_KINDS_; /* marks an emulated segment: not the pool's, charged to it */
    gdte_gpu_pool_charge(&ctx->pool, cls, bytes);
    *buf_p = b;
    return GDTE_OK;
}

void gdte_rdma_free(struct gdte_comm *ctx, gdte_stg_buf_t *b)
{
    if (!b) return;
    if (b->kind != GDTE_GPU_POOL_KINDS_) {
        gdte_stg_put(&ctx->pool, b);
        return;
    }
    gdte_gpu_pool_charge(&ctx->pool, b->share, -(int64_t)b->size);
    gdte_proto_test_shm_free(b->ptr);
    free(b);
}

gdte_status_t gdte_rdma_export(const void *ptr, gdte_gpu_ipc_handle_t *h, int64_t *off_p)
{
    if (emulate) {
        emu_seg_t *s = seg_of(ptr);
        if (!s || !s->mine) return GDTE_ERR_MEMORY_KIND;
        emu_handle_t eh;
        memset(&eh, 0, sizeof eh);
        memcpy(eh.name, s->name, sizeof eh.name);
        eh.size = s->size;
        memset(h, 0, sizeof *h);
        memcpy(h->bytes, &eh, sizeof eh);
        *off_p = (const char *)ptr - s->base;
        return GDTE_OK;
    }
    void *base;
    size_t size;
    gdte_status_t st = gdte_gpu_mem_range(ptr, &base, &size);
    if (st != GDTE_OK) return st;
    if ((st = gdte_gpu_ipc_get_handle(base, h)) != GDTE_OK) return st;
    *off_p = (const char *)ptr - (const char *)base;
    return GDTE_OK;
}

gdte_status_t gdte_rdma_open(const gdte_gpu_ipc_handle_t *h, void **base_p)
{
    if (!emulate) return gdte_gpu_ipc_open(h, base_p);
    emu_handle_t eh;
    memcpy(&eh, h->bytes, sizeof eh);
    eh.name[sizeof eh.name - 1] = 0;
    /* As CUDA: an allocation is mapped into a process at most once (cudaErrorAlreadyMapped). */
    for (int i = 0; i < EMU_SEGS; i++)
        if (segs[i].base && !segs[i].mine && !strcmp(segs[i].name, eh.name)) {
            gdte_error("emulated IPC: %s is already mapped in this process (cudaErrorAlreadyMapped)", eh.name);
            return GDTE_ERR_GPU;
        }
    emu_seg_t *s = seg_free_slot();
    if (!s) return GDTE_ERR_NO_MEMORY;
    int fd = shm_open(eh.name, O_RDWR, 0);
    if (fd < 0) return GDTE_ERR_GPU;
    void *p = mmap(NULL, (size_t)eh.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return GDTE_ERR_GPU;
    s->base = p;
    s->size = (size_t)eh.size;
    memcpy(s->name, eh.name, sizeof s->name);
    s->mine = 0;
    *base_p = p;
    return GDTE_OK;
}

void gdte_rdma_close(void *base)
{
    if (emulate) {
        gdte_proto_test_shm_free(base);
        return;
    }
    /* The memory-kind cache knows the mapping as device memory: forget it, or a later
     * allocation at the same addresses could be taken for it. */
    void *b;
    size_t n;
    if (gdte_gpu_mem_range(base, &b, &n) == GDTE_OK) gdte_memquery_forget(b, n);
    gdte_gpu_ipc_close(base);
}

gdte_status_t gdte_rdma_copy(struct gdte_msg_req *req, void *dst, const void *src, int64_t n)
{
    if (emulate) {
        memcpy(dst, src, (size_t)n);
        return GDTE_OK;
    }
    return gdte_gpu_memcpy_async(dst, src, (size_t)n, gdte_proto_stream(req));
}

/* Emulated completion: the work itself ran at once on the host, but the event reads as pending
 * for 0..emu_delay polls (a fixed pseudo-random sequence), so that completions come late and
 * out of order as on a GPU, and the protocols' state machines see the interleavings they see
 * there (a DONE after a local copy while the unpack still runs, a READY for a slot not yet
 * free). Entries are named by the address of the event variable; the table only delays, so
 * an entry left behind by a failed path costs at most a few polls of a later event. */
#define EMU_EVENTS 1024
static struct {
    const void *key;
    int left;
} emu_ev[EMU_EVENTS];
static unsigned emu_ev_seq;

static void emu_event_record(const void *key)
{
    int left = emu_delay ? (int)((emu_ev_seq++ * 2654435761u) >> 16) % (emu_delay + 1) : 0;
    int free_i = -1;
    for (int i = 0; i < EMU_EVENTS; i++) {
        if (emu_ev[i].key == key) {
            emu_ev[i].left = left;
            if (!left) emu_ev[i].key = NULL;
            return;
        }
        if (!emu_ev[i].key && free_i < 0) free_i = i;
    }
    if (left && free_i >= 0) {
        emu_ev[free_i].key = key;
        emu_ev[free_i].left = left;
    }
}

static gdte_status_t emu_event_query(const void *key)
{
    for (int i = 0; i < EMU_EVENTS; i++)
        if (emu_ev[i].key == key) {
            if (emu_ev[i].left-- > 0) return GDTE_INPROGRESS;
            emu_ev[i].key = NULL;
            return GDTE_OK;
        }
    return GDTE_OK;
}

gdte_status_t gdte_rdma_record(struct gdte_msg_req *req, gdte_gpu_event_t *ev)
{
    if (!emulate) return gdte_proto_record(req, ev);
    emu_event_record(ev);
    return GDTE_OK;
}

gdte_status_t gdte_rdma_query(gdte_gpu_event_t *ev)
{
    return emulate ? emu_event_query(ev) : gdte_gpu_event_query(*ev);
}

int gdte_rdma_gpu_work(void) { return !emulate; }
