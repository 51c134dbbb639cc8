/*
 * Copy-in/copy-out (Wu 2017, 4.3.2): fragments of F bytes go through staging on both sides,
 * moved by UCX active messages (UCX picks eager or rendezvous by size; a rendezvous lands
 * straight in the receiver's staging slot).
 *
 *   sender:   pack k into a send slot -> FRAG(k) -> slot free when UCX is done with it
 *   receiver: FRAG(k) into a receive slot -> unpack at offset k*F -> slot free -> ACK (credit)
 *
 * The receiver reserves its slots before answering the handshake and gives the sender that
 * many credits; the sender starts a fragment (and takes a send slot) only with a credit in
 * hand, so every fragment in flight has a slot waiting for it at the receiver and no side
 * ever holds staging while waiting on the other. Fragments complete in any order: each
 * carries its index and is unpacked at its own offset of the packed stream.
 *
 * Shortcuts: a contiguous host buffer is sent from, or received into, directly; device data
 * is packed by a kernel straight into mapped pinned staging (zero copy) or into device
 * staging and copied; where UCX moves CUDA memory itself, device staging goes to UCX as is.
 */
#include <stdlib.h>
#include <string.h>
#include "proto_int.h"

#define AUTO_FRAG_MIN (64 << 10)
#define AUTO_FRAG_MAX (1 << 20)

/* Fragments of about an eighth of the message, 64 KiB to 1 MiB: enough of them to overlap
 * the three stages, each long enough to amortise its control messages. */
static int64_t auto_frag(int64_t len)
{
    if (len <= AUTO_FRAG_MIN) return len;
    int64_t f = (int64_t)1 << gdte_log2_ceil(len / 8);
    if (f < AUTO_FRAG_MIN) f = AUTO_FRAG_MIN;
    if (f > AUTO_FRAG_MAX) f = AUTO_FRAG_MAX;
    return f;
}

static int zero_copy(void) { return gdte_knob(GDTE_KNOB_ZERO_COPY) != 2; /* auto|on|off */ }

/* The request's own buffer is touched by UCX directly (no staging). */
static int direct(const struct gdte_msg_req *req)
{
    return req->contig && (!req->on_dev || req->ctx->ucx_cuda);
}

/* Staging goes to UCX in device memory (UCX moves CUDA memory; no host hop). */
static int ucx_dev_staging(const struct gdte_msg_req *req) { return req->on_dev && req->ctx->ucx_cuda; }

static ucs_memory_type_t memtype(const struct gdte_msg_req *req)
{
    return (req->on_dev && req->ctx->ucx_cuda) ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

static int64_t frag_len(const struct gdte_msg_req *req, int64_t k)
{
    int64_t off = k * req->frag;
    return req->len - off < req->frag ? req->len - off : req->frag;
}

/* Staging one slot needs: host (pinned when a GPU is present) unless direct or UCX-device;
 * device when the GPU side does not use zero copy, or UCX takes device memory. */
static gdte_status_t provision(struct gdte_msg_req *req, gdte_slot_t *s, gdte_stg_class_t cls)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_status_t st;
    if (direct(req)) return GDTE_OK;
    int need_host = !ucx_dev_staging(req);
    int need_dev = req->on_dev && (ucx_dev_staging(req) || !zero_copy()) && !req->contig;
    if (need_host && !s->host && (st = gdte_stg_get(&ctx->pool, GDTE_STG_HOST, cls, req->frag, &s->host)) != GDTE_OK)
        return st;
    if (need_dev && !s->dev && (st = gdte_rdma_alloc(ctx, cls, req->frag, 0, &s->dev)) != GDTE_OK)
        return st;
    return GDTE_OK;
}

gdte_status_t gdte_proto_slots_alloc(struct gdte_msg_req *req, int n)
{
    req->slots = calloc((size_t)n, sizeof *req->slots);
    if (!req->slots) return GDTE_ERR_NO_MEMORY;
    req->nslots = n;
    for (int i = 0; i < n; i++) {
        req->slots[i].req = req;
        req->slots[i].ring_slot = -1;
    }
    return GDTE_OK;
}

