/*
 * Request bookkeeping. A device message's request is the MPI's own request on the staging
 * buffer: the application holds it, MPI matches, completes, cancels and probes it as usual.
 * gdte only remembers, per request handle, what completion must do: unpack a receive into the
 * device buffer and fix its status, give the staging back. With no gdte request alive the
 * completion calls cost one atomic load.
 *
 * Handle values are recycled by the MPI as soon as it frees a request, and with
 * MPI_THREAD_MULTIPLE another thread may be handed the same value for a new request while
 * this thread is still inside MPI_Wait. So a completion call *claims* the records of the
 * handles it was given before it calls the MPI (takes them out of the table, under the lock,
 * while the application still owns those handles and no other request can have their
 * values), and after the call either finishes them or puts back those the MPI did not
 * complete. No lookup by handle value ever happens after the MPI may have freed it.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "interpose.h"
#include "xfer.h"
#include "engine/engine.h"
#include "util/util.h"

static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static gdte_ipo_req_t *req_table;
static gdte_ipo_req_t *req_free;    /* recycled records: no allocation per message */
static gdte_ipo_req_t *orphans;     /* freed by the application while active */
static _Atomic int64_t req_live;    /* records in the table */
static _Atomic int64_t orphan_count;

int64_t gdte_ipo_req_live(void) { return req_live; }

gdte_ipo_req_t *gdte_ipo_req_new(void)
{
    pthread_mutex_lock(&req_lock);
    gdte_ipo_req_t *r = req_free;
    if (r) req_free = r->next_orphan;
    pthread_mutex_unlock(&req_lock);
    if (!r) r = malloc(sizeof *r);
    if (r) memset(r, 0, sizeof *r);
    return r;
}

void gdte_ipo_req_insert(gdte_ipo_req_t *r)
{
    pthread_mutex_lock(&req_lock);
    HASH_ADD(hh, req_table, handle, sizeof r->handle, r);
    r->in_table = 1;
    req_live++;
    pthread_mutex_unlock(&req_lock);
}

/* Under req_lock: the record of handle h, or NULL. */
static gdte_ipo_req_t *find_locked(MPI_Request h)
{
    gdte_ipo_req_t *r;
    HASH_FIND(hh, req_table, &h, sizeof h, r);
    return r;
}

gdte_ipo_req_t *gdte_ipo_req_find(MPI_Request h)
{
    if (h == MPI_REQUEST_NULL || atomic_load_explicit(&req_live, memory_order_acquire) == 0) return NULL;
    pthread_mutex_lock(&req_lock);
    gdte_ipo_req_t *r = find_locked(h);
    pthread_mutex_unlock(&req_lock);
    return r;
}

/* Take the record of an active request out of the table (NULL: not a gdte request, or an
 * inactive persistent one). The caller finishes it or puts it back with gdte_ipo_req_insert. */
static gdte_ipo_req_t *claim_active(MPI_Request h)
{
    if (h == MPI_REQUEST_NULL || atomic_load_explicit(&req_live, memory_order_acquire) == 0) return NULL;
    gdte_ipo_req_t *r;
    pthread_mutex_lock(&req_lock);
    HASH_FIND(hh, req_table, &h, sizeof h, r);
    if (r && r->active) {
        HASH_DEL(req_table, r);
        r->in_table = 0;
        req_live--;
    } else {
        r = NULL;
    }
    pthread_mutex_unlock(&req_lock);
    return r;
}

/* Unlink (table or orphan list) and recycle. */
void gdte_ipo_req_destroy(gdte_ipo_req_t *r)
{
    /* A fragmented message still arriving: its receives target the staging, so they finish. */
    if (r->node_frag) gdte_ipo_node_frag_progress(r, 1);
    if (r->fini) r->fini(r);
    if (r->stage) gdte_stage_release(r->stage);
    if (r->type) gdte_type_release(r->type);
    if (r->is_recv && r->dt != MPI_DATATYPE_NULL) gdte_ipo_dt_put(r->dt);
    pthread_mutex_lock(&req_lock);
    if (r->in_table) {
        HASH_DEL(req_table, r);
        req_live--;
    }
    r->next_orphan = req_free;
    req_free = r;
    pthread_mutex_unlock(&req_lock);
    gdte_ipo_node_zombie_reap(); /* a freed communicator's last request (one load when none) */
}

/* ---------------------------------------------------------------------------------------- */
int gdte_ipo_truncated(MPI_Comm comm, MPI_Status *st)
{
    st->MPI_ERROR = MPI_ERR_TRUNCATE;
    if (!gdte_ipo_defer_errh) PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, MPI_ERR_TRUNCATE);
    return MPI_ERR_TRUNCATE;
}

