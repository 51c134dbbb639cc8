/*
 * Fortran bindings of the calls gdte carries (point-to-point, persistent, completion, pack, the
 * collectives and reductions, blocking, nonblocking and persistent, MPI_Pack_external and
 * MPI_Unpack_external, the buffer of buffered sends) and of those it refuses (refuse.h:
 * one-sided, MPI-IO), so that a Fortran program gets the same refusal as a C
 * one instead of an MPI reading device memory; and of the synchronisation calls that may block
 * inside the MPI (shims_sync.c: MPI_Barrier, window synchronisation, closing and syncing files),
 * before which gdte posts what a peer may be waiting for.
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
 * here too: without them gdte would never start in a Fortran program. Open MPI's persistent
 * collectives (its pcollreq extension) are named mpix_x_init and its twins, and ompix_x_init_f
 * for its mpi_f08_ext module; MPI-4's persistent collectives, where mpi.h declares them, are
 * named as the other calls.
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
#include "refuse.h" /* mpi-ext.h: the persistent collectives where the MPI has them */

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
/* A single status: the C one starts as the application's, so that the MPI_ERROR field a
 * single-completion call leaves alone comes back as it was. */
static MPI_Status *fstatus(F *f, MPI_Status *c)
{
    if (!f || is_sentinel(f, S_STATUS_IGNORE)) return MPI_STATUS_IGNORE;
    MPI_Status_f2c(f, c);
    return c;
}
static int statuses_ignored(const F *f) { return !f || is_sentinel(f, S_STATUSES_IGNORE); }
static void status_out(int rc, MPI_Status *c, F *f)
{
    if (c != MPI_STATUS_IGNORE && (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)) MPI_Status_c2f(c, f);
}
static void ret(F *ierr, int rc)
{
    if (ierr) *ierr = (F)rc;
}
/* The same, and a new request or communicator handed back where the call succeeded. */
static void ret_req(F *ierr, int rc, F *freq, MPI_Request q)
{
    if (rc == MPI_SUCCESS) *freq = MPI_Request_c2f(q);
    ret(ierr, rc);
}
static void ret_comm(F *ierr, int rc, F *fcomm, MPI_Comm c)
{
    if (rc == MPI_SUCCESS) *fcomm = MPI_Comm_c2f(c);
    ret(ierr, rc);
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

static void arrays_drop(arrays_t *a)
{
    if (a->r != a->small_r) free(a->r), free(a->s), free(a->i);
}

/* The n requests converted; 0 (MPI_ERR_NO_MEM in ierr, nothing held) without memory for them. */
static int arrays_get(arrays_t *a, int n, const F *freqs, F *ierr)
{
    a->r = a->small_r, a->s = a->small_s, a->i = a->small_i;
    if (n > SMALL) {
        a->r = malloc((size_t)n * sizeof *a->r);
        a->s = malloc((size_t)n * sizeof *a->s);
        a->i = malloc((size_t)n * sizeof *a->i);
        if (!a->r || !a->s || !a->i) {
            arrays_drop(a);
            ret(ierr, MPI_ERR_NO_MEM);
            return 0;
        }
    }
    for (int k = 0; k < n; k++) a->r[k] = MPI_Request_f2c(freqs[k]);
    return 1;
}

/* The requests back, and the scratch released. */
static void arrays_put(arrays_t *a, int n, F *freqs)
{
    for (int k = 0; k < n; k++) freqs[k] = MPI_Request_c2f(a->r[k]);
    arrays_drop(a);
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
        ret_req(ierr, rc, req, r);                                                                     \
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

/* Probes, cancel and the communicator constructors: the node path wraps them (a probe that
 * sees a marker reports its message's size; a node-path send is not cancelled; a new
 * communicator gets its shadow), so the Fortran names must reach the same C shims. */
static void f_probe(F *src, F *tag, F *comm, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    int rc = MPI_Probe((int)*src, (int)*tag, CC(comm), cs);
    status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_iprobe(F *src, F *tag, F *comm, F *flag, F *status, F *ierr)
{
    MPI_Status c, *cs = fstatus(status, &c);
    int fl = 0;
    int rc = MPI_Iprobe((int)*src, (int)*tag, CC(comm), &fl, cs);
    if (rc == MPI_SUCCESS) *flag = fl ? 1 : 0;
    if (fl) status_out(rc, cs, status);
    ret(ierr, rc);
}

static void f_cancel(F *req, F *ierr)
{
    MPI_Request r = MPI_Request_f2c(*req);
    ret(ierr, MPI_Cancel(&r));
}

static void f_comm_dup(F *comm, F *newcomm, F *ierr)
{
    MPI_Comm n = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(CC(comm), &n);
    ret_comm(ierr, rc, newcomm, n);
}

static void f_comm_split(F *comm, F *color, F *key, F *newcomm, F *ierr)
{
    MPI_Comm n = MPI_COMM_NULL;
    int rc = MPI_Comm_split(CC(comm), (int)*color, (int)*key, &n);
    ret_comm(ierr, rc, newcomm, n);
}

static void f_comm_split_type(F *comm, F *type, F *key, F *info, F *newcomm, F *ierr)
{
    MPI_Comm n = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(CC(comm), (int)*type, (int)*key, MPI_Info_f2c(*info), &n);
    ret_comm(ierr, rc, newcomm, n);
}

static void f_comm_create(F *comm, F *group, F *newcomm, F *ierr)
{
    MPI_Comm n = MPI_COMM_NULL;
    int rc = MPI_Comm_create(CC(comm), MPI_Group_f2c(*group), &n);
    ret_comm(ierr, rc, newcomm, n);
}

static void f_cart_create(F *comm, F *ndims, F *dims, F *periods, F *reorder, F *newcomm, F *ierr)
{
    int nd = (int)*ndims;
    int *d = malloc(sizeof(int) * (size_t)(nd > 0 ? 2 * nd : 1));
    if (!d) {
        ret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    for (int i = 0; i < nd; i++) d[i] = (int)dims[i], d[nd + i] = periods[i] != 0; /* LOGICAL: nonzero is true */
    MPI_Comm n = MPI_COMM_NULL;
    int rc = MPI_Cart_create(CC(comm), nd, d, d + nd, *reorder != 0, &n);
    free(d);
    ret_comm(ierr, rc, newcomm, n);
}

static void f_cart_sub(F *comm, F *remain, F *newcomm, F *ierr)
{
    int nd = 0;
    MPI_Cartdim_get(CC(comm), &nd);
    int *r = malloc(sizeof(int) * (size_t)(nd > 0 ? nd : 1));
    if (!r) {
        ret(ierr, MPI_ERR_NO_MEM);
        return;
    }
    for (int i = 0; i < nd; i++) r[i] = remain[i] != 0;
    MPI_Comm n = MPI_COMM_NULL;
    int rc = MPI_Cart_sub(CC(comm), r, &n);
    free(r);
    ret_comm(ierr, rc, newcomm, n);
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
    int n = (int)*count;
    if (!arrays_get(&a, n, reqs, ierr)) return;
    int rc = MPI_Startall(n, a.r);
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
    int n = (int)*count;
    if (!arrays_get(&a, n, reqs, ierr)) return;
    int rc = MPI_Waitall(n, a.r, statuses_ignored(statuses) ? MPI_STATUSES_IGNORE : a.s);
    statuses_out(rc, &a, n, statuses);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void f_testall(F *count, F *reqs, F *flag, F *statuses, F *ierr)
{
    arrays_t a;
    int n = (int)*count, fl = 0;
    if (!arrays_get(&a, n, reqs, ierr)) return;
    int rc = MPI_Testall(n, a.r, &fl, statuses_ignored(statuses) ? MPI_STATUSES_IGNORE : a.s);
    *flag = fl ? 1 : 0;
    if (fl || rc == MPI_ERR_IN_STATUS) statuses_out(rc, &a, n, statuses);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void f_waitany(F *count, F *reqs, F *index, F *status, F *ierr)
{
    arrays_t a;
    MPI_Status c, *cs = fstatus(status, &c);
    int n = (int)*count, idx = MPI_UNDEFINED;
    if (!arrays_get(&a, n, reqs, ierr)) return;
    int rc = MPI_Waitany(n, a.r, &idx, cs);
    *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;
    status_out(rc, cs, status);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void f_testany(F *count, F *reqs, F *index, F *flag, F *status, F *ierr)
{
    arrays_t a;
    MPI_Status c, *cs = fstatus(status, &c);
    int n = (int)*count, idx = MPI_UNDEFINED, fl = 0;
    if (!arrays_get(&a, n, reqs, ierr)) return;
    int rc = MPI_Testany(n, a.r, &idx, &fl, cs);
    *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1;
    *flag = fl ? 1 : 0;
    if (fl) status_out(rc, cs, status);
    arrays_put(&a, n, reqs);
    ret(ierr, rc);
}

static void some(int test, F *incount, F *reqs, F *outcount, F *indices, F *statuses, F *ierr)
{
    arrays_t a;
    int n = (int)*incount, out = 0;
    if (!arrays_get(&a, n, reqs, ierr)) return;
    MPI_Status *cs = statuses_ignored(statuses) ? MPI_STATUSES_IGNORE : a.s;
    int rc = test ? MPI_Testsome(n, a.r, &out, a.i, cs) : MPI_Waitsome(n, a.r, &out, a.i, cs);
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

/* ---- reductions (the collective ones with the collectives below) ---- */
static void f_reduce_local(void *in, void *inout, F *count, F *dt, F *op, F *ierr)
{
    ret(ierr, MPI_Reduce_local(fbuf(in), fbuf(inout), (int)*count, CT(dt), CO(op)));
}

/* ---- collectives and reductions (interpose_coll.c, interpose_reduce.c): blocking, nonblocking,
 * persistent ----
 * COLL3(lower, Camel, (Fortran parameters), (C arguments), (before), (after)) defines f_<lower>,
 * f_i<lower> and, where the MPI declares them, the persistent fx_<lower>_init (Open MPI's
 * MPIX_<Camel>_init) and f4_<lower>_init (MPI-4's MPI_<Camel>_init). `before` may set `rc` to
 * an error (nothing is called then); `after` releases what `before` made. A send buffer may be
 * MPI_IN_PLACE or MPI_BOTTOM, a receive buffer MPI_BOTTOM (Scatter's MPI_IN_PLACE too). */
#define U_(...) __VA_ARGS__
#define COLL_BLOCKING(lower, Camel, FP, CA, PRE, POST)                        \
    static void f_##lower(U_ FP, F *comm, F *ierr)                            \
    {                                                                         \
        int rc = MPI_SUCCESS;                                                 \
        U_ PRE;                                                               \
        if (rc == MPI_SUCCESS) rc = MPI_##Camel(U_ CA, CC(comm));             \
        U_ POST;                                                              \
        ret(ierr, rc);                                                        \
    }                                                                         \
    static void f_i##lower(U_ FP, F *comm, F *req, F *ierr)                   \
    {                                                                         \
        int rc = MPI_SUCCESS;                                                 \
        MPI_Request q = MPI_REQUEST_NULL;                                     \
        U_ PRE;                                                               \
        if (rc == MPI_SUCCESS) rc = MPI_I##lower(U_ CA, CC(comm), &q);        \
        U_ POST;                                                              \
        ret_req(ierr, rc, req, q);                                            \
    }
#define COLL_PINIT(fname, cfn, FP, CA, PRE, POST)                              \
    static void fname(U_ FP, F *comm, F *info, F *req, F *ierr)               \
    {                                                                         \
        int rc = MPI_SUCCESS;                                                 \
        MPI_Request q = MPI_REQUEST_NULL;                                     \
        U_ PRE;                                                               \
        if (rc == MPI_SUCCESS) rc = cfn(U_ CA, CC(comm), MPI_Info_f2c(*info), &q); \
        U_ POST;                                                              \
        ret_req(ierr, rc, req, q);                                            \
    }
#ifdef GDTE_HAVE_MPIX_PCOLL
#define COLL_PX(lower, Camel, FP, CA, PRE, POST) COLL_PINIT(fx_##lower##_init, MPIX_##Camel##_init, FP, CA, PRE, POST)
#else
#define COLL_PX(lower, Camel, FP, CA, PRE, POST)
#endif
#ifdef GDTE_HAVE_MPI4_PCOLL
#define COLL_P4(lower, Camel, FP, CA, PRE, POST) COLL_PINIT(f4_##lower##_init, MPI_##Camel##_init, FP, CA, PRE, POST)
#else
#define COLL_P4(lower, Camel, FP, CA, PRE, POST)
#endif
#define COLL3(lower, Camel, FP, CA, PRE, POST)       \
    COLL_BLOCKING(lower, Camel, FP, CA, PRE, POST)   \
    COLL_PX(lower, Camel, FP, CA, PRE, POST)         \
    COLL_P4(lower, Camel, FP, CA, PRE, POST)
#define NONE_ ()

/* MPI_Fint is int (the counts and displacements arrays go through as they are). */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER is not a C int");

/* (sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype[, root]) */
#define FP_U (void *s, F *sc, F *st, void *r, F *rcnt, F *rt)
#define CA_U (fsbuf(s), (int)*sc, CT(st), fsbuf(r), (int)*rcnt, CT(rt))
COLL3(alltoall, Alltoall, FP_U, CA_U, NONE_, NONE_)
COLL3(allgather, Allgather, FP_U, CA_U, NONE_, NONE_)
COLL3(neighbor_alltoall, Neighbor_alltoall, FP_U, CA_U, NONE_, NONE_)
COLL3(neighbor_allgather, Neighbor_allgather, FP_U, CA_U, NONE_, NONE_)
#define FP_UR (void *s, F *sc, F *st, void *r, F *rcnt, F *rt, F *root)
#define CA_UR (fsbuf(s), (int)*sc, CT(st), fsbuf(r), (int)*rcnt, CT(rt), (int)*root)
COLL3(gather, Gather, FP_UR, CA_UR, NONE_, NONE_)
COLL3(scatter, Scatter, FP_UR, CA_UR, NONE_, NONE_)
/* (sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype[, root]) */
#define FP_GV (void *s, F *sc, F *st, void *r, F *rcnts, F *displs, F *rt)
#define CA_GV (fsbuf(s), (int)*sc, CT(st), fsbuf(r), (const int *)rcnts, (const int *)displs, CT(rt))
COLL3(allgatherv, Allgatherv, FP_GV, CA_GV, NONE_, NONE_)
COLL3(neighbor_allgatherv, Neighbor_allgatherv, FP_GV, CA_GV, NONE_, NONE_)
#define FP_GVR (void *s, F *sc, F *st, void *r, F *rcnts, F *displs, F *rt, F *root)
#define CA_GVR (fsbuf(s), (int)*sc, CT(st), fsbuf(r), (const int *)rcnts, (const int *)displs, CT(rt), (int)*root)
COLL3(gatherv, Gatherv, FP_GVR, CA_GVR, NONE_, NONE_)
/* (sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root) */
#define FP_SV (void *s, F *scnts, F *displs, F *st, void *r, F *rcnt, F *rt, F *root)
#define CA_SV (fsbuf(s), (const int *)scnts, (const int *)displs, CT(st), fsbuf(r), (int)*rcnt, CT(rt), (int)*root)
COLL3(scatterv, Scatterv, FP_SV, CA_SV, NONE_, NONE_)
/* (sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype) */
#define FP_AV (void *s, F *scnts, F *sd, F *st, void *r, F *rcnts, F *rd, F *rt)
#define CA_AV \
    (fsbuf(s), (const int *)scnts, (const int *)sd, CT(st), fsbuf(r), (const int *)rcnts, (const int *)rd, CT(rt))
COLL3(alltoallv, Alltoallv, FP_AV, CA_AV, NONE_, NONE_)
COLL3(neighbor_alltoallv, Neighbor_alltoallv, FP_AV, CA_AV, NONE_, NONE_)
/* (buffer, count, datatype, root) */
#define FP_B (void *b, F *count, F *dt, F *root)
#define CA_B (fbuf(b), (int)*count, CT(dt), (int)*root)
COLL3(bcast, Bcast, FP_B, CA_B, NONE_, NONE_)

/* The w forms: a datatype per block, converted into C handles for the call (the MPI, and gdte,
 * copy what they keep). Alltoallw has a block per process of the group (the remote group on an
 * intercommunicator), Neighbor_alltoallw one per neighbour (out-degree sending, in-degree
 * receiving); an MPI_IN_PLACE send side has no types. */
typedef struct {
    MPI_Datatype small[2][SMALL];
    MPI_Datatype *t[2];
} wtypes_t;

static MPI_Datatype *wtypes_one(wtypes_t *w, int k, const F *ft, int n)
{
    if (n <= 0 || !ft) return w->small[k];
    MPI_Datatype *t = n <= SMALL ? w->small[k] : malloc((size_t)n * sizeof *t);
    if (!t) return NULL;
    for (int i = 0; i < n; i++) t[i] = MPI_Type_f2c(ft[i]);
    return t;
}

/* Returns an MPI error code; w->t[0] NULL for an in-place send side. */
static int wtypes_get(wtypes_t *w, int neighbor, const void *s, const F *fst, const F *frt, const F *fcomm)
{
    MPI_Comm c = MPI_Comm_f2c(*fcomm);
    int nin = 0, nout = 0;
    w->t[0] = w->t[1] = NULL;
    if (neighbor) {
        int topo = MPI_UNDEFINED, nd = 0, wt = 0, rank = 0;
        if (c == MPI_COMM_NULL || MPI_Topo_test(c, &topo) != MPI_SUCCESS) topo = MPI_UNDEFINED;
        if (topo == MPI_CART && MPI_Cartdim_get(c, &nd) == MPI_SUCCESS) nin = nout = 2 * nd;
        else if (topo == MPI_GRAPH && MPI_Comm_rank(c, &rank) == MPI_SUCCESS &&
                 MPI_Graph_neighbors_count(c, rank, &nd) == MPI_SUCCESS)
            nin = nout = nd;
        else if (topo == MPI_DIST_GRAPH && MPI_Dist_graph_neighbors_count(c, &nin, &nout, &wt) != MPI_SUCCESS)
            nin = nout = 0;
    } else if (c != MPI_COMM_NULL) {
        int inter = 0;
        MPI_Comm_test_inter(c, &inter);
        if ((inter ? MPI_Comm_remote_size(c, &nin) : MPI_Comm_size(c, &nin)) != MPI_SUCCESS) nin = 0;
        nout = nin;
    }
    if (!is_sentinel(s, S_IN_PLACE) && !(w->t[0] = wtypes_one(w, 0, fst, nout))) return MPI_ERR_NO_MEM;
    if (!(w->t[1] = wtypes_one(w, 1, frt, nin))) return MPI_ERR_NO_MEM;
    return MPI_SUCCESS;
}

static void wtypes_put(wtypes_t *w)
{
    for (int k = 0; k < 2; k++)
        if (w->t[k] && w->t[k] != w->small[k]) free(w->t[k]);
}

#define FP_W (void *s, F *scnts, F *sd, F *st, void *r, F *rcnts, F *rd, F *rt)
#define CA_W (fsbuf(s), (const int *)scnts, (const int *)sd, w.t[0], fsbuf(r), (const int *)rcnts, (const int *)rd, w.t[1])
#define FP_WA (void *s, F *scnts, MPI_Aint *sd, F *st, void *r, F *rcnts, MPI_Aint *rd, F *rt)
#define CA_WA (fbuf(s), (const int *)scnts, sd, w.t[0], fbuf(r), (const int *)rcnts, rd, w.t[1])
#define PRE_W(nbr) (wtypes_t w; rc = wtypes_get(&w, nbr, s, st, rt, comm))
#define POST_W (wtypes_put(&w))
COLL3(alltoallw, Alltoallw, FP_W, CA_W, PRE_W(0), POST_W)
COLL3(neighbor_alltoallw, Neighbor_alltoallw, FP_WA, CA_WA, PRE_W(1), POST_W)

/* Reductions: (sendbuf, recvbuf, count or recvcounts, datatype, op[, root]). */
#define FP_RED (void *s, void *r, F *count, F *dt, F *op)
#define CA_RED (fsbuf(s), fbuf(r), (int)*count, CT(dt), CO(op))
COLL3(allreduce, Allreduce, FP_RED, CA_RED, NONE_, NONE_)
COLL3(reduce_scatter_block, Reduce_scatter_block, FP_RED, CA_RED, NONE_, NONE_)
COLL3(scan, Scan, FP_RED, CA_RED, NONE_, NONE_)
COLL3(exscan, Exscan, FP_RED, CA_RED, NONE_, NONE_)
COLL3(reduce_scatter, Reduce_scatter, FP_RED, (fsbuf(s), fbuf(r), (const int *)count, CT(dt), CO(op)), NONE_, NONE_)
COLL3(reduce, Reduce, (void *s, void *r, F *count, F *dt, F *op, F *root),
      (fsbuf(s), fbuf(r), (int)*count, CT(dt), CO(op), (int)*root), NONE_, NONE_)

/* ---- the calls gdte refuses on device memory (refuse.h): their C shims give the refusal ---- */
#define CW(x) MPI_Win_f2c(*(x))
#define CF(x) MPI_File_f2c(*(x))

/* One-sided: (origin, count, type, target rank, target disp, target count, target type[, op]) */
#define RMA_BODY(lower, Camel, OPP, OPA)                                                                        \
    static void f_##lower(void *o, F *oc, F *odt, F *trank, MPI_Aint *tdisp, F *tc, F *tdt OPP, F *win, F *ierr) \
    {                                                                                                           \
        ret(ierr, MPI_##Camel(fbuf(o), (int)*oc, CT(odt), (int)*trank, *tdisp, (int)*tc, CT(tdt) OPA, CW(win)));  \
    }                                                                                                           \
    static void f_r##lower(void *o, F *oc, F *odt, F *trank, MPI_Aint *tdisp, F *tc, F *tdt OPP, F *win, F *req, \
                           F *ierr)                                                                             \
    {                                                                                                           \
        MPI_Request q = MPI_REQUEST_NULL;                                                                       \
        int rc = MPI_R##lower(fbuf(o), (int)*oc, CT(odt), (int)*trank, *tdisp, (int)*tc, CT(tdt) OPA, CW(win), &q); \
        ret_req(ierr, rc, req, q);                                                                              \
    }
RMA_BODY(put, Put, , )
RMA_BODY(get, Get, , )
RMA_BODY(accumulate, Accumulate, U_(, F *op), U_(, CO(op)))

#define GETACC_FP                                                                                           \
    void *o, F *oc, F *odt, void *res, F *rc_, F *rdt, F *trank, MPI_Aint *tdisp, F *tc, F *tdt, F *op, F *win
#define GETACC_CA                                                                                           \
    fbuf(o), (int)*oc, CT(odt), fbuf(res), (int)*rc_, CT(rdt), (int)*trank, *tdisp, (int)*tc, CT(tdt), CO(op), CW(win)
static void f_get_accumulate(GETACC_FP, F *ierr) { ret(ierr, MPI_Get_accumulate(GETACC_CA)); }
static void f_rget_accumulate(GETACC_FP, F *req, F *ierr)
{
    MPI_Request q = MPI_REQUEST_NULL;
    int rc = MPI_Rget_accumulate(GETACC_CA, &q);
    ret_req(ierr, rc, req, q);
}
static void f_fetch_and_op(void *o, void *res, F *dt, F *trank, MPI_Aint *tdisp, F *op, F *win, F *ierr)
{
    ret(ierr, MPI_Fetch_and_op(fbuf(o), fbuf(res), CT(dt), (int)*trank, *tdisp, CO(op), CW(win)));
}
static void f_compare_and_swap(void *o, void *cmp, void *res, F *dt, F *trank, MPI_Aint *tdisp, F *win, F *ierr)
{
    ret(ierr, MPI_Compare_and_swap(fbuf(o), fbuf(cmp), fbuf(res), CT(dt), (int)*trank, *tdisp, CW(win)));
}
static void f_win_create(void *base, MPI_Aint *size, F *disp_unit, F *info, F *comm, F *win, F *ierr)
{
    MPI_Win w = MPI_WIN_NULL;
    int rc = MPI_Win_create(fbuf(base), *size, (int)*disp_unit, MPI_Info_f2c(*info), CC(comm), &w);
    if (rc == MPI_SUCCESS) *win = MPI_Win_c2f(w);
    ret(ierr, rc);
}
static void f_win_attach(F *win, void *base, MPI_Aint *size, F *ierr)
{
    ret(ierr, MPI_Win_attach(CW(win), fbuf(base), *size));
}

/* Synchronisation with no buffer (shims_sync.c): before the MPI may block, the fragments of
 * nonblocking device sends to other nodes are posted, so the Fortran names must reach the same
 * C shims. */
static void f_barrier(F *comm, F *ierr) { ret(ierr, MPI_Barrier(CC(comm))); }
static void f_win_fence(F *assert, F *win, F *ierr) { ret(ierr, MPI_Win_fence((int)*assert, CW(win))); }
static void f_win_lock(F *type, F *rank, F *assert, F *win, F *ierr)
{
    ret(ierr, MPI_Win_lock((int)*type, (int)*rank, (int)*assert, CW(win)));
}
static void f_win_lock_all(F *assert, F *win, F *ierr) { ret(ierr, MPI_Win_lock_all((int)*assert, CW(win))); }
static void f_win_unlock(F *rank, F *win, F *ierr) { ret(ierr, MPI_Win_unlock((int)*rank, CW(win))); }
static void f_win_unlock_all(F *win, F *ierr) { ret(ierr, MPI_Win_unlock_all(CW(win))); }
static void f_win_flush(F *rank, F *win, F *ierr) { ret(ierr, MPI_Win_flush((int)*rank, CW(win))); }
static void f_win_flush_all(F *win, F *ierr) { ret(ierr, MPI_Win_flush_all(CW(win))); }
static void f_win_flush_local(F *rank, F *win, F *ierr) { ret(ierr, MPI_Win_flush_local((int)*rank, CW(win))); }
static void f_win_flush_local_all(F *win, F *ierr) { ret(ierr, MPI_Win_flush_local_all(CW(win))); }
static void f_win_start(F *group, F *assert, F *win, F *ierr)
{
    ret(ierr, MPI_Win_start(MPI_Group_f2c(*group), (int)*assert, CW(win)));
}
static void f_win_complete(F *win, F *ierr) { ret(ierr, MPI_Win_complete(CW(win))); }
static void f_win_post(F *group, F *assert, F *win, F *ierr)
{
    ret(ierr, MPI_Win_post(MPI_Group_f2c(*group), (int)*assert, CW(win)));
}
static void f_win_wait(F *win, F *ierr) { ret(ierr, MPI_Win_wait(CW(win))); }
static void f_win_test(F *win, F *flag, F *ierr)
{
    int fl = 0;
    int rc = MPI_Win_test(CW(win), &fl);
    if (rc == MPI_SUCCESS) *flag = fl ? 1 : 0;
    ret(ierr, rc);
}
static void f_win_sync(F *win, F *ierr) { ret(ierr, MPI_Win_sync(CW(win))); }
static void f_win_free(F *win, F *ierr)
{
    MPI_Win w = CW(win);
    int rc = MPI_Win_free(&w);
    if (rc == MPI_SUCCESS) *win = MPI_Win_c2f(w);
    ret(ierr, rc);
}
static void f_file_sync(F *fh, F *ierr) { ret(ierr, MPI_File_sync(CF(fh))); }
static void f_file_close(F *fh, F *ierr)
{
    MPI_File f = CF(fh);
    int rc = MPI_File_close(&f);
    if (rc == MPI_SUCCESS) *fh = MPI_File_c2f(f);
    ret(ierr, rc);
}
static void f_file_set_size(F *fh, MPI_Offset *size, F *ierr) { ret(ierr, MPI_File_set_size(CF(fh), *size)); }
static void f_file_preallocate(F *fh, MPI_Offset *size, F *ierr) { ret(ierr, MPI_File_preallocate(CF(fh), *size)); }

/* MPI-IO: explicit offsets, individual and shared file pointers, with a status, with a request,
 * and split collectives (begin: no status, end: the buffer and a status). */
#define IO_STATUS(lower, Camel, FPOS, CPOS)                                                    \
    static void f_##lower(F *fh FPOS, void *buf, F *count, F *dt, F *status, F *ierr)          \
    {                                                                                          \
        MPI_Status c, *cs = fstatus(status, &c);                                               \
        int rc = MPI_##Camel(CF(fh) CPOS, fbuf(buf), (int)*count, CT(dt), cs);                 \
        status_out(rc, cs, status);                                                            \
        ret(ierr, rc);                                                                         \
    }
#define IO_REQ(lower, Camel, FPOS, CPOS)                                                       \
    static void f_##lower(F *fh FPOS, void *buf, F *count, F *dt, F *req, F *ierr)             \
    {                                                                                          \
        MPI_Request q = MPI_REQUEST_NULL;                                                      \
        int rc = MPI_##Camel(CF(fh) CPOS, fbuf(buf), (int)*count, CT(dt), &q);                 \
        ret_req(ierr, rc, req, q);                                                             \
    }
#define IO_BEGIN(lower, Camel, FPOS, CPOS)                                                     \
    static void f_##lower(F *fh FPOS, void *buf, F *count, F *dt, F *ierr)                     \
    {                                                                                          \
        ret(ierr, MPI_##Camel(CF(fh) CPOS, fbuf(buf), (int)*count, CT(dt)));                   \
    }
#define IO_END(lower, Camel)                                                                   \
    static void f_##lower(F *fh, void *buf, F *status, F *ierr)                                \
    {                                                                                          \
        MPI_Status c, *cs = fstatus(status, &c);                                               \
        int rc = MPI_##Camel(CF(fh), fbuf(buf), cs);                                           \
        status_out(rc, cs, status);                                                            \
        ret(ierr, rc);                                                                         \
    }
#define AT_F U_(, MPI_Offset *off)
#define AT_C U_(, *off)
IO_STATUS(file_read_at, File_read_at, AT_F, AT_C)
IO_STATUS(file_read_at_all, File_read_at_all, AT_F, AT_C)
IO_STATUS(file_write_at, File_write_at, AT_F, AT_C)
IO_STATUS(file_write_at_all, File_write_at_all, AT_F, AT_C)
IO_REQ(file_iread_at, File_iread_at, AT_F, AT_C)
IO_REQ(file_iwrite_at, File_iwrite_at, AT_F, AT_C)
IO_REQ(file_iread_at_all, File_iread_at_all, AT_F, AT_C)
IO_REQ(file_iwrite_at_all, File_iwrite_at_all, AT_F, AT_C)
IO_STATUS(file_read, File_read, , )
IO_STATUS(file_read_all, File_read_all, , )
IO_STATUS(file_write, File_write, , )
IO_STATUS(file_write_all, File_write_all, , )
IO_REQ(file_iread, File_iread, , )
IO_REQ(file_iwrite, File_iwrite, , )
IO_REQ(file_iread_all, File_iread_all, , )
IO_REQ(file_iwrite_all, File_iwrite_all, , )
IO_STATUS(file_read_shared, File_read_shared, , )
IO_STATUS(file_write_shared, File_write_shared, , )
IO_REQ(file_iread_shared, File_iread_shared, , )
IO_REQ(file_iwrite_shared, File_iwrite_shared, , )
IO_STATUS(file_read_ordered, File_read_ordered, , )
IO_STATUS(file_write_ordered, File_write_ordered, , )
IO_BEGIN(file_read_at_all_begin, File_read_at_all_begin, AT_F, AT_C)
IO_BEGIN(file_write_at_all_begin, File_write_at_all_begin, AT_F, AT_C)
IO_BEGIN(file_read_all_begin, File_read_all_begin, , )
IO_BEGIN(file_write_all_begin, File_write_all_begin, , )
IO_BEGIN(file_read_ordered_begin, File_read_ordered_begin, , )
IO_BEGIN(file_write_ordered_begin, File_write_ordered_begin, , )
IO_END(file_read_at_all_end, File_read_at_all_end)
IO_END(file_write_at_all_end, File_write_at_all_end)
IO_END(file_read_all_end, File_read_all_end)
IO_END(file_write_all_end, File_write_all_end)
IO_END(file_read_ordered_end, File_read_ordered_end)
IO_END(file_write_ordered_end, File_write_ordered_end)

/* Local calls. A CHARACTER argument's length comes last, hidden (an int in Open MPI's
 * bindings); the blanks Fortran pads it with are not part of the name. */
static char *fstring(const char *f, int len, char *small, size_t cap)
{
    if (len < 0) len = 0;
    while (len > 0 && f[len - 1] == ' ') len--;
    char *c = (size_t)len < cap ? small : malloc((size_t)len + 1);
    if (!c) return NULL;
    for (int i = 0; i < len; i++) c[i] = f[i];
    c[len] = 0;
    return c;
}
static void f_pack_external(char *datarep, void *in, F *incount, F *dt, void *out, MPI_Aint *outsize,
                            MPI_Aint *position, F *ierr, int datarep_len)
{
    char small[64], *rep = fstring(datarep, datarep_len, small, sizeof small);
    int rc = rep ? MPI_Pack_external(rep, fbuf(in), (int)*incount, CT(dt), out, *outsize, position) : MPI_ERR_NO_MEM;
    if (rep != small) free(rep);
    ret(ierr, rc);
}
static void f_unpack_external(char *datarep, void *in, MPI_Aint *insize, MPI_Aint *position, void *out, F *outcount,
                              F *dt, F *ierr, int datarep_len)
{
    char small[64], *rep = fstring(datarep, datarep_len, small, sizeof small);
    int rc = rep ? MPI_Unpack_external(rep, in, *insize, position, fbuf(out), (int)*outcount, CT(dt)) : MPI_ERR_NO_MEM;
    if (rep != small) free(rep);
    ret(ierr, rc);
}
static void f_buffer_attach(void *buffer, F *size, F *ierr) { ret(ierr, MPI_Buffer_attach(buffer, (int)*size)); }
/* mpif.h and `use mpi` ignore the buffer argument (MPI-3.1 section 3.6); `use mpi_f08` returns
 * the address as C does (Open MPI's ompi_buffer_detach_f08). Through the C shim either way, so
 * that host memory gdte attached in place of device memory is given back. */
static void f_buffer_detach(void *buffer, F *size, F *ierr)
{
    (void)buffer;
    void *addr = NULL;
    int sz = 0;
    int rc = MPI_Buffer_detach(&addr, &sz);
    if (rc == MPI_SUCCESS) *size = sz;
    ret(ierr, rc);
}
static void f_buffer_detach_f08(void *buffer, F *size, F *ierr)
{
    int sz = 0;
    int rc = MPI_Buffer_detach(buffer, &sz);
    if (rc == MPI_SUCCESS) *size = sz;
    ret(ierr, rc);
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
    X(probe, PROBE) X(iprobe, IPROBE) X(cancel, CANCEL) X(comm_dup, COMM_DUP) X(comm_split, COMM_SPLIT) \
    X(comm_split_type, COMM_SPLIT_TYPE) X(comm_create, COMM_CREATE) X(cart_create, CART_CREATE) \
    X(cart_sub, CART_SUB) \
    X(send_init, SEND_INIT) X(ssend_init, SSEND_INIT) X(bsend_init, BSEND_INIT) X(rsend_init, RSEND_INIT) \
    X(recv_init, RECV_INIT) X(start, START) X(startall, STARTALL) \
    X(wait, WAIT) X(test, TEST) X(waitall, WAITALL) X(testall, TESTALL) X(waitany, WAITANY) X(testany, TESTANY) \
    X(waitsome, WAITSOME) X(testsome, TESTSOME) X(request_free, REQUEST_FREE) \
    X(request_get_status, REQUEST_GET_STATUS) \
    X(pack, PACK) X(unpack, UNPACK) X(type_free, TYPE_FREE) \
    X(reduce, REDUCE) X(ireduce, IREDUCE) X(allreduce, ALLREDUCE) X(iallreduce, IALLREDUCE) \
    X(reduce_scatter, REDUCE_SCATTER) X(ireduce_scatter, IREDUCE_SCATTER) \
    X(reduce_scatter_block, REDUCE_SCATTER_BLOCK) X(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK) \
    X(scan, SCAN) X(iscan, ISCAN) X(exscan, EXSCAN) X(iexscan, IEXSCAN) X(reduce_local, REDUCE_LOCAL) \
    X(alltoall, ALLTOALL) X(ialltoall, IALLTOALL) X(alltoallv, ALLTOALLV) X(ialltoallv, IALLTOALLV) \
    X(alltoallw, ALLTOALLW) X(ialltoallw, IALLTOALLW) X(allgather, ALLGATHER) X(iallgather, IALLGATHER) \
    X(allgatherv, ALLGATHERV) X(iallgatherv, IALLGATHERV) X(gather, GATHER) X(igather, IGATHER) \
    X(gatherv, GATHERV) X(igatherv, IGATHERV) X(scatter, SCATTER) X(iscatter, ISCATTER) \
    X(scatterv, SCATTERV) X(iscatterv, ISCATTERV) X(bcast, BCAST) X(ibcast, IBCAST) \
    X(neighbor_alltoall, NEIGHBOR_ALLTOALL) X(ineighbor_alltoall, INEIGHBOR_ALLTOALL) \
    X(neighbor_alltoallv, NEIGHBOR_ALLTOALLV) X(ineighbor_alltoallv, INEIGHBOR_ALLTOALLV) \
    X(neighbor_alltoallw, NEIGHBOR_ALLTOALLW) X(ineighbor_alltoallw, INEIGHBOR_ALLTOALLW) \
    X(neighbor_allgather, NEIGHBOR_ALLGATHER) X(ineighbor_allgather, INEIGHBOR_ALLGATHER) \
    X(neighbor_allgatherv, NEIGHBOR_ALLGATHERV) X(ineighbor_allgatherv, INEIGHBOR_ALLGATHERV) \
    X(put, PUT) X(rput, RPUT) X(get, GET) X(rget, RGET) X(accumulate, ACCUMULATE) X(raccumulate, RACCUMULATE) \
    X(get_accumulate, GET_ACCUMULATE) X(rget_accumulate, RGET_ACCUMULATE) X(fetch_and_op, FETCH_AND_OP) \
    X(compare_and_swap, COMPARE_AND_SWAP) X(win_create, WIN_CREATE) X(win_attach, WIN_ATTACH) \
    X(file_read_at, FILE_READ_AT) X(file_read_at_all, FILE_READ_AT_ALL) X(file_write_at, FILE_WRITE_AT) \
    X(file_write_at_all, FILE_WRITE_AT_ALL) X(file_iread_at, FILE_IREAD_AT) X(file_iwrite_at, FILE_IWRITE_AT) \
    X(file_iread_at_all, FILE_IREAD_AT_ALL) X(file_iwrite_at_all, FILE_IWRITE_AT_ALL) X(file_read, FILE_READ) \
    X(file_read_all, FILE_READ_ALL) X(file_write, FILE_WRITE) X(file_write_all, FILE_WRITE_ALL) \
    X(file_iread, FILE_IREAD) X(file_iwrite, FILE_IWRITE) X(file_iread_all, FILE_IREAD_ALL) \
    X(file_iwrite_all, FILE_IWRITE_ALL) X(file_read_shared, FILE_READ_SHARED) X(file_write_shared, FILE_WRITE_SHARED) \
    X(file_iread_shared, FILE_IREAD_SHARED) X(file_iwrite_shared, FILE_IWRITE_SHARED) \
    X(file_read_ordered, FILE_READ_ORDERED) X(file_write_ordered, FILE_WRITE_ORDERED) \
    X(file_read_at_all_begin, FILE_READ_AT_ALL_BEGIN) X(file_read_at_all_end, FILE_READ_AT_ALL_END) \
    X(file_write_at_all_begin, FILE_WRITE_AT_ALL_BEGIN) X(file_write_at_all_end, FILE_WRITE_AT_ALL_END) \
    X(file_read_all_begin, FILE_READ_ALL_BEGIN) X(file_read_all_end, FILE_READ_ALL_END) \
    X(file_write_all_begin, FILE_WRITE_ALL_BEGIN) X(file_write_all_end, FILE_WRITE_ALL_END) \
    X(file_read_ordered_begin, FILE_READ_ORDERED_BEGIN) X(file_read_ordered_end, FILE_READ_ORDERED_END) \
    X(file_write_ordered_begin, FILE_WRITE_ORDERED_BEGIN) X(file_write_ordered_end, FILE_WRITE_ORDERED_END) \
    X(pack_external, PACK_EXTERNAL) X(unpack_external, UNPACK_EXTERNAL) X(buffer_attach, BUFFER_ATTACH) \
    X(buffer_detach, BUFFER_DETACH) \
    X(barrier, BARRIER) X(win_fence, WIN_FENCE) X(win_lock, WIN_LOCK) X(win_lock_all, WIN_LOCK_ALL) \
    X(win_unlock, WIN_UNLOCK) X(win_unlock_all, WIN_UNLOCK_ALL) X(win_flush, WIN_FLUSH) X(win_flush_all, WIN_FLUSH_ALL) \
    X(win_flush_local, WIN_FLUSH_LOCAL) X(win_flush_local_all, WIN_FLUSH_LOCAL_ALL) X(win_start, WIN_START) \
    X(win_complete, WIN_COMPLETE) X(win_post, WIN_POST) X(win_wait, WIN_WAIT) X(win_test, WIN_TEST) X(win_sync, WIN_SYNC) X(win_free, WIN_FREE) \
    X(file_sync, FILE_SYNC) X(file_close, FILE_CLOSE) X(file_set_size, FILE_SET_SIZE) \
    X(file_preallocate, FILE_PREALLOCATE)
/* The persistent collectives: X(lower, UPPER) of <naming>_<lower>_init. */
#define GDTE_FORTRAN_PINIT_LIST(X) \
    X(alltoall, ALLTOALL) X(alltoallv, ALLTOALLV) X(alltoallw, ALLTOALLW) X(allgather, ALLGATHER) \
    X(allgatherv, ALLGATHERV) X(gather, GATHER) X(gatherv, GATHERV) X(scatter, SCATTER) X(scatterv, SCATTERV) \
    X(bcast, BCAST) X(neighbor_alltoall, NEIGHBOR_ALLTOALL) X(neighbor_alltoallv, NEIGHBOR_ALLTOALLV) \
    X(neighbor_alltoallw, NEIGHBOR_ALLTOALLW) X(neighbor_allgather, NEIGHBOR_ALLGATHER) \
    X(neighbor_allgatherv, NEIGHBOR_ALLGATHERV) X(reduce, REDUCE) X(allreduce, ALLREDUCE) \
    X(reduce_scatter, REDUCE_SCATTER) X(reduce_scatter_block, REDUCE_SCATTER_BLOCK) X(scan, SCAN) X(exscan, EXSCAN)
/* clang-format on */
GDTE_FORTRAN_LIST(FNAMES)
FALIAS(ompi_buffer_detach_f08, f_buffer_detach_f08)
FALIAS(pompi_buffer_detach_f08, f_buffer_detach_f08)
/* Open MPI's: mpix_x_init ... and ompix_x_init_f (its mpi_f08 extension module calls that). */
#ifdef GDTE_HAVE_MPIX_PCOLL
#define FXNAMES(lower, UPPER)                                                                                    \
    FALIAS(mpix_##lower##_init, fx_##lower##_init) FALIAS(mpix_##lower##_init_, fx_##lower##_init)             \
    FALIAS(mpix_##lower##_init__, fx_##lower##_init) FALIAS(MPIX_##UPPER##_INIT, fx_##lower##_init)            \
    FALIAS(pmpix_##lower##_init, fx_##lower##_init) FALIAS(pmpix_##lower##_init_, fx_##lower##_init)           \
    FALIAS(pmpix_##lower##_init__, fx_##lower##_init) FALIAS(PMPIX_##UPPER##_INIT, fx_##lower##_init)          \
    FALIAS(ompix_##lower##_init_f, fx_##lower##_init)
GDTE_FORTRAN_PINIT_LIST(FXNAMES)
#endif
/* MPI-4's: mpi_x_init ... as the other calls. */
#ifdef GDTE_HAVE_MPI4_PCOLL
#define F4NAMES(lower, UPPER)                                                                                    \
    FALIAS(mpi_##lower##_init, f4_##lower##_init) FALIAS(mpi_##lower##_init_, f4_##lower##_init)               \
    FALIAS(mpi_##lower##_init__, f4_##lower##_init) FALIAS(MPI_##UPPER##_INIT, f4_##lower##_init)              \
    FALIAS(pmpi_##lower##_init, f4_##lower##_init) FALIAS(pmpi_##lower##_init_, f4_##lower##_init)             \
    FALIAS(pmpi_##lower##_init__, f4_##lower##_init) FALIAS(PMPI_##UPPER##_INIT, f4_##lower##_init)            \
    FALIAS(ompi_##lower##_init_f, f4_##lower##_init)
GDTE_FORTRAN_PINIT_LIST(F4NAMES)
#endif