void gdte_proto_slots_release(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    for (int i = 0; i < req->nslots; i++) {
        gdte_slot_t *s = &req->slots[i];
        if (s->desc) ucp_am_data_release(ctx->worker, s->desc);
        s->desc = NULL;
        gdte_stg_put(&ctx->pool, s->host);
        gdte_stg_put(&ctx->pool, s->dev);
        s->host = s->dev = NULL;
        gdte_proto_event_put(ctx, s->ev);
        gdte_proto_event_put(ctx, s->ev2);
        s->ev = s->ev2 = NULL;
    }
    free(req->slots);
    req->slots = NULL;
    req->nslots = 0;
    if (req->ev) gdte_proto_event_put(ctx, req->ev);
    req->ev = NULL;
    if (req->ipc_ref) req->ipc_ref->refs--;
    req->ipc_ref = NULL;
    req->peer_mem = NULL;
    gdte_proto_rdma_release(req);
}

gdte_slot_t *gdte_proto_slot_free(struct gdte_msg_req *req)
{
    for (int i = 0; i < req->nslots; i++)
        if (req->slots[i].state == GDTE_SLOT_FREE && !req->slots[i].ucx_pending) return &req->slots[i];
    return NULL;
}

/* Queue an event after the work just put on the context stream. */
gdte_status_t gdte_proto_record(struct gdte_msg_req *req, gdte_gpu_event_t *ev)
{
    gdte_status_t st;
    if (!*ev && (st = gdte_proto_event_get(req->ctx, ev)) != GDTE_OK) return st;
    return gdte_gpu_event_record(*ev, gdte_proto_stream(req));
}

/* ================================ receiver ================================================ */
static void frag_complete(struct gdte_msg_req *req, gdte_slot_t *s)
{
    s->state = GDTE_SLOT_FREE;
    req->frags_done++;
    req->acks_owed++;
    req->ctx->stats.frags_recvd++;
    gdte_proto_touch(req);
    if (req->frags_done == req->nfrags) {
        req->info.bytes = req->len;
        gdte_proto_finish(req);
    }
}

static gdte_status_t cio_recv_start(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_status_t st;
    if (req->len == 0) {
        req->frag = 0;
        req->nfrags = 0;
        if ((st = gdte_proto_send_cts(req, 0, 0, 0, NULL)) != GDTE_OK) return st;
        req->info.bytes = 0;
        gdte_proto_finish(req);
        return GDTE_OK;
    }
    if (!req->slots) {
        int64_t f = req->want_frag > 0 ? req->want_frag : auto_frag(req->len);
        int64_t lim = gdte_stg_frag_limit(&ctx->pool, GDTE_STG_RECV);
        if (f > lim) f = lim;
        if (req->rts.max_frag > 0 && f > req->rts.max_frag) f = req->rts.max_frag;
        if (f > req->len) f = req->len;
        if (f < 1) f = 1;
        req->frag = f;
        req->nfrags = (req->len + f - 1) / f;
        int depth = req->want_depth;
        if (depth > req->nfrags) depth = (int)req->nfrags;
        if ((st = gdte_proto_slots_alloc(req, depth)) != GDTE_OK) return st;
    }
    /* Take what staging there is; one slot is enough to move (slowly). */
    int got = 0;
    for (int i = 0; i < req->nslots; i++) {
        st = provision(req, &req->slots[i], GDTE_STG_RECV);
        if (st == GDTE_INPROGRESS) break;
        if (st != GDTE_OK) return st;
        got++;
    }
    if (got == 0) return GDTE_INPROGRESS;
    for (int i = got; i < req->nslots; i++) {
        gdte_stg_put(&ctx->pool, req->slots[i].host);
        gdte_stg_put(&ctx->pool, req->slots[i].dev);
    }
    req->nslots = got;
    req->credits = got;
    return gdte_proto_send_cts(req, got, 0, 0, NULL);
}