void gdte_ipo_status_bytes(MPI_Status *st, MPI_Datatype dt, gdte_type_h type, int64_t n)
{
    /* The status describes bytes; state it in the user's datatype so MPI_Get_count/Get_elements
     * with that type answer as for a typed receive. The element count is the MPI's own (asked
     * of it for n bytes of dt): gdte counts elements differently where a named type is several
     * (MPI_SHORT_INT, MPI_C_LONG_DOUBLE_COMPLEX: two each in gdte, one in Open MPI). A partial
     * last element (a sender's signature that does not match) keeps the byte count, from
     * which MPI derives the same answers. */
    int64_t size = 0;
    if (gdte_type_pack_size(1, type, &size) == GDTE_OK && size > 0 && n % size == 0) {
        MPI_Status bytes = *st;
        MPI_Count nelems = MPI_UNDEFINED;
        if (PMPI_Status_set_elements_x(&bytes, MPI_BYTE, (MPI_Count)n) == MPI_SUCCESS &&
            PMPI_Get_elements_x(&bytes, dt, &nelems) == MPI_SUCCESS && nelems != MPI_UNDEFINED && nelems >= 0 &&
            PMPI_Status_set_elements_x(st, dt, nelems) == MPI_SUCCESS) {
            gdte_ipo_cnt_g.status_fixed++;
            return;
        }
    }
    PMPI_Status_set_elements_x(st, MPI_BYTE, (MPI_Count)n);
}

int gdte_ipo_recv_finish(MPI_Comm comm, const char *fn, void *user, int count, MPI_Datatype dt, gdte_type_h type,
                         gdte_ipo_kind_t kind, const gdte_stage_t *stage, int64_t nbytes, int64_t post,
                         MPI_Status *st)
{
    int cancelled = 0;
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) return MPI_SUCCESS;
    if (post < nbytes) post = nbytes;
    if (gdte_ipo_node_on() && gdte_ipo_node_is_marker(comm, st))
        return gdte_ipo_node_recv_marker(comm, fn, user, count, dt, kind, nbytes, gdte_stage_tail(stage, (size_t)post),
                                         stage, post, st);
    MPI_Count got = 0;
    PMPI_Get_elements_x(st, MPI_BYTE, &got);
    /* A message longer than `post` was truncated by the MPI, which reports its full length and
     * the error: only the `nbytes` that fit reach the user's buffer. One longer than the
     * user's `nbytes` but not than `post` (a receive posted for a marker's size) is truncated
     * here, with the same outcome. */
    int truncated = got > nbytes;
    int64_t n = truncated ? nbytes : (int64_t)got;
    if (n > 0) {
        gdte_status_t s = gdte_xfer_unpack_stage(stage, post, n, user, count, type, kind == GDTE_IPO_FAKE);
        if (s != GDTE_OK) return gdte_ipo_fail(comm, fn, s);
        gdte_ipo_cnt_g.bytes_unpacked += n;
    }
    if (truncated) return got <= post ? gdte_ipo_truncated(comm, st) : MPI_SUCCESS;
    gdte_ipo_status_bytes(st, dt, type, n);
    return MPI_SUCCESS;
}

int gdte_ipo_host_recv_finish(MPI_Comm comm, const char *fn, void *user, int count, MPI_Datatype dt,
                              const gdte_stage_t *scratch, int64_t nbytes, MPI_Status *st)
{
    int cancelled = 0;
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) return MPI_SUCCESS;
    const void *landing = scratch ? scratch->ptr : NULL;
    if (gdte_ipo_node_is_marker(comm, st))
        return gdte_ipo_node_recv_marker(comm, fn, user, count, dt, GDTE_IPO_HOST, nbytes, landing, NULL, 0, st);
    if (!scratch) return MPI_SUCCESS; /* the MPI received into the user's buffer itself */
    MPI_Count got = 0;
    PMPI_Get_elements_x(st, MPI_BYTE, &got);
    int truncated = got > nbytes;
    int64_t n = truncated ? nbytes : (int64_t)got;
    if (n > 0) {
        gdte_type_h type;
        int64_t tb;
        gdte_status_t s = gdte_ipo_type(dt, count, &type, &tb);
        gdte_pack_params_t p = {.field_mask = 0, .flags = GDTE_PACK_FLAG_HOST};
        if (s == GDTE_OK) s = gdte_unpack(scratch->ptr, n, user, count, type, &p, NULL);
        if (s != GDTE_OK) return gdte_ipo_fail(comm, fn, s);
        if (!truncated) gdte_ipo_status_bytes(st, dt, type, n);
    }
    if (truncated) return got <= GDTE_IPO_MARK_BYTES ? gdte_ipo_truncated(comm, st) : MPI_SUCCESS;
    return MPI_SUCCESS;
}

