/*
 * MPI-IO with device buffers: every read and write call, blocking, nonblocking and split
 * collective, with explicit offsets, individual and shared file pointers.
 *
 * The MPI does the file work (its views, collective buffering, file pointers, errors) on host
 * memory laid out as the application's buffer: a mirror (gdte_ipo_mirror_make) that holds the
 * bytes the datatype touches, copied in before the call (gdte's pack pipeline into host
 * staging, the host executor into the mirror). After a read they go back the same way, so bytes
 * between blocks are never written, and bytes the MPI did not read (a read the end of the file
 * stops early) keep their values whatever order the MPI fills the buffer in. (Copying back only
 * the first n bytes of the packed stream, n from the status, is not the same: Open MPI 4.1's
 * ompio fills a buffer of a non-monotone datatype in another order than its type map.)
 *
 * - Blocking calls copy back before they return.
 * - Nonblocking calls (MPI_File_iread* / iwrite*) return the MPI's own request; a request record
 *   (interpose_req.c) holds the mirror, and its completion (MPI_Wait, MPI_Test, ...) copies back
 *   and frees it.
 * - Split collectives (_begin / _end): the mirror is kept per file handle between the two (MPI
 *   allows one split collective per file handle at a time); the _end call gives the MPI the
 *   mirror in place of the buffer and copies back.
 *
 * Under any MPI, GPU-aware or not: whether an MPI's I/O layer reads device memory is not
 * something gdte can ask. Host buffers pass through untouched (one lookup of their kind). A
 * buffer partly host and partly device memory is MPI_ERR_BUFFER through the file's handler.
 * Errors of gdte's copies go through the file's handler too (files report MPI_ERRORS_RETURN by
 * default).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "interpose.h"
#include "interpose_coll.h"
#include "import.h"
#include "util/util.h"

static _Atomic int64_t n_reads, n_writes;

int64_t gdte_ipo_io_counter(const char *name)
{
    if (!strcmp(name, "io_reads")) return n_reads;
    if (!strcmp(name, "io_writes")) return n_writes;
    return -1;
}

/* clang-format off */
/* X(name, read, shape): shapes AT (explicit offset), FP (a file pointer), their nonblocking forms
 * IAT, IFP, split collectives' BEGIN_AT, BEGIN_FP and END. */
#define GDTE_IO_LIST(X) \
    X(MPI_File_read_at, 1, AT) X(MPI_File_read_at_all, 1, AT) X(MPI_File_write_at, 0, AT) \
    X(MPI_File_write_at_all, 0, AT) X(MPI_File_iread_at, 1, IAT) X(MPI_File_iwrite_at, 0, IAT) \
    X(MPI_File_iread_at_all, 1, IAT) X(MPI_File_iwrite_at_all, 0, IAT) X(MPI_File_read, 1, FP) \
    X(MPI_File_read_all, 1, FP) X(MPI_File_write, 0, FP) X(MPI_File_write_all, 0, FP) X(MPI_File_iread, 1, IFP) \
    X(MPI_File_iwrite, 0, IFP) X(MPI_File_iread_all, 1, IFP) X(MPI_File_iwrite_all, 0, IFP) \
    X(MPI_File_read_shared, 1, FP) X(MPI_File_write_shared, 0, FP) X(MPI_File_iread_shared, 1, IFP) \
    X(MPI_File_iwrite_shared, 0, IFP) X(MPI_File_read_ordered, 1, FP) X(MPI_File_write_ordered, 0, FP) \
    X(MPI_File_read_at_all_begin, 1, BEGIN_AT) X(MPI_File_read_at_all_end, 1, END) \
    X(MPI_File_write_at_all_begin, 0, BEGIN_AT) X(MPI_File_write_at_all_end, 0, END) \
    X(MPI_File_read_all_begin, 1, BEGIN_FP) X(MPI_File_read_all_end, 1, END) \
    X(MPI_File_write_all_begin, 0, BEGIN_FP) X(MPI_File_write_all_end, 0, END) \
    X(MPI_File_read_ordered_begin, 1, BEGIN_FP) X(MPI_File_read_ordered_end, 1, END) \
    X(MPI_File_write_ordered_begin, 0, BEGIN_FP) X(MPI_File_write_ordered_end, 0, END)
/* clang-format on */