static void recv_done_cb(void *request, ucs_status_t status, size_t length, void *user_data)
{
    gdte_slot_t *s = user_data;
    struct gdte_msg_req *req = s->req;
    (void)length;
    s->ucx_pending = 0;
    req->outstanding--;
    ucp_request_free(request);
    if (status != UCS_OK) {
        s->state = GDTE_SLOT_FREE;
        gdte_proto_fail(req, gdte_proto_status_from_ucs(status), 1);
        return;
    }
    if (req->state != GDTE_REQ_ACTIVE) {
        s->state = GDTE_SLOT_FREE;
        return;
    }
    if (direct(req)) frag_complete(req, s);
    else s->state = GDTE_SLOT_RECEIVED;
    gdte_proto_touch(req);
}

ucs_status_t gdte_proto_frag_handler(void *arg, const void *header, size_t header_length, void *data,
                                     size_t length, const ucp_am_recv_param_t *param)
{
    struct gdte_comm *ctx = arg;
    gdte_wire_frag_t h_copy;
    if (!gdte_proto_header(&h_copy, sizeof h_copy, header, header_length)) return UCS_OK;
    const gdte_wire_frag_t *h = &h_copy;
    struct gdte_msg_req *req = gdte_proto_req_lookup(ctx, h->rreq);
    /* A fragment for a request that ended (aborted): returning OK drops it, and UCX completes
     * the sender's send, which already knows (FIN) or will. */
    if (!req || req->is_send || req->proto != &gdte_proto_copyinout_ops || req->state != GDTE_REQ_ACTIVE ||
        req->peer != h->src)
        return UCS_OK;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    if (h->k < 0 || h->k >= req->nfrags || (int64_t)length != frag_len(req, h->k)) {
        gdte_error("fragment %lld of %zu bytes does not fit message %llu", (long long)h->k, length,
                   (unsigned long long)req->id);
        gdte_proto_fail(req, GDTE_ERR_TRANSPORT, 1);
        return UCS_OK;
    }
    gdte_proto_touch(req);
    gdte_slot_t *s = gdte_proto_slot_free(req);
    if (!s) {
        gdte_error("message %llu: fragment beyond the credits given", (unsigned long long)req->id);
        gdte_proto_fail(req, GDTE_ERR_INTERNAL, 1);
        return UCS_OK;
    }
    s->k = h->k;
    s->off = h->k * req->frag;
    s->len = (int64_t)length;
    if (rndv) {
        /* Fetched from the progress loop, into the slot (or the user buffer). */
        s->desc = data;
        s->state = GDTE_SLOT_ARRIVED;
        return UCS_INPROGRESS;
    }
    if (direct(req)) {
        memcpy((char *)req->buf + req->L.disp + s->off, data, length);
        frag_complete(req, s);
    } else if (!req->on_dev) {
        /* The bytes are only valid during this call: unpack them now, no staging copy. */
        gdte_status_t st = gdte_proto_unpack_range(req, data, s->off, s->len, 0);
        if (st != GDTE_OK) {
            gdte_proto_fail(req, st, 1);
            return UCS_OK;
        }
        frag_complete(req, s);
    } else {
        memcpy(s->host->ptr, data, length);
        s->state = GDTE_SLOT_RECEIVED;
    }
    return UCS_OK;
}

static gdte_status_t start_unpack(struct gdte_msg_req *req, gdte_slot_t *s)
{
    gdte_status_t st;
    if (!req->on_dev) {
        if ((st = gdte_proto_unpack_range(req, s->host->ptr, s->off, s->len, 0)) != GDTE_OK) return st;
        frag_complete(req, s);
        return GDTE_OK;
    }
    gdte_stream_t stream = gdte_proto_stream(req);
    if (req->contig) {
        /* ucx_cuda && contig is direct and never gets here. */
        st = gdte_rdma_copy(req, (char *)req->buf + req->L.disp + s->off, s->host->ptr, s->len);
    } else if (s->dev && !ucx_dev_staging(req)) {
        st = gdte_rdma_copy(req, s->dev->ptr, s->host->ptr, s->len);
        if (st == GDTE_OK) st = gdte_proto_unpack_range(req, s->dev->ptr, s->off, s->len, gdte_rdma_gpu_work());
    } else {
        st = gdte_proto_unpack_range(req, s->dev ? s->dev->ptr : s->host->ptr, s->off, s->len, gdte_rdma_gpu_work());
    }
    if (st == GDTE_OK) st = gdte_rdma_record(req, &s->ev);
    if (st != GDTE_OK) {
        /* Part of the work may be queued: let it finish before the staging goes back. */
        if (gdte_rdma_gpu_work()) gdte_gpu_stream_synchronize(stream);
        return st;
    }
    s->state = GDTE_SLOT_UNPACKING;
    req->outstanding++;
    return GDTE_OK;
}