void gdte_ipo_req_scan(MPI_Comm comm, void (*fn)(gdte_ipo_req_t *r, void *arg), void *arg)
{
    if (atomic_load_explicit(&req_live, memory_order_acquire) == 0) return;
    pthread_mutex_lock(&req_lock);
    for (gdte_ipo_req_t *r = req_table; r; r = r->hh.next)
        if (r->comm == comm) fn(r, arg);
    pthread_mutex_unlock(&req_lock);
}

/* A send the node path carries completes when the receiver has copied it: it cannot be
 * cancelled once the marker is out (MPI allows a cancel to fail: the send then completes). */
int gdte_ipo_cancel(MPI_Request *req)
{
    gdte_ipo_req_t *r = req ? gdte_ipo_req_find(*req) : NULL;
    if (r && r->node_send) return MPI_SUCCESS;
    return IPO_NEXT(Cancel)(req);
}

/* A completed receive's data into the user's buffer (host or device), its status stated. */
static int recv_deliver(gdte_ipo_req_t *r, MPI_Status *st, const char *fn)
{
    return r->kind == GDTE_IPO_HOST
               ? gdte_ipo_host_recv_finish(r->comm, fn, r->user, r->count, r->dt, r->stage, r->nbytes, st)
               : gdte_ipo_recv_finish(r->comm, fn, r->user, r->count, r->dt, r->type, r->kind, r->stage, r->nbytes,
                                      r->node_post, st);
}

/* What completion of a gdte request does. `st` is a real status; `rc` what the MPI reported
 * for this request. Returns the request's final error code. */
static int complete_one(gdte_ipo_req_t *r, MPI_Status *st, int rc, const char *fn, MPI_Request after)
{
    int erc = MPI_SUCCESS;
    int eclass = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &eclass);
    /* A fragmented message the progress pass started: the rest of it now (the MPI completed
     * the marker's receive; a Testany/Testsome/Waitany/Waitsome may pick it first). */
    if (r->node_frag && !r->unpacked) gdte_ipo_node_frag_progress(r, 1);
    if (r->unpacked) {
        int keep_err = st->MPI_ERROR;
        *st = r->fixed_st;
        st->MPI_ERROR = r->fixed_rc != MPI_SUCCESS ? r->fixed_rc : keep_err;
        if (r->fixed_rc != MPI_SUCCESS) {
            /* Finished ahead (node path progress, MPI_Request_get_status): the error is this
             * call's to report. */
            erc = r->fixed_rc;
            PMPI_Comm_call_errhandler(r->comm == MPI_COMM_NULL ? MPI_COMM_WORLD : r->comm, erc);
        }
    }
    if (r->finish && !r->unpacked)
        erc = r->finish(r, st, rc);
    else if (!r->finish && r->is_recv && !r->unpacked && (rc == MPI_SUCCESS || eclass == MPI_ERR_TRUNCATE))
        erc = recv_deliver(r, st, fn);
    if (r->persistent && !r->orphan && after != MPI_REQUEST_NULL) {
        /* The handle stays the application's: the record goes back into the table. (An MPI
         * may free a persistent request that completed in error: then the record goes.) */
        r->active = 0;
        r->unpacked = 0;
        r->fixed_rc = MPI_SUCCESS;
        gdte_ipo_req_insert(r);
        return rc != MPI_SUCCESS ? rc : erc;
    }
    if (r->persistent && r->orphan) {
        /* An orphaned persistent request: the application freed it while active. */
        MPI_Request h = r->handle;
        IPO_NEXT(Request_free)(&h);
    }
    gdte_ipo_req_destroy(r);
    return rc != MPI_SUCCESS ? rc : erc;
}