/* ---- the next definitions in the chain (see interpose_core.c for why not PMPI_ directly) ---- */
static struct {
#define GDTE_X_IO_FIELD(name, rd, shape) __typeof__(&P##name) name;
    GDTE_IO_LIST(GDTE_X_IO_FIELD)
#undef GDTE_X_IO_FIELD
} io_next;

__attribute__((constructor)) static void io_resolve_next(void)
{
#define GDTE_X_IO_RESOLVE(name, rd, shape)                              \
    io_next.name = (__typeof__(io_next.name))dlsym(RTLD_NEXT, #name); \
    if (!io_next.name) io_next.name = P##name;
    GDTE_IO_LIST(GDTE_X_IO_RESOLVE)
#undef GDTE_X_IO_RESOLVE
}

/* ---- one call's mirror ---- */
typedef struct io_ctx {
    const char *fn;
    MPI_File fh;
    int rd;
    gdte_ipo_mirror_t m;
    struct io_ctx *next; /* split collectives in progress (io_split) */
} io_ctx_t;

static int io_fail(MPI_File fh, const char *fn, gdte_status_t st)
{
    int code = gdte_mpi_status_to_mpi_error(st);
    if (code == MPI_SUCCESS) code = MPI_ERR_INTERN;
    fprintf(stderr, "[gdte] %s on a device buffer failed: %s (%s)\n", fn, gdte_status_string(st),
            gdte_status_name(st));
    fflush(stderr);
    PMPI_File_call_errhandler(fh, code);
    return code;
}

enum { IO_PASS = -1 };

/* Whether the call is gdte's (a device buffer): then its mirror, filled for a write. Returns
 * IO_PASS (host memory: the MPI's as it is), MPI_SUCCESS, or an error already raised. */
static int io_pre(io_ctx_t *c, const char *fn, MPI_File fh, const void *buf, int count, MPI_Datatype dt, int rd)
{
    if (count <= 0 || dt == MPI_DATATYPE_NULL) return IO_PASS; /* (buf may be MPI_BOTTOM) */
    gdte_ipo_kind_t k = gdte_ipo_buf_kind(buf, count, dt);
    if (k == GDTE_IPO_HOST) return IO_PASS;
    memset(c, 0, sizeof *c);
    c->fn = fn;
    c->fh = fh;
    c->rd = rd;
    if (k == GDTE_IPO_MIXED) {
        gdte_error("%s: buf is partly host and partly device memory (MPI_ERR_BUFFER)", fn);
        PMPI_File_call_errhandler(fh, MPI_ERR_BUFFER);
        return MPI_ERR_BUFFER;
    }
    /* A read's mirror holds the buffer's bytes too (see the top: what the MPI does not read
     * stays as it was). */
    gdte_status_t st = gdte_ipo_mirror_make(&c->m, buf, count, dt, k, 1);
    if (st != GDTE_OK) {
        gdte_ipo_mirror_free(&c->m);
        return io_fail(fh, fn, st);
    }
    if (rd) n_reads++;
    else n_writes++;
    gdte_debug("%s: %lld bytes of device memory through a host mirror", fn, (long long)c->m.n);
    return MPI_SUCCESS;
}

/* After the MPI's call on the mirror: a read's bytes back, the mirror freed. Returns the call's
 * error code. */
static int io_post(io_ctx_t *c, int rc, const MPI_Status *st)
{
    (void)st;
    if (rc == MPI_SUCCESS && c->rd) {
        gdte_status_t s = gdte_ipo_mirror_out(&c->m, -1);
        if (s != GDTE_OK) rc = io_fail(c->fh, c->fn, s);
    }
    gdte_ipo_mirror_free(&c->m);
    return rc;
}

/* ---- nonblocking: the request record holds the mirror ---- */
static int io_req_finish(gdte_ipo_req_t *r, MPI_Status *st, int rc)
{
    io_ctx_t *c = r->ctx;
    if (!c) return rc;
    int erc = io_post(c, rc, st);
    return rc != MPI_SUCCESS ? rc : erc;
}

static void io_req_fini(gdte_ipo_req_t *r)
{
    io_ctx_t *c = r->ctx;
    if (c) {
        gdte_ipo_mirror_free(&c->m);
        free(c);
    }
    r->ctx = NULL;
}

static int io_nb_post(io_ctx_t *c0, int rc, MPI_Request *request)
{
    if (rc != MPI_SUCCESS || !request || *request == MPI_REQUEST_NULL) {
        gdte_ipo_mirror_free(&c0->m);
        return rc;
    }
    io_ctx_t *c = malloc(sizeof *c);
    gdte_ipo_req_t *r = c ? gdte_ipo_req_new() : NULL;
    if (!r) {
        /* The MPI works on the mirror: it must outlive the operation, so wait here. */
        free(c);
        MPI_Status st;
        rc = IPO_NEXT(Wait)(request, &st);
        return io_post(c0, rc, &st);
    }
    *c = *c0;
    gdte_coll_req_insert(r, *request, MPI_COMM_NULL, 0, NULL, io_req_finish, io_req_fini, c);
    return MPI_SUCCESS;
}

/* ---- split collectives: the mirror between _begin and _end, per file handle ---- */
static pthread_mutex_t split_lock = PTHREAD_MUTEX_INITIALIZER;
static io_ctx_t *split_head;

static int io_split_keep(io_ctx_t *c0, int rc)
{
    if (rc != MPI_SUCCESS) {
        gdte_ipo_mirror_free(&c0->m);
        return rc;
    }
    io_ctx_t *c = malloc(sizeof *c);
    if (!c) {
        /* The MPI holds the mirror until _end: it cannot go; the begun call is left to fail. */
        gdte_ipo_mirror_free(&c0->m);
        return io_fail(c0->fh, c0->fn, GDTE_ERR_NO_MEMORY);
    }
    *c = *c0;
    pthread_mutex_lock(&split_lock);
    c->next = split_head;
    split_head = c;
    pthread_mutex_unlock(&split_lock);
    return MPI_SUCCESS;
}

static io_ctx_t *io_split_take(MPI_File fh)
{
    pthread_mutex_lock(&split_lock);
    io_ctx_t **pp = &split_head, *c = NULL;
    while (*pp && (*pp)->fh != fh) pp = &(*pp)->next;
    if (*pp) {
        c = *pp;
        *pp = c->next;
    }
    pthread_mutex_unlock(&split_lock);
    return c;
}

/* ---- the shims ---- */
#define IO_CV_1
#define IO_CV_0 const
#define IO_CV(rd) IO_CV_##rd

#define IO_SHIM_AT(name, rd)                                                                                     \
    GDTE_IPO_EXPORT int name(MPI_File fh, MPI_Offset offset, IO_CV(rd) void *buf, int count, MPI_Datatype dt,    \
                             MPI_Status *status)                                                                 \
    {                                                                                                            \
        if (!gdte_ipo_on()) return io_next.name(fh, offset, buf, count, dt, status);                              \
        gdte_ipo_block_flush();                                                                                  \
        io_ctx_t c;                                                                                              \
        int pre = io_pre(&c, #name, fh, buf, count, dt, rd);                                                     \
        if (pre == IO_PASS) return io_next.name(fh, offset, buf, count, dt, status);                              \
        if (pre != MPI_SUCCESS) return pre;                                                                      \
        MPI_Status st;                                                                                           \
        memset(&st, 0, sizeof st);                                                                               \
        int rc = io_post(&c, io_next.name(fh, offset, c.m.base, count, dt, &st), &st);                            \
        gdte_ipo_status_out(status, &st);                                                                        \
        return rc;                                                                                               \
    }
#define IO_SHIM_FP(name, rd)                                                                                     \
    GDTE_IPO_EXPORT int name(MPI_File fh, IO_CV(rd) void *buf, int count, MPI_Datatype dt, MPI_Status *status)    \
    {                                                                                                            \
        if (!gdte_ipo_on()) return io_next.name(fh, buf, count, dt, status);                                      \
        gdte_ipo_block_flush();                                                                                  \
        io_ctx_t c;                                                                                              \
        int pre = io_pre(&c, #name, fh, buf, count, dt, rd);                                                     \
        if (pre == IO_PASS) return io_next.name(fh, buf, count, dt, status);                                      \
        if (pre != MPI_SUCCESS) return pre;                                                                      \
        MPI_Status st;                                                                                           \
        memset(&st, 0, sizeof st);                                                                               \
        int rc = io_post(&c, io_next.name(fh, c.m.base, count, dt, &st), &st);                                    \
        gdte_ipo_status_out(status, &st);                                                                        \
        return rc;                                                                                               \
    }
#define IO_SHIM_IAT(name, rd)                                                                                    \
    GDTE_IPO_EXPORT int name(MPI_File fh, MPI_Offset offset, IO_CV(rd) void *buf, int count, MPI_Datatype dt,    \
                             MPI_Request *request)                                                               \
    {                                                                                                            \
        if (!gdte_ipo_on()) return io_next.name(fh, offset, buf, count, dt, request);                             \
        gdte_ipo_pending_flush();                                                                                \
        io_ctx_t c;                                                                                              \
        int pre = io_pre(&c, #name, fh, buf, count, dt, rd);                                                     \
        if (pre == IO_PASS) return io_next.name(fh, offset, buf, count, dt, request);                             \
        if (pre != MPI_SUCCESS) return pre;                                                                      \
        return io_nb_post(&c, io_next.name(fh, offset, c.m.base, count, dt, request), request);                  \
    }
#define IO_SHIM_IFP(name, rd)                                                                                    \
    GDTE_IPO_EXPORT int name(MPI_File fh, IO_CV(rd) void *buf, int count, MPI_Datatype dt, MPI_Request *request)  \
    {                                                                                                            \
        if (!gdte_ipo_on()) return io_next.name(fh, buf, count, dt, request);                                     \
        gdte_ipo_pending_flush();                                                                                \
        io_ctx_t c;                                                                                              \
        int pre = io_pre(&c, #name, fh, buf, count, dt, rd);                                                     \
        if (pre == IO_PASS) return io_next.name(fh, buf, count, dt, request);                                     \
        if (pre != MPI_SUCCESS) return pre;                                                                      \
        return io_nb_post(&c, io_next.name(fh, c.m.base, count, dt, request), request);                          \
    }
#define IO_SHIM_BEGIN_AT(name, rd)                                                                               \
    GDTE_IPO_EXPORT int name(MPI_File fh, MPI_Offset offset, IO_CV(rd) void *buf, int count, MPI_Datatype dt)    \
    {                                                                                                            \
        if (!gdte_ipo_on()) return io_next.name(fh, offset, buf, count, dt);                                      \
        gdte_ipo_block_flush();                                                                                  \
        io_ctx_t c;                                                                                              \
        int pre = io_pre(&c, #name, fh, buf, count, dt, rd);                                                     \
        if (pre == IO_PASS) return io_next.name(fh, offset, buf, count, dt);                                      \
        if (pre != MPI_SUCCESS) return pre;                                                                      \
        return io_split_keep(&c, io_next.name(fh, offset, c.m.base, count, dt));                                  \
    }
#define IO_SHIM_BEGIN_FP(name, rd)                                                                               \
    GDTE_IPO_EXPORT int name(MPI_File fh, IO_CV(rd) void *buf, int count, MPI_Datatype dt)                       \
    {                                                                                                            \
        if (!gdte_ipo_on()) return io_next.name(fh, buf, count, dt);                                              \
        gdte_ipo_block_flush();                                                                                  \
        io_ctx_t c;                                                                                              \
        int pre = io_pre(&c, #name, fh, buf, count, dt, rd);                                                     \
        if (pre == IO_PASS) return io_next.name(fh, buf, count, dt);                                              \
        if (pre != MPI_SUCCESS) return pre;                                                                      \
        return io_split_keep(&c, io_next.name(fh, c.m.base, count, dt));                                          \
    }
/* _end: the begun call's mirror, if it was gdte's (the buffer argument is the begun one's). */
#define IO_SHIM_END(name, rd)                                                                                    \
    GDTE_IPO_EXPORT int name(MPI_File fh, IO_CV(rd) void *buf, MPI_Status *status)                               \
    {                                                                                                            \
        if (!gdte_ipo_on()) return io_next.name(fh, buf, status);                                                 \
        gdte_ipo_block_flush();                                                                                  \
        io_ctx_t *c = io_split_take(fh);                                                                         \
        if (!c) return io_next.name(fh, buf, status);                                                             \
        MPI_Status st;                                                                                           \
        memset(&st, 0, sizeof st);                                                                               \
        int rc = io_post(c, io_next.name(fh, c->m.base, &st), &st);                                               \
        free(c);                                                                                                 \
        gdte_ipo_status_out(status, &st);                                                                        \
        return rc;                                                                                               \
    }

#define GDTE_X_IO_SHIM(name, rd, shape) IO_SHIM_##shape(name, rd)
GDTE_IO_LIST(GDTE_X_IO_SHIM)
#undef GDTE_X_IO_SHIM