static int recv_progress(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    int n = 0;
    gdte_status_t st = GDTE_OK;
    for (int i = 0; i < req->nslots && st == GDTE_OK; i++) {
        gdte_slot_t *s = &req->slots[i];
        switch (s->state) {
        case GDTE_SLOT_ARRIVED: {
            if (req->state != GDTE_REQ_ACTIVE) break;
            void *dst = direct(req) ? (char *)req->buf + req->L.disp + s->off
                                    : (ucx_dev_staging(req) ? s->dev->ptr : s->host->ptr);
            ucp_request_param_t up = {
                .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                UCP_OP_ATTR_FIELD_MEMORY_TYPE,
                .cb.recv_am = recv_done_cb,
                .user_data = s,
                .memory_type = memtype(req),
            };
            void *desc = s->desc;
            s->desc = NULL; /* UCX owns it from here, whatever the outcome */
            void *r = ucp_am_recv_data_nbx(ctx->worker, desc, dst, (size_t)s->len, &up);
            n++;
            if (UCS_PTR_IS_ERR(r)) {
                s->state = GDTE_SLOT_FREE;
                st = gdte_proto_status_from_ucs(UCS_PTR_STATUS(r));
            } else if (r) {
                s->state = GDTE_SLOT_RECVING;
                s->ucx_pending = 1;
                req->outstanding++;
            } else if (direct(req)) {
                frag_complete(req, s);
            } else {
                s->state = GDTE_SLOT_RECEIVED;
            }
            break;
        }
        case GDTE_SLOT_RECEIVED:
            if (req->state != GDTE_REQ_ACTIVE) {
                s->state = GDTE_SLOT_FREE;
                break;
            }
            st = start_unpack(req, s);
            n++;
            break;
        case GDTE_SLOT_UNPACKING: {
            gdte_status_t q = gdte_rdma_query(&s->ev);
            if (q == GDTE_INPROGRESS) break;
            req->outstanding--;
            n++;
            if (q != GDTE_OK) {
                s->state = GDTE_SLOT_FREE;
                st = q;
            } else if (req->state == GDTE_REQ_ACTIVE) {
                frag_complete(req, s);
            } else {
                s->state = GDTE_SLOT_FREE;
            }
            break;
        }
        default: break;
        }
    }
    if (st != GDTE_OK) {
        gdte_proto_fail(req, st, 1);
        return n;
    }
    /* Credits back to the sender, batched; the last `credits` fragments need none. */
    int64_t needed = req->nfrags - req->credits;
    if (req->acks_owed > 0 && req->acks_sent < needed && req->state == GDTE_REQ_ACTIVE) {
        int64_t a = req->acks_owed;
        if (a > needed - req->acks_sent) a = needed - req->acks_sent;
        gdte_wire_ack_t ack = {.src = ctx->rank, .n = (int32_t)a, .sreq = req->peer_req};
        if ((st = gdte_proto_ctrl_send(ctx, req->peer, GDTE_AM_ACK, &ack, sizeof ack)) != GDTE_OK) {
            gdte_proto_fail(req, st, 0);
            return n;
        }
        req->acks_sent += a;
        req->acks_owed = 0;
        n++;
    }
    return n;
}