/* Orphans: progressed from every completion call, since nobody else will wait on them. */
static void orphans_progress(int block)
{
    if (atomic_load_explicit(&orphan_count, memory_order_acquire) == 0) return;
    pthread_mutex_lock(&req_lock);
    gdte_ipo_req_t *list = orphans;
    orphans = NULL;
    pthread_mutex_unlock(&req_lock);
    gdte_ipo_req_t *keep = NULL;
    while (list) {
        gdte_ipo_req_t *r = list;
        list = r->next_orphan;
        MPI_Status st;
        int flag = 0;
        int rc = IPO_NEXT(Test)(&r->handle, &flag, &st);
        if (!flag && block && r->is_recv) {
            /* MPI_Finalize: a freed receive nobody sent to would block forever. Plain MPI
             * returns from MPI_Finalize then; so do we: cancel it (it completes at once,
             * matched or cancelled). */
            PMPI_Cancel(&r->handle);
            rc = IPO_NEXT(Wait)(&r->handle, &st);
            flag = 1;
        }
        for (int spin = 0; !flag && block && spin < 100000; spin++) rc = IPO_NEXT(Test)(&r->handle, &flag, &st);
        if (flag) {
            orphan_count--;
            complete_one(r, &st, rc, "MPI_Request_free (completion)", MPI_REQUEST_NULL);
        } else if (block) {
            /* A freed send that never completed: its staging may still be read by the MPI, so
             * it is left allocated (the process is finishing). */
            orphan_count--;
            gdte_warn("a freed device send never completed before MPI_Finalize; its staging is not released");
        } else {
            r->next_orphan = keep;
            keep = r;
        }
    }
    if (keep) {
        pthread_mutex_lock(&req_lock);
        gdte_ipo_req_t *last = keep;
        while (last->next_orphan) last = last->next_orphan;
        last->next_orphan = orphans;
        orphans = keep;
        pthread_mutex_unlock(&req_lock);
    }
}

void gdte_ipo_orphans_drain(void) { orphans_progress(1); }

/* ---------------------------------------------------------------------------------------- */
/* Per-thread scratch for claimed records and statuses: grows, never shrinks, so completion
 * calls allocate nothing in steady state. */
static _Thread_local gdte_ipo_req_t **claimed;
static _Thread_local MPI_Status *snap_st;
static _Thread_local size_t snap_cap;

/* A thread that exits frees its scratch: a key whose destructor runs at thread exit (the
 * thread-local pointers are still valid then). */
static pthread_key_t snap_key;
static pthread_once_t snap_once = PTHREAD_ONCE_INIT;
static void snap_release(void *unused)
{
    (void)unused;
    free(claimed);
    free(snap_st);
    claimed = NULL;
    snap_st = NULL;
    snap_cap = 0;
}
static void snap_key_init(void) { pthread_key_create(&snap_key, snap_release); }

static int scratch(int n)
{
    if ((size_t)n <= snap_cap) return 0;
    if (snap_cap == 0) {
        pthread_once(&snap_once, snap_key_init);
        pthread_setspecific(snap_key, &snap_once); /* any non-NULL value arms the destructor */
    }
    size_t c = (size_t)n < 64 ? 64 : (size_t)n;
    gdte_ipo_req_t **a = realloc(claimed, c * sizeof *a);
    if (!a) return -1;
    claimed = a;
    MPI_Status *b = realloc(snap_st, c * sizeof *b);
    if (!b) return -1;
    snap_st = b;
    snap_cap = c;
    return 0;
}

/* Claim the active gdte requests among the first n handles into claimed[0..n); returns how
 * many, or -1 when the scratch cannot grow (nothing claimed then). */
static int claim_many(int n, const MPI_Request reqs[])
{
    if (n <= 0 || atomic_load_explicit(&req_live, memory_order_acquire) == 0) return 0;
    if (scratch(n)) return -1;
    int found = 0;
    for (int i = 0; i < n; i++) {
        claimed[i] = claim_active(reqs[i]);
        found += claimed[i] != NULL;
    }
    return found;
}

/* Put back the claimed records still in claimed[] (those the MPI did not complete), except the
 * one at position `except` (-1: none), which the caller finishes. */
static void unclaim(int n, int except)
{
    for (int i = 0; i < n; i++) {
        if (claimed[i] && i != except) gdte_ipo_req_insert(claimed[i]);
        claimed[i] = NULL;
    }
}


/* Finish a completed receive before the application's completion call does (the data must be
 * in its buffer, or a node-path sender is waiting): unpack now, keep the status and the error
 * code for the call that completes the request. */
static int finish_ahead(gdte_ipo_req_t *r, MPI_Status *st, const char *fn)
{
    int erc = recv_deliver(r, st, fn);
    if (erc == GDTE_IPO_PENDING) return MPI_SUCCESS; /* a fragmented message, started (r->node_frag) */
    /* With r->node_frag set its copy is in flight (a pipelined batch): unpacked once it lands. */
    if (!r->node_frag) r->unpacked = 1;
    r->fixed_st = *st;
    r->fixed_rc = erc;
    return erc;
}

