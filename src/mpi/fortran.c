/*
 * Fortran bindings of the calls gdte carries.
 *
 * Open MPI's Fortran libraries (libmpi_mpifh for mpif.h and `use mpi`, libmpi_usempif08 for
 * `use mpi_f08`) call PMPI_* directly, so a Fortran program would bypass the C MPI_* functions
 * libgdte_mpi.so defines, and its device buffers would reach an MPI that cannot read them. This
 * file defines the Fortran entry points of those calls under every name Open MPI exports for
 * them: mpi_x, mpi_x_, mpi_x__, MPI_X, the pmpi_ twins, and ompi_x_f, the C function through
 * which Open MPI's mpi_f08 module calls (so `use mpi_f08` is covered too). Each converts handles
 * (MPI_*_f2c/c2f), statuses, LOGICALs and 1-based indices, maps the Fortran sentinels
 * (MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE, MPI_STATUSES_IGNORE: addresses of Open MPI's
 * common blocks, found once by name) to the C ones, and calls the C MPI_* function, which the
 * dynamic linker binds to libgdte_mpi.so's own (so device buffers are carried, and a PMPI tool
 * preloaded after gdte still sees the calls). MPI_Init, MPI_Init_thread and MPI_Finalize are
 * here too: without them gdte would never start in a Fortran program.
 *
 * Fortran INTEGER and LOGICAL are MPI_Fint (4 bytes with gfortran); .TRUE. is 1, as Open MPI
 * built with gfortran takes it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "interpose.h"

typedef MPI_Fint F;

/* INTEGERs in a Fortran status: MPI-4's constant, else Open MPI's rule (a C status' size). */
#ifdef MPI_F_STATUS_SIZE
#define FSTATUS_SIZE MPI_F_STATUS_SIZE
#else
#define FSTATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

/* ---- the Fortran sentinels ---- */
enum { S_BOTTOM, S_IN_PLACE, S_STATUS_IGNORE, S_STATUSES_IGNORE, S_COUNT };
static const void *sentinel[S_COUNT][5];
static pthread_once_t sentinel_once = PTHREAD_ONCE_INIT;

static void sentinel_find(void)
{
    static const char *const base[S_COUNT] = {"bottom", "in_place", "status_ignore", "statuses_ignore"};
    for (int s = 0; s < S_COUNT; s++) {
        /* The manglings of the common block mpi_fortran_<base>. */
        char n[4][64];
        snprintf(n[0], sizeof n[0], "mpi_fortran_%s", base[s]);
        snprintf(n[1], sizeof n[1], "mpi_fortran_%s_", base[s]);
        snprintf(n[2], sizeof n[2], "mpi_fortran_%s__", base[s]);
        snprintf(n[3], sizeof n[3], "MPI_FORTRAN_%s", base[s]);
        for (char *c = n[3] + 12; *c; c++)
            if (*c >= 'a' && *c <= 'z') *c = (char)(*c - 'a' + 'A');
        for (int i = 0; i < 4; i++) sentinel[s][i] = dlsym(RTLD_DEFAULT, n[i]);
    }
    sentinel[S_STATUS_IGNORE][4] = MPI_F_STATUS_IGNORE;
    sentinel[S_STATUSES_IGNORE][4] = MPI_F_STATUSES_IGNORE;
}

static int is_sentinel(const void *p, int s)
{
    pthread_once(&sentinel_once, sentinel_find);
    for (int i = 0; i < 5; i++)
        if (sentinel[s][i] && p == sentinel[s][i]) return 1;
    return 0;
}

/* A buffer argument: MPI_BOTTOM's common block is address 0 to C. */
static void *fbuf(void *p) { return is_sentinel(p, S_BOTTOM) ? MPI_BOTTOM : p; }
/* A send buffer that may be MPI_IN_PLACE. */
static void *fsbuf(void *p) { return is_sentinel(p, S_IN_PLACE) ? MPI_IN_PLACE : fbuf(p); }
static MPI_Status *fstatus(F *f, MPI_Status *c) { return !f || is_sentinel(f, S_STATUS_IGNORE) ? MPI_STATUS_IGNORE : c; }
static int statuses_ignored(const F *f) { return !f || is_sentinel(f, S_STATUSES_IGNORE); }
static void status_out(int rc, MPI_Status *c, F *f)
{
    if (c != MPI_STATUS_IGNORE && (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)) MPI_Status_c2f(c, f);
}
static void ret(F *ierr, int rc)
{
    if (ierr) *ierr = (F)rc;
}