/* ================================ sender =================================================== */
gdte_status_t gdte_proto_send_frags(struct gdte_msg_req *req, const gdte_wire_cts_t *cts, int64_t max_frag)
{
    req->frag = cts->frag;
    req->credits = cts->credits;
    if (req->frag <= 0 || (max_frag > 0 && req->frag > max_frag) || req->credits <= 0 || req->len > req->size)
        return GDTE_ERR_INTERNAL;
    req->nfrags = (req->len + req->frag - 1) / req->frag;
    int depth = req->want_depth;
    if (depth > req->nfrags) depth = (int)req->nfrags;
    return gdte_proto_slots_alloc(req, depth);
}

static gdte_status_t cio_send_start(struct gdte_msg_req *req, const gdte_wire_cts_t *cts)
{
    if (req->len == 0) {
        req->nfrags = 0;
        gdte_proto_finish(req);
        return GDTE_OK;
    }
    return gdte_proto_send_frags(req, cts, 0);
}

ucs_status_t gdte_proto_ack_handler(void *arg, const void *header, size_t header_length, void *data,
                                    size_t length, const ucp_am_recv_param_t *param)
{
    struct gdte_comm *ctx = arg;
    (void)data;
    (void)length;
    (void)param;
    gdte_wire_ack_t a_copy;
    if (!gdte_proto_header(&a_copy, sizeof a_copy, header, header_length)) return UCS_OK;
    const gdte_wire_ack_t *a = &a_copy;
    struct gdte_msg_req *req = gdte_proto_req_lookup(ctx, a->sreq);
    if (!req || !req->is_send || req->proto != &gdte_proto_copyinout_ops || req->peer != a->src) return UCS_OK;
    req->credits += a->n;
    gdte_proto_touch(req);
    return UCS_OK;
}

static void send_done_cb(void *request, ucs_status_t status, void *user_data)
{
    gdte_slot_t *s = user_data;
    struct gdte_msg_req *req = s->req;
    s->ucx_pending = 0;
    s->state = GDTE_SLOT_FREE;
    req->outstanding--;
    ucp_request_free(request);
    if (status != UCS_OK) {
        gdte_proto_fail(req, gdte_proto_status_from_ucs(status), 1);
        return;
    }
    req->ctx->stats.frags_sent++;
    gdte_proto_touch(req);
}

static gdte_status_t start_pack(struct gdte_msg_req *req, gdte_slot_t *s)
{
    gdte_status_t st;
    if (direct(req)) {
        s->state = GDTE_SLOT_READY;
        return GDTE_OK;
    }
    if (!req->on_dev) {
        if ((st = gdte_proto_pack_range(req, s->host->ptr, s->off, s->len, 0)) != GDTE_OK) return st;
        s->state = GDTE_SLOT_READY;
        return GDTE_OK;
    }
    gdte_stream_t stream = gdte_proto_stream(req);
    if (req->contig) {
        st = gdte_rdma_copy(req, s->host->ptr, (char *)req->buf + req->L.disp + s->off, s->len);
    } else if (ucx_dev_staging(req)) {
        st = gdte_proto_pack_range(req, s->dev->ptr, s->off, s->len, gdte_rdma_gpu_work());
    } else if (s->dev) {
        st = gdte_proto_pack_range(req, s->dev->ptr, s->off, s->len, gdte_rdma_gpu_work());
        if (st == GDTE_OK) st = gdte_rdma_copy(req, s->host->ptr, s->dev->ptr, s->len);
    } else {
        st = gdte_proto_pack_range(req, s->host->ptr, s->off, s->len, gdte_rdma_gpu_work()); /* zero copy */
    }
    if (st == GDTE_OK) st = gdte_rdma_record(req, &s->ev);
    if (st != GDTE_OK) {
        if (gdte_rdma_gpu_work()) gdte_gpu_stream_synchronize(stream);
        return st;
    }
    s->state = GDTE_SLOT_PACKING;
    req->outstanding++;
    return GDTE_OK;
}