/* ---- node path progress ----
 * A receive matched by a marker is finished by gdte (the data copied from the peer, a FIN
 * sent), not by the MPI; a process blocked in the MPI would never do it, and a peer waiting
 * for that FIN would wait for ever. So with the node path on, gdte never blocks inside the
 * MPI in a completion call: it polls, and finishes every completed marker receive it holds
 * a record of while it does. */
void gdte_ipo_node_progress(void)
{
    gdte_ipo_node_sends_progress();
    if (atomic_load_explicit(&req_live, memory_order_acquire) == 0) return;
    int batched = 0;
    pthread_mutex_lock(&req_lock);
    for (gdte_ipo_req_t *r = req_table; r; r = r->hh.next) {
        if (!r->is_recv || !r->active || r->unpacked || r->finish) continue;
        if (r->node_frag) {
            (void)gdte_ipo_node_frag_progress(r, 0);
            continue;
        }
        MPI_Status st;
        int flag = 0;
        if (PMPI_Request_get_status(r->handle, &flag, &st) != MPI_SUCCESS || !flag) continue;
        if (!gdte_ipo_node_is_marker(r->comm, &st)) continue;
        if (!batched) gdte_ipo_node_batch_begin(), batched = 1;
        gdte_ipo_defer_errh = 1;
        /* A fragmented message only starts here: its fragments arrive over later passes. */
        gdte_ipo_node_frag_defer(&r->node_frag);
        (void)finish_ahead(r, &st, "MPI_Wait");
        gdte_ipo_node_frag_defer(NULL);
        gdte_ipo_defer_errh = 0;
    }
    /* The batch's copies are launched and synchronized before the table's lock goes: the
     * records finished ahead above read as unpacked from then on, and the thread that owns one
     * (MPI_THREAD_MULTIPLE) claims it under this lock. Released first, the owner returned the
     * receive to its application before the copy into its buffer had even been launched
     * (threads_test --big on an H200: stale and poison values in every run). */
    if (batched) gdte_ipo_node_batch_end();
    pthread_mutex_unlock(&req_lock);
}

/* A receive whose fragmented message is still arriving: complete for the MPI, not yet for the
 * application. */
static int frag_pending(MPI_Request h)
{
    if (!gdte_ipo_node_frag_live() || h == MPI_REQUEST_NULL) return 0;
    /* Read under the table's lock: another thread's progress pass finishes such a receive
     * (node_frag, unpacked) under it (MPI_THREAD_MULTIPLE; ThreadSanitizer saw the race). */
    pthread_mutex_lock(&req_lock);
    const gdte_ipo_req_t *r = find_locked(h);
    int pending = r && r->active && r->node_frag && !r->unpacked;
    pthread_mutex_unlock(&req_lock);
    return pending;
}

/* Poll until all (any = 0) or one (any = 1) of the requests is complete (or all are null). */
void gdte_ipo_node_block(int n, MPI_Request reqs[], int any)
{
    if (!gdte_ipo_node_on()) return;
    /* The passes of this loop may leave their copies in flight (pipelined): the loop polls
     * again. None is left when the call returns to the application (see
     * gdte_ipo_node_pipeline_begin). */
    gdte_ipo_node_pipeline_begin();
    for (;;) {
        gdte_ipo_node_progress();
        int done = 0, live = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i] == MPI_REQUEST_NULL) continue;
            live++;
            int flag = 0;
            MPI_Status st;
            PMPI_Request_get_status(reqs[i], &flag, &st);
            done += flag != 0 && !frag_pending(reqs[i]);
        }
        if (live == 0 || (any ? done > 0 : done == live)) break;
        sched_yield();
    }
    gdte_ipo_node_pipeline_end();
}

int gdte_ipo_wait(MPI_Request *req, MPI_Status *status)
{
    orphans_progress(0);
    if (req) gdte_ipo_node_block(1, req, 0);
    gdte_ipo_req_t *r = req ? claim_active(*req) : NULL;
    if (!r) return IPO_NEXT(Wait)(req, status);
    MPI_Status st;
    int rc = IPO_NEXT(Wait)(req, &st);
    rc = complete_one(r, &st, rc, "MPI_Wait", *req);
    gdte_ipo_status_out(status, &st);
    return rc;
}