#define CT(x) MPI_Type_f2c(*(x))
#define CC(x) MPI_Comm_f2c(*(x))
#define CO(x) MPI_Op_f2c(*(x))

/* Request arrays: converted into scratch (on the stack up to SMALL). */
#define SMALL 16
typedef struct {
    MPI_Request small_r[SMALL];
    MPI_Status small_s[SMALL];
    int small_i[SMALL];
    MPI_Request *r;
    MPI_Status *s;
    int *i;
} arrays_t;

static int arrays_get(arrays_t *a, int n, const F *freqs)
{
    a->r = a->small_r, a->s = a->small_s, a->i = a->small_i;
    if (n > SMALL) {
        a->r = malloc((size_t)n * sizeof *a->r);
        a->s = malloc((size_t)n * sizeof *a->s);
        a->i = malloc((size_t)n * sizeof *a->i);
        if (!a->r || !a->s || !a->i) return MPI_ERR_NO_MEM;
    }
    for (int k = 0; k < n; k++) a->r[k] = MPI_Request_f2c(freqs[k]);
    return MPI_SUCCESS;
}

static void arrays_put(arrays_t *a, int n, F *freqs)
{
    for (int k = 0; k < n; k++) freqs[k] = MPI_Request_c2f(a->r[k]);
    if (a->r != a->small_r) free(a->r), free(a->s), free(a->i);
}

static void arrays_drop(arrays_t *a)
{
    if (a->r != a->small_r) free(a->r), free(a->s), free(a->i);
}

/* ---- the bodies ---- */
static void f_init(F *ierr) { ret(ierr, MPI_Init(NULL, NULL)); }
static void f_init_thread(F *required, F *provided, F *ierr)
{
    int p = 0;
    int rc = MPI_Init_thread(NULL, NULL, (int)*required, &p);
    if (rc == MPI_SUCCESS) *provided = (F)p;
    ret(ierr, rc);
}
static void f_finalize(F *ierr) { ret(ierr, MPI_Finalize()); }