static gdte_status_t send_frag(struct gdte_msg_req *req, gdte_slot_t *s)
{
    struct gdte_comm *ctx = req->ctx;
    ucp_ep_h ep = gdte_proto_ep(ctx, req->peer);
    if (!ep) return GDTE_ERR_PEER_FAILED;
    if (gdte_fault_hit(GDTE_KNOB_FAULT_UCX_ERROR)) {
        /* Injected: handled exactly as UCX reporting an endpoint error would be. */
        gdte_warn("peer %d: injected UCX error on fragment %lld (GDTE_FAULT_UCX_ERROR)", req->peer, (long long)s->k);
        gdte_proto_peer_failed(ctx, req->peer, GDTE_ERR_TRANSPORT);
        return GDTE_ERR_TRANSPORT;
    }
    const void *src = direct(req) ? (const char *)req->buf + req->L.disp + s->off
                                  : (ucx_dev_staging(req) ? s->dev->ptr : s->host->ptr);
    s->hdr = (gdte_wire_frag_t){.src = ctx->rank, .rreq = req->peer_req, .k = s->k};
    ucp_request_param_t up = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .cb.send = send_done_cb,
        .user_data = s,
        .memory_type = (direct(req) && !req->on_dev) ? UCS_MEMORY_TYPE_HOST : memtype(req),
    };
    void *r = ucp_am_send_nbx(ep, GDTE_AM_FRAG, &s->hdr, sizeof s->hdr, src, (size_t)s->len, &up);
    if (UCS_PTR_IS_ERR(r)) return gdte_proto_status_from_ucs(UCS_PTR_STATUS(r));
    if (r) {
        s->state = GDTE_SLOT_SENDING;
        s->ucx_pending = 1;
        req->outstanding++;
    } else {
        s->state = GDTE_SLOT_FREE;
        ctx->stats.frags_sent++;
    }
    return GDTE_OK;
}

static int send_progress(struct gdte_msg_req *req)
{
    int n = 0;
    gdte_status_t st = GDTE_OK;
    for (int i = 0; i < req->nslots; i++) {
        gdte_slot_t *s = &req->slots[i];
        if (s->state != GDTE_SLOT_PACKING) continue;
        gdte_status_t q = gdte_rdma_query(&s->ev);
        if (q == GDTE_INPROGRESS) continue;
        req->outstanding--;
        n++;
        if (q != GDTE_OK) {
            s->state = GDTE_SLOT_FREE;
            st = q;
        } else {
            s->state = req->state == GDTE_REQ_ACTIVE ? GDTE_SLOT_READY : GDTE_SLOT_FREE;
        }
    }
    if (req->state != GDTE_REQ_ACTIVE) return n;
    /* Pack ahead while credits last: fragment k+1 packs while k is on the wire. */
    while (st == GDTE_OK && req->next_k < req->nfrags && req->credits > 0) {
        gdte_slot_t *s = gdte_proto_slot_free(req);
        if (!s) break;
        st = provision(req, s, GDTE_STG_SEND);
        if (st == GDTE_INPROGRESS) {
            st = GDTE_OK;
            break;
        }
        if (st != GDTE_OK) break;
        s->k = req->next_k++;
        s->off = s->k * req->frag;
        s->len = frag_len(req, s->k);
        req->credits--;
        st = start_pack(req, s);
        n++;
    }
    for (int i = 0; i < req->nslots && st == GDTE_OK; i++) {
        gdte_slot_t *s = &req->slots[i];
        if (s->state != GDTE_SLOT_READY) continue;
        st = send_frag(req, s);
        n++;
    }
    if (st != GDTE_OK) {
        gdte_proto_fail(req, st, 1);
        return n;
    }
    if (req->next_k == req->nfrags) {
        int busy = 0;
        for (int i = 0; i < req->nslots; i++) busy |= req->slots[i].state != GDTE_SLOT_FREE || req->slots[i].ucx_pending;
        if (!busy) gdte_proto_finish(req);
    }
    return n;
}

static int cio_progress(struct gdte_msg_req *req) { return req->is_send ? send_progress(req) : recv_progress(req); }

static int cio_usable(struct gdte_msg_req *req)
{
    (void)req;
    return 1;
}

const gdte_proto_ops_t gdte_proto_copyinout_ops = {
    .name = "copyinout",
    .id = GDTE_PROTOCOL_COPYINOUT,
    .usable = cio_usable,
    .recv_start = cio_recv_start,
    .send_start = cio_send_start,
    .progress = cio_progress,
};