int gdte_ipo_test(MPI_Request *req, int *flag, MPI_Status *status)
{
    orphans_progress(0);
    if (gdte_ipo_node_on()) gdte_ipo_node_progress();
    gdte_ipo_req_t *r = req ? claim_active(*req) : NULL;
    if (!r) return IPO_NEXT(Test)(req, flag, status);
    MPI_Status st;
    if ((r->node_frag && !r->unpacked) || (r->pending && !r->unpacked && r->pending(r))) {
        /* Its fragments are still arriving (the progress pass above moved them on), or still
         * being packed. */
        gdte_ipo_req_insert(r);
        *flag = 0;
        return MPI_SUCCESS;
    }
    int rc = IPO_NEXT(Test)(req, flag, &st);
    if (!*flag) {
        gdte_ipo_req_insert(r);
        return rc;
    }
    rc = complete_one(r, &st, rc, "MPI_Test", *req);
    gdte_ipo_status_out(status, &st);
    return rc;
}

/* After a multiple-completion call: finish the claimed requests at the completed positions
 * (`pos`, or 0..npos-1) and put the others back. `sts` holds their statuses (by position in
 * `pos` when st_by_pos); with MPI_ERR_IN_STATUS each status carries its own code, and
 * MPI_ERR_PENDING marks a request the call did not complete. Returns the call's final code. */
static int finish_many(int n, const MPI_Request reqs[], int rc, int npos, const int *pos, MPI_Status *sts,
                       int st_by_pos, const char *fn)
{
    int in_status = rc == MPI_ERR_IN_STATUS;
    int any_err = 0;
    for (int k = 0; k < npos; k++) {
        int i = pos ? pos[k] : k;
        gdte_ipo_req_t *r = claimed[i];
        if (!r) continue;
        MPI_Status *st = &sts[st_by_pos ? k : i];
        int rrc = in_status ? st->MPI_ERROR : rc;
        if (rrc == MPI_ERR_PENDING) continue; /* not completed by this call: put back below */
        claimed[i] = NULL;
        int erc = complete_one(r, st, rrc, fn, reqs[i]);
        if (erc != rrc) {
            /* Our unpack failed where the MPI had succeeded. */
            st->MPI_ERROR = erc;
            any_err = 1;
        }
    }
    unclaim(n, -1);
    /* The failing request's communicator handler has run already (gdte_ipo_fail). */
    return any_err && !in_status ? MPI_ERR_IN_STATUS : rc;
}

int gdte_ipo_waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    orphans_progress(0);
    if (n > 0) gdte_ipo_node_block(n, reqs, 0);
    if (claim_many(n, reqs) <= 0) return IPO_NEXT(Waitall)(n, reqs, statuses);
    MPI_Status *sts = statuses != MPI_STATUSES_IGNORE ? statuses : snap_st;
    int rc = IPO_NEXT(Waitall)(n, reqs, sts);
    return finish_many(n, reqs, rc, n, NULL, sts, 0, "MPI_Waitall");
}

int gdte_ipo_testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    orphans_progress(0);
    /* All or nothing: a marker receive the MPI completed must be finished now (its sender may
     * wait for it before sending the others). */
    if (gdte_ipo_node_on()) gdte_ipo_node_progress();
    if (claim_many(n, reqs) <= 0) return IPO_NEXT(Testall)(n, reqs, flag, statuses);
    for (int i = 0; i < n; i++)
        if (claimed[i] && !claimed[i]->unpacked &&
            (claimed[i]->node_frag || (claimed[i]->pending && claimed[i]->pending(claimed[i])))) {
            /* A fragmented message still arriving, or still being packed: not all are complete. */
            unclaim(n, -1);
            *flag = 0;
            return MPI_SUCCESS;
        }
    MPI_Status *sts = statuses != MPI_STATUSES_IGNORE ? statuses : snap_st;
    int rc = IPO_NEXT(Testall)(n, reqs, flag, sts);
    if (!*flag && rc != MPI_ERR_IN_STATUS) {
        unclaim(n, -1);
        return rc;
    }
    return finish_many(n, reqs, rc, n, NULL, sts, 0, "MPI_Testall");
}

static int any_common(int test, int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    const char *fn = test ? "MPI_Testany" : "MPI_Waitany";
    orphans_progress(0);
    if (test && gdte_ipo_node_on()) gdte_ipo_node_progress();
    if (claim_many(n, reqs) <= 0)
        return test ? IPO_NEXT(Testany)(n, reqs, index, flag, status) : IPO_NEXT(Waitany)(n, reqs, index, status);
    MPI_Status st;
    int f = 1;
    int rc = test ? IPO_NEXT(Testany)(n, reqs, index, &f, &st) : IPO_NEXT(Waitany)(n, reqs, index, &st);
    if (flag) *flag = f;
    int done = f && *index != MPI_UNDEFINED ? *index : -1;
    gdte_ipo_req_t *r = done >= 0 ? claimed[done] : NULL;
    unclaim(n, done);
    if (r) rc = complete_one(r, &st, rc, fn, reqs[done]);
    if (f) gdte_ipo_status_out(status, &st);
    return rc;
}