#define SEND_BODY(lower, Camel)                                                                  \
    static void f_##lower(void *buf, F *count, F *dt, F *dest, F *tag, F *comm, F *ierr)         \
    {                                                                                            \
        ret(ierr, MPI_##Camel(fbuf(buf), (int)*count, CT(dt), (int)*dest, (int)*tag, CC(comm))); \
    }
SEND_BODY(send, Send)
SEND_BODY(ssend, Ssend)
SEND_BODY(bsend, Bsend)
SEND_BODY(rsend, Rsend)

/* Nonblocking sends, persistent sends and receives: (buf, count, type, peer, tag, comm, request). */
#define REQ_BODY(lower, Camel)                                                                         \
    static void f_##lower(void *buf, F *count, F *dt, F *peer, F *tag, F *comm, F *req, F *ierr)       \
    {                                                                                                  \
        MPI_Request r = MPI_REQUEST_NULL;                                                              \
        int rc = MPI_##Camel(fbuf(buf), (int)*count, CT(dt), (int)*peer, (int)*tag, CC(comm), &r);     \
        if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(r);                                              \
        ret(ierr, rc);                                                                                 \
    }
REQ_BODY(isend, Isend)
REQ_BODY(issend, Issend)
REQ_BODY(ibsend, Ibsend)
REQ_BODY(irsend, Irsend)
REQ_BODY(irecv, Irecv)
REQ_BODY(send_init, Send_init)
REQ_BODY(ssend_init, Ssend_init)
REQ_BODY(bsend_init, Bsend_init)
REQ_BODY(rsend_init, Rsend_init)
REQ_BODY(recv_init, Recv_init)

static void f_recv(void *buf, F *count, F *dt, F *src, F *tag, F *comm, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    int rc = MPI_Recv(fbuf(buf), (int)*count, CT(dt), (int)*src, (int)*tag, CC(comm), cs);
    status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_sendrecv(void *sbuf, F *scount, F *sdt, F *dest, F *stag, void *rbuf, F *rcount, F *rdt, F *src, F *rtag,
                       F *comm, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    int rc = MPI_Sendrecv(fbuf(sbuf), (int)*scount, CT(sdt), (int)*dest, (int)*stag, fbuf(rbuf), (int)*rcount, CT(rdt),
                          (int)*src, (int)*rtag, CC(comm), cs);
    status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_sendrecv_replace(void *buf, F *count, F *dt, F *dest, F *stag, F *src, F *rtag, F *comm, F *status,
                               F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    int rc = MPI_Sendrecv_replace(fbuf(buf), (int)*count, CT(dt), (int)*dest, (int)*stag, (int)*src, (int)*rtag,
                                  CC(comm), cs);
    status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_mprobe(F *src, F *tag, F *comm, F *msg, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    MPI_Message m = MPI_MESSAGE_NULL;
    int rc = MPI_Mprobe((int)*src, (int)*tag, CC(comm), &m, cs);
    if (rc == MPI_SUCCESS) *msg = MPI_Message_c2f(m);
    status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_improbe(F *src, F *tag, F *comm, F *flag, F *msg, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    MPI_Message m = MPI_MESSAGE_NULL;
    int fl = 0;
    int rc = MPI_Improbe((int)*src, (int)*tag, CC(comm), &fl, &m, cs);
    if (rc == MPI_SUCCESS) {
        *flag = fl ? 1 : 0;
        if (fl) *msg = MPI_Message_c2f(m);
    }
    if (fl) status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_mrecv(void *buf, F *count, F *dt, F *msg, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    MPI_Message m = MPI_Message_f2c(*msg);
    int rc = MPI_Mrecv(fbuf(buf), (int)*count, CT(dt), &m, cs);
    if (rc == MPI_SUCCESS) *msg = MPI_Message_c2f(m);
    status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_imrecv(void *buf, F *count, F *dt, F *msg, F *req, F *ierr)
{
    MPI_Message m = MPI_Message_f2c(*msg);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Imrecv(fbuf(buf), (int)*count, CT(dt), &m, &r);
    if (rc == MPI_SUCCESS) *msg = MPI_Message_c2f(m), *req = MPI_Request_c2f(r);
    ret(ierr, rc);
}

/* ---- requests ---- */
static void f_start(F *req, F *ierr)
{
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Start(&r);
    *req = MPI_Request_c2f(r);
    ret(ierr, rc);
}

static void f_startall(F *count, F *reqs, F *ierr)
{
    arrays_t a;
    int n = (int)*count, rc = arrays_get(&a, n, reqs);
    if (rc != MPI_SUCCESS) {
        arrays_drop(&a);
        ret(ierr, rc);
        return;
    }
    rc = MPI_Startall(n, a.r);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void f_request_free(F *req, F *ierr)
{
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Request_free(&r);
    if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(MPI_REQUEST_NULL);
    ret(ierr, rc);
}

static void f_request_get_status(F *req, F *flag, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    int fl = 0;
    int rc = MPI_Request_get_status(MPI_Request_f2c(*req), &fl, cs);
    if (rc == MPI_SUCCESS) *flag = fl ? 1 : 0;
    if (fl) status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_wait(F *req, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    MPI_Request r = MPI_Request_f2c(*req);
    int rc = MPI_Wait(&r, cs);
    *req = MPI_Request_c2f(r);
    status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_test(F *req, F *flag, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    MPI_Request r = MPI_Request_f2c(*req);
    int fl = 0;
    int rc = MPI_Test(&r, &fl, cs);
    *req = MPI_Request_c2f(r);
    *flag = fl ? 1 : 0;
    if (fl) status_out(rc, cs, status);
    ret(ierr, rc);
}

/* The first n statuses (by position: the *some calls fill them in completion order). */
static void statuses_out(int rc, const arrays_t *a, int n, F *fst)
{
    if (statuses_ignored(fst) || (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)) return;
    for (int k = 0; k < n; k++) MPI_Status_c2f(&a->s[k], fst + (size_t)k * FSTATUS_SIZE);
}

static void f_waitall(F *count, F *reqs, F *statuses, F *ierr)
{
    arrays_t a;
    int n = (int)*count, rc = arrays_get(&a, n, reqs);
    if (rc != MPI_SUCCESS) {
        arrays_drop(&a);
        ret(ierr, rc);
        return;
    }
    rc = MPI_Waitall(n, a.r, statuses_ignored(statuses) ? MPI_STATUSES_IGNORE : a.s);
    statuses_out(rc, &a, n, statuses);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void f_testall(F *count, F *reqs, F *flag, F *statuses, F *ierr)
{
    arrays_t a;
    int n = (int)*count, fl = 0, rc = arrays_get(&a, n, reqs);
    if (rc != MPI_SUCCESS) {
        arrays_drop(&a);
        ret(ierr, rc);
        return;
    }
    rc = MPI_Testall(n, a.r, &fl, statuses_ignored(statuses) ? MPI_STATUSES_IGNORE : a.s);
    *flag = fl ? 1 : 0;
    if (fl || rc == MPI_ERR_IN_STATUS) statuses_out(rc, &a, n, statuses);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void f_waitany(F *count, F *reqs, F *index, F *status, F *ierr)
{
    arrays_t a;
    MPI_Status c, *cs = fstatus(status, &c);
    int n = (int)*count, idx = MPI_UNDEFINED, rc = arrays_get(&a, n, reqs);
    if (rc != MPI_SUCCESS) {
        arrays_drop(&a);
        ret(ierr, rc);
        return;
    }
    rc = MPI_Waitany(n, a.r, &idx, cs);
    *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;
    status_out(rc, cs, status);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void f_testany(F *count, F *reqs, F *index, F *flag, F *status, F *ierr)
{
    arrays_t a;
    MPI_Status c, *cs = fstatus(status, &c);
    int n = (int)*count, idx = MPI_UNDEFINED, fl = 0, rc = arrays_get(&a, n, reqs);
    if (rc != MPI_SUCCESS) {
        arrays_drop(&a);
        ret(ierr, rc);
        return;
    }
    rc = MPI_Testany(n, a.r, &idx, &fl, cs);
    *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;
    *flag = fl ? 1 : 0;
    if (fl) status_out(rc, cs, status);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void some(int test, F *incount, F *reqs, F *outcount, F *indices, F *statuses, F *ierr)
{
    arrays_t a;
    int n = (int)*incount, out = 0, rc = arrays_get(&a, n, reqs);
    if (rc != MPI_SUCCESS) {
        arrays_drop(&a);
        ret(ierr, rc);
        return;
    }
    MPI_Status *cs = statuses_ignored(statuses) ? MPI_STATUSES_IGNORE : a.s;
    rc = test ? MPI_Testsome(n, a.r, &out, a.i, cs) : MPI_Waitsome(n, a.r, &out, a.i, cs);
    *outcount = out;
    if (out != MPI_UNDEFINED) {
        for (int k = 0; k < out; k++) indices[k] = a.i[k] + 1;
        statuses_out(rc, &a, out, statuses);
    }
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}
static void f_waitsome(F *n, F *reqs, F *out, F *idx, F *st, F *ierr) { some(0, n, reqs, out, idx, st, ierr); }
static void f_testsome(F *n, F *reqs, F *out, F *idx, F *st, F *ierr) { some(1, n, reqs, out, idx, st, ierr); }

/* ---- pack, types ---- */
static void f_pack(void *in, F *incount, F *dt, void *out, F *outsize, F *position, F *comm, F *ierr)
{
    int pos = (int)*position;
    int rc = MPI_Pack(fbuf(in), (int)*incount, CT(dt), out, (int)*outsize, &pos, CC(comm));
    if (rc == MPI_SUCCESS) *position = pos;
    ret(ierr, rc);
}

static void f_unpack(void *in, F *insize, F *position, void *out, F *outcount, F *dt, F *comm, F *ierr)
{
    int pos = (int)*position;
    int rc = MPI_Unpack(in, (int)*insize, &pos, fbuf(out), (int)*outcount, CT(dt), CC(comm));
    if (rc == MPI_SUCCESS) *position = pos;
    ret(ierr, rc);
}

static void f_type_free(F *dt, F *ierr)
{
    MPI_Datatype t = MPI_Type_f2c(*dt);
    int rc = MPI_Type_free(&t);
    if (rc == MPI_SUCCESS) *dt = MPI_Type_c2f(MPI_DATATYPE_NULL);
    ret(ierr, rc);
}

/* ---- reductions ---- */
static void f_reduce(void *s, void *r, F *count, F *dt, F *op, F *root, F *comm, F *ierr)
{
    ret(ierr, MPI_Reduce(fsbuf(s), fbuf(r), (int)*count, CT(dt), CO(op), (int)*root, CC(comm)));
}
static void f_ireduce(void *s, void *r, F *count, F *dt, F *op, F *root, F *comm, F *req, F *ierr)
{
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Ireduce(fsbuf(s), fbuf(r), (int)*count, CT(dt), CO(op), (int)*root, CC(comm), &q);
    if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(q);
    ret(ierr, rc);
}

/* (sendbuf, recvbuf, count, type, op, comm) and the nonblocking twin. */
#define RED_BODY(lower, Camel, CountT, CARG)                                                             \
    static void f_##lower(void *s, void *r, CountT count, F *dt, F *op, F *comm, F *ierr)                \
    {                                                                                                    \
        ret(ierr, MPI_##Camel(fsbuf(s), fbuf(r), CARG, CT(dt), CO(op), CC(comm)));                       \
    }                                                                                                    \
    static void f_i##lower(void *s, void *r, CountT count, F *dt, F *op, F *comm, F *req, F *ierr)       \
    {                                                                                                    \
        MPI_Request q = MPI_REQUEST_NULL;                                                                \
        int rc = MPI_I##lower(fsbuf(s), fbuf(r), CARG, CT(dt), CO(op), CC(comm), &q);                    \
        if (rc == MPI_SUCCESS) *req = MPI_Request_c2f(q);                                                \
        ret(ierr, rc);                                                                                   \
    }
RED_BODY(allreduce, Allreduce, F *, (int)*count)
RED_BODY(reduce_scatter_block, Reduce_scatter_block, F *, (int)*count)
RED_BODY(scan, Scan, F *, (int)*count)
RED_BODY(exscan, Exscan, F *, (int)*count)
/* MPI_Fint is int: the counts array goes through as it is. */
RED_BODY(reduce_scatter, Reduce_scatter, F *, (const int *)count)

static void f_reduce_local(void *in, void *inout, F *count, F *dt, F *op, F *ierr)
{
    ret(ierr, MPI_Reduce_local(fbuf(in), fbuf(inout), (int)*count, CT(dt), CO(op)));
}

/* ---- the names: mpi_x, mpi_x_, mpi_x__, MPI_X, the pmpi_ twins, and ompi_x_f ---- */
#define FALIAS(sym, target) \
    extern __typeof__(target) sym __attribute__((alias(#target), visibility("default")));
#define FNAMES(lower, UPPER)                                                                                    \
    FALIAS(mpi_##lower, f_##lower) FALIAS(mpi_##lower##_, f_##lower) FALIAS(mpi_##lower##__, f_##lower)        \
    FALIAS(MPI_##UPPER, f_##lower) FALIAS(pmpi_##lower, f_##lower) FALIAS(pmpi_##lower##_, f_##lower)          \
    FALIAS(pmpi_##lower##__, f_##lower) FALIAS(PMPI_##UPPER, f_##lower) FALIAS(ompi_##lower##_f, f_##lower)

/* clang-format off */
#define GDTE_FORTRAN_LIST(X) \
    X(init, INIT) X(init_thread, INIT_THREAD) X(finalize, FINALIZE) \
    X(send, SEND) X(ssend, SSEND) X(bsend, BSEND) X(rsend, RSEND) \
    X(isend, ISEND) X(issend, ISSEND) X(ibsend, IBSEND) X(irsend, IRSEND) \
    X(recv, RECV) X(irecv, IRECV) X(sendrecv, SENDRECV) X(sendrecv_replace, SENDRECV_REPLACE) \
    X(mprobe, MPROBE) X(improbe, IMPROBE) X(mrecv, MRECV) X(imrecv, IMRECV) \
    X(send_init, SEND_INIT) X(ssend_init, SSEND_INIT) X(bsend_init, BSEND_INIT) X(rsend_init, RSEND_INIT) \
    X(recv_init, RECV_INIT) X(start, START) X(startall, STARTALL) \
    X(wait, WAIT) X(test, TEST) X(waitall, WAITALL) X(testall, TESTALL) X(waitany, WAITANY) X(testany, TESTANY) \
    X(waitsome, WAITSOME) X(testsome, TESTSOME) X(request_free, REQUEST_FREE) \
    X(request_get_status, REQUEST_GET_STATUS) \
    X(pack, PACK) X(unpack, UNPACK) X(type_free, TYPE_FREE) \
    X(reduce, REDUCE) X(ireduce, IREDUCE) X(allreduce, ALLREDUCE) X(iallreduce, IALLREDUCE) \
    X(reduce_scatter, REDUCE_SCATTER) X(ireduce_scatter, IREDUCE_SCATTER) \
    X(reduce_scatter_block, REDUCE_SCATTER_BLOCK) X(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK) \
    X(scan, SCAN) X(iscan, ISCAN) X(exscan, EXSCAN) X(iexscan, IEXSCAN) X(reduce_local, REDUCE_LOCAL)
/* clang-format on */
GDTE_FORTRAN_LIST(FNAMES)