int gdte_ipo_waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    if (n > 0) gdte_ipo_node_block(n, reqs, 1);
    return any_common(0, n, reqs, index, NULL, status);
}

int gdte_ipo_testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    return any_common(1, n, reqs, index, flag, status);
}

static int some(int test, int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    const char *fn = test ? "MPI_Testsome" : "MPI_Waitsome";
    orphans_progress(0);
    if (test && gdte_ipo_node_on()) gdte_ipo_node_progress();
    if (claim_many(n, reqs) <= 0)
        return test ? IPO_NEXT(Testsome)(n, reqs, outcount, indices, statuses)
                    : IPO_NEXT(Waitsome)(n, reqs, outcount, indices, statuses);
    MPI_Status *sts = statuses != MPI_STATUSES_IGNORE ? statuses : snap_st;
    int rc = test ? IPO_NEXT(Testsome)(n, reqs, outcount, indices, sts)
                  : IPO_NEXT(Waitsome)(n, reqs, outcount, indices, sts);
    if (*outcount == MPI_UNDEFINED || *outcount == 0) {
        unclaim(n, -1);
        return rc;
    }
    /* Statuses of *some calls are by completion position, not by request index. */
    return finish_many(n, reqs, rc, *outcount, indices, sts, 1, fn);
}

int gdte_ipo_waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    if (n > 0) gdte_ipo_node_block(n, reqs, 1);
    return some(0, n, reqs, outcount, indices, statuses);
}

int gdte_ipo_testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    return some(1, n, reqs, outcount, indices, statuses);
}

int gdte_ipo_request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    /* No claim: the request stays live (this call never frees it). */
    gdte_ipo_req_t *r = gdte_ipo_req_find(req);
    if (r && !r->active) r = NULL;
    if (!r || (!r->is_recv && !r->finish)) return IPO_NEXT(Request_get_status)(req, flag, status);
    /* A fragmented message still arriving, or a receive pending on a batch: moved on here, under
     * the table's lock, as another thread's progress pass moves it on (that pass writes
     * node_frag and unpacked under the lock: read unlocked, ThreadSanitizer saw the race). */
    if (gdte_ipo_node_frag_live()) { /* (none in flight anywhere: no lock per poll) */
        pthread_mutex_lock(&req_lock);
        int pending = r->node_frag && !r->unpacked && !gdte_ipo_node_frag_progress(r, 0);
        pthread_mutex_unlock(&req_lock);
        if (pending) {
            *flag = 0;
            return MPI_SUCCESS;
        }
    }
    if (r->pending && !r->unpacked && r->pending(r)) { /* (a send still being packed) */
        *flag = 0;
        return MPI_SUCCESS;
    }
    MPI_Status st;
    int rc = IPO_NEXT(Request_get_status)(req, flag, &st);
    /* Complete means the data is in the user's buffer, although the request lives on until a
     * wait or test frees it: unpack now, once. */
    if (*flag && r->finish && !r->unpacked) { /* (progress passes never write these: unlocked) */
        /* A nonblocking collective or reduction (progress passes leave these alone): its unpack
         * or copy back, once. */
        int erc = r->finish(r, &st, rc);
        r->unpacked = 1;
        r->fixed_st = st;
        r->fixed_rc = rc != MPI_SUCCESS ? rc : erc;
        if (rc == MPI_SUCCESS) rc = erc;
    } else if (*flag && r->is_recv && !r->finish) {
        /* A receive: whether it is unpacked is read under the table's lock. Another thread's
         * progress pass may be finishing it ahead; it holds the lock until its batched copies
         * are done, so a record read as unpacked here has its data in the buffer, and one read
         * as not unpacked is finished here, once. */
        int eclass = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &eclass);
        pthread_mutex_lock(&req_lock);
        if (!r->unpacked && r->node_frag) {
            /* Another thread started its fragmented message since the check above (the marker's
             * landing may hold fragments by now: it must not be read as a marker again). */
            const int pending = !gdte_ipo_node_frag_progress(r, 0);
            pthread_mutex_unlock(&req_lock);
            if (pending) {
                *flag = 0;
                return MPI_SUCCESS;
            }
            st = r->fixed_st;
        } else if (r->unpacked) {
            /* Finished earlier (a progress pass): the status it stated, not the marker's. */
            st = r->fixed_st;
            pthread_mutex_unlock(&req_lock);
        } else if (rc == MPI_SUCCESS || eclass == MPI_ERR_TRUNCATE) {
            /* A fragmented message only starts here (as in the progress pass). The handler of
             * an error runs after the lock is released (a handler may call MPI); the completion
             * call reports the error again. */
            gdte_ipo_defer_errh = 1;
            gdte_ipo_node_frag_defer(&r->node_frag);
            int erc = finish_ahead(r, &st, "MPI_Request_get_status");
            gdte_ipo_node_frag_defer(NULL);
            gdte_ipo_defer_errh = 0;
            MPI_Comm ec = r->comm == MPI_COMM_NULL ? MPI_COMM_WORLD : r->comm;
            const int pending = r->node_frag && !r->unpacked;
            pthread_mutex_unlock(&req_lock);
            if (erc != MPI_SUCCESS) PMPI_Comm_call_errhandler(ec, erc);
            if (pending) {
                *flag = 0;
                return MPI_SUCCESS;
            }
            if (rc == MPI_SUCCESS) rc = erc;
        } else {
            pthread_mutex_unlock(&req_lock);
        }
    }
    gdte_ipo_status_out(status, &st);
    return rc;
}

int gdte_ipo_request_free(MPI_Request *req)
{
    gdte_ipo_req_t *r = NULL;
    if (req && *req != MPI_REQUEST_NULL && atomic_load_explicit(&req_live, memory_order_acquire) > 0) {
        pthread_mutex_lock(&req_lock);
        HASH_FIND(hh, req_table, req, sizeof *req, r);
        if (r) {
            HASH_DEL(req_table, r);
            r->in_table = 0;
            req_live--;
        }
        pthread_mutex_unlock(&req_lock);
    }
    if (!r) return IPO_NEXT(Request_free)(req);
    if (!r->active) {
        /* An inactive persistent request: its staging and references go now. */
        int rc = IPO_NEXT(Request_free)(req);
        gdte_ipo_req_destroy(r);
        return rc;
    }
    /* Freed while active: MPI completes it in the background, so gdte must still unpack and
     * release its staging when it completes. Keep the handle and progress it ourselves. */
    pthread_mutex_lock(&req_lock);
    r->orphan = 1;
    r->next_orphan = orphans;
    orphans = r;
    pthread_mutex_unlock(&req_lock);
    orphan_count++;
    gdte_ipo_cnt_g.orphans++;
    *req = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

/* A started persistent request is active: written under the table's lock, which other threads'
 * progress passes hold while they read it. */
static void set_active(gdte_ipo_req_t *r)
{
    pthread_mutex_lock(&req_lock);
    r->active = 1;
    pthread_mutex_unlock(&req_lock);
}

int gdte_ipo_start(MPI_Request *req)
{
    gdte_ipo_req_t *r = req ? gdte_ipo_req_find(*req) : NULL;
    if (!r) return IPO_NEXT(Start)(req);
    if (r->start) {
        int rc = r->start(r);
        if (rc != MPI_SUCCESS) return rc;
    } else if (!r->is_recv) {
        int rc = r->node_pers ? gdte_ipo_node_persistent_start(r) : gdte_ipo_persistent_pack(r);
        if (rc != MPI_SUCCESS) return rc;
    }
    int rc = IPO_NEXT(Start)(req);
    if (rc == MPI_SUCCESS) {
        set_active(r);
        if (r->is_recv && r->kind != GDTE_IPO_HOST) gdte_ipo_cnt_g.recvs++;
    }
    return rc;
}

int gdte_ipo_startall(int n, MPI_Request reqs[])
{
    if (n <= 0 || atomic_load_explicit(&req_live, memory_order_acquire) == 0) return IPO_NEXT(Startall)(n, reqs);
    /* Pack every send (and run every start hook) first, then start them all in one call, as the
     * application asked. */
    for (int i = 0; i < n; i++) {
        gdte_ipo_req_t *r = gdte_ipo_req_find(reqs[i]);
        if (r && r->start) {
            int rc = r->start(r);
            if (rc != MPI_SUCCESS) return rc;
        } else if (r && !r->is_recv) {
            int rc = r->node_pers ? gdte_ipo_node_persistent_start(r) : gdte_ipo_persistent_pack(r);
            if (rc != MPI_SUCCESS) return rc;
        }
    }
    int rc = IPO_NEXT(Startall)(n, reqs);
    if (rc == MPI_SUCCESS)
        for (int i = 0; i < n; i++) {
            gdte_ipo_req_t *r = gdte_ipo_req_find(reqs[i]);
            if (r) {
                set_active(r);
                if (r->is_recv && r->kind != GDTE_IPO_HOST) gdte_ipo_cnt_g.recvs++;
            }
        }
    return rc;
}
