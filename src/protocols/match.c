/*
 * Posting, the handshake and matching. A send announces its shape with an RTS; the receiver
 * matches RTS to posted receives by (peer, tag) in posting order, checks size and signature,
 * chooses the protocol and answers with a CTS (except eager messages, whose bytes came with
 * the RTS). Sequence numbers per ordered pair keep MPI's non-overtaking order even if the
 * transport delivered two handshakes out of order.
 */
#include <stdlib.h>
#include <string.h>
#include <utlist.h>
#include "proto_int.h"

static gdte_protocol_t knob_protocol(void)
{
    switch (gdte_knob(GDTE_KNOB_PROTOCOL)) { /* "auto|rdma|copyinout" */
    case 1: return GDTE_PROTOCOL_RDMA;
    case 2: return GDTE_PROTOCOL_COPYINOUT;
    default: return GDTE_PROTOCOL_AUTO;
    }
}

const gdte_proto_ops_t *gdte_proto_ops_by_id(int id)
{
    switch (id) {
    case GDTE_PROTOCOL_EAGER: return &gdte_proto_eager_ops;
    case GDTE_PROTOCOL_COPYINOUT: return &gdte_proto_copyinout_ops;
    case GDTE_PROTOCOL_RDMA: return &gdte_proto_rdma_ops;
    default: return NULL;
    }
}

/* ---- pack/unpack of a byte range of a request's stream ------------------------------------ */
gdte_status_t gdte_proto_pack_range(struct gdte_msg_req *req, void *staging, int64_t off, int64_t len, int gpu)
{
    gdte_pack_params_t pp = {
        .field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES | GDTE_PACK_FIELD_FLAGS |
                      GDTE_PACK_FIELD_STREAM,
        .offset = off,
        .max_bytes = len,
        .stream = gdte_proto_stream(req),
        .flags = gpu ? GDTE_PACK_FLAG_ASYNC : GDTE_PACK_FLAG_HOST,
    };
    int64_t done = 0;
    gdte_status_t st = gdte_pack(req->buf, req->count, req->type, staging, len, &pp, &done);
    if (st == GDTE_OK && done != len) st = GDTE_ERR_INTERNAL;
    return st;
}

gdte_status_t gdte_proto_unpack_range(struct gdte_msg_req *req, const void *staging, int64_t off, int64_t len,
                                      int gpu)
{
    gdte_pack_params_t pp = {
        .field_mask = GDTE_PACK_FIELD_OFFSET | GDTE_PACK_FIELD_MAX_BYTES | GDTE_PACK_FIELD_FLAGS |
                      GDTE_PACK_FIELD_STREAM,
        .offset = off,
        .max_bytes = len,
        .stream = gdte_proto_stream(req),
        .flags = gpu ? GDTE_PACK_FLAG_ASYNC : GDTE_PACK_FLAG_HOST,
    };
    int64_t done = 0;
    gdte_status_t st = gdte_unpack(staging, len, req->buf, req->count, req->type, &pp, &done);
    if (st == GDTE_OK && done != len) st = GDTE_ERR_INTERNAL;
    return st;
}

/* ---- requests ------------------------------------------------------------------------------ */
static gdte_status_t req_new(struct gdte_comm *ctx, int is_send, const void *buf, int64_t count, gdte_type_h type,
                             int peer, uint64_t tag, const gdte_msg_params_t *prm, struct gdte_msg_req **req_p)
{
    if (!ctx || !req_p) return GDTE_ERR_INVALID_ARG;
    if (peer < (is_send ? 0 : GDTE_ANY_PEER) || peer >= ctx->size) return GDTE_ERR_INVALID_ARG;
    if (count < 0) return GDTE_ERR_COUNT;
    gdte_status_t st = gdte_type_check(type);
    if (st != GDTE_OK) return st;
    gdte_layout_t L;
    if ((st = gdte_engine_layout(type, count, &L)) != GDTE_OK) return st;
    uint64_t hash;
    int64_t n;
    if ((st = gdte_type_signature(count, type, &hash, &n)) != GDTE_OK) return st;
    if (L.total > 0 && !buf) return GDTE_ERR_NULL_BUFFER;
    if (prm && (prm->field_mask & GDTE_MSG_FIELD_DEPTH) && (prm->depth < 1 || prm->depth > GDTE_PROTO_MAX_DEPTH))
        return GDTE_ERR_INVALID_ARG;
    if (prm && (prm->field_mask & GDTE_MSG_FIELD_FRAG_SIZE) && prm->frag_size < 0) return GDTE_ERR_INVALID_ARG;
    if (prm && (prm->field_mask & GDTE_MSG_FIELD_PROTOCOL) &&
        ((int)prm->protocol < GDTE_PROTOCOL_AUTO || prm->protocol > GDTE_PROTOCOL_RDMA))
        return GDTE_ERR_INVALID_ARG;

    gdte_mem_info_t mi = {.kind = GDTE_MEM_HOST, .device = -1};
    if (L.total > 0 && ctx->gpu && (st = gdte_mem_query((const char *)buf + L.disp, &mi)) != GDTE_OK) return st;

    struct gdte_msg_req *req = calloc(1, sizeof *req);
    if (!req) return GDTE_ERR_NO_MEMORY;
    req->ctx = ctx;
    req->id = ctx->next_id++;
    req->is_send = is_send;
    req->peer = peer;
    req->tag = tag;
    req->tag_mask = ~(uint64_t)0;
    req->want_protocol = knob_protocol();
    req->want_frag = gdte_knob(GDTE_KNOB_FRAG_SIZE);
    req->want_depth = (int)gdte_knob(GDTE_KNOB_PIPELINE_DEPTH);
    if (prm) {
        if (prm->field_mask & GDTE_MSG_FIELD_TAG_MASK) req->tag_mask = prm->tag_mask;
        if (prm->field_mask & GDTE_MSG_FIELD_FLAGS) req->flags = prm->flags;
        if (prm->field_mask & GDTE_MSG_FIELD_PROTOCOL) req->want_protocol = prm->protocol;
        if (prm->field_mask & GDTE_MSG_FIELD_FRAG_SIZE) req->want_frag = prm->frag_size;
        if (prm->field_mask & GDTE_MSG_FIELD_DEPTH) req->want_depth = prm->depth;
    }
    if (req->want_protocol == GDTE_PROTOCOL_EAGER) req->want_protocol = GDTE_PROTOCOL_AUTO;
    req->buf = (void *)buf;
    req->count = count;
    req->type = type;
    gdte_type_retain(type);
    req->L = L;
    req->size = L.total;
    req->contig = L.kind == GDTE_LAYOUT_KIND_CONTIG;
    req->on_dev = ctx->gpu && (mi.kind == GDTE_MEM_DEVICE || mi.kind == GDTE_MEM_MANAGED);
    req->dev = mi.device;
    req->mem_kind = mi.kind;
    req->sig_hash = hash;
    req->sig_n = n;
    /* Tests: buffers in emulated device memory take the device paths, run on the host. */
    if (gdte_rdma_emulated()) req->on_dev = gdte_rdma_buffer_ok(req);
    req->info.tag = tag;
    req->info.peer = peer;
    HASH_ADD(hh, ctx->by_id, id, sizeof req->id, req);
    req->in_hash = 1;
    gdte_proto_touch(req);
    *req_p = req;
    return GDTE_OK;
}

static void req_discard(struct gdte_msg_req *req)
{
    if (req->in_hash) HASH_DELETE(hh, req->ctx->by_id, req);
    if (req->type) gdte_type_release(req->type);
    free(req->eager_buf);
    free(req);
}

gdte_proto_ctx_h gdte_proto_req_ctx(gdte_proto_req_h req)
{
    return (req && req->state != GDTE_REQ_DONE) ? req->ctx : NULL;
}

gdte_status_t gdte_proto_req_check(gdte_proto_req_h req, gdte_msg_status_t *status_p)
{
    if (!req) return GDTE_ERR_INVALID_ARG;
    if (req->state != GDTE_REQ_DONE) return GDTE_INPROGRESS;
    if (status_p) *status_p = req->info;
    return req->status;
}

gdte_status_t gdte_proto_req_free(gdte_proto_req_h req)
{
    if (!req) return GDTE_ERR_INVALID_ARG;
    if (req->state != GDTE_REQ_DONE) return GDTE_INPROGRESS;
    free(req);
    return GDTE_OK;
}

gdte_status_t gdte_proto_req_cancel(gdte_proto_req_h req)
{
    if (!req) return GDTE_ERR_INVALID_ARG;
    if (req->state == GDTE_REQ_DONE) return req->status == GDTE_ERR_CANCELED ? GDTE_OK : GDTE_INPROGRESS;
    if (req->is_send || req->state != GDTE_REQ_POSTED) return GDTE_INPROGRESS;
    gdte_proto_fail(req, GDTE_ERR_CANCELED, 0);
    return GDTE_OK;
}

/* ---- sending ------------------------------------------------------------------------------- */
static void rts_sent_cb(void *request, ucs_status_t status, void *user_data)
{
    struct gdte_msg_req *req = user_data;
    req->outstanding--;
    if (status != UCS_OK) gdte_proto_fail(req, gdte_proto_status_from_ucs(status), 0);
    else if (req->proto == &gdte_proto_eager_ops) gdte_proto_finish(req);
    ucp_request_free(request);
}

gdte_status_t gdte_proto_send_nb(gdte_proto_ctx_h ctx, const void *buf, int64_t count, gdte_type_h type, int peer,
                                 uint64_t tag, const gdte_msg_params_t *prm, gdte_proto_req_h *req_p)
{
    struct gdte_msg_req *req;
    gdte_status_t st = req_new(ctx, 1, buf, count, type, peer, tag, prm, &req);
    if (st != GDTE_OK) return st;
    gdte_peer_t *p = &ctx->peers[peer];
    ucp_ep_h ep = gdte_proto_ep(ctx, peer);
    if (!ep) {
        st = p->fail_status ? p->fail_status : GDTE_ERR_PEER_FAILED;
        goto err;
    }
    gdte_wire_rts_t *rts = &req->rts;
    memset(rts, 0, sizeof *rts);
    rts->src = ctx->rank;
    rts->sreq = req->id;
    rts->tag = tag;
    rts->seq = p->tx_seq;
    rts->size = req->size;
    rts->sig_hash = req->sig_hash;
    rts->sig_n = req->sig_n;
    rts->protocol = req->want_protocol;
    rts->dev = req->on_dev ? req->dev : -1;
    rts->node = ctx->node;
    rts->pci = ctx->pci;
    if (req->contig) rts->flags |= GDTE_RTS_CONTIG;
    if (req->on_dev) rts->flags |= GDTE_RTS_DEVICE;
    if (req->flags & GDTE_MSG_FLAG_ANY_SIGNATURE) rts->flags |= GDTE_RTS_ANY_SIG;
    int64_t lim = gdte_stg_frag_limit(&ctx->pool, GDTE_STG_SEND);
    rts->max_frag = req->want_frag > 0 && req->want_frag < lim ? req->want_frag : lim;

    const void *payload = NULL;
    size_t payload_len = 0;
    if (req->want_protocol == GDTE_PROTOCOL_AUTO && req->size <= GDTE_PROTO_EAGER_MAX) {
        req->proto = &gdte_proto_eager_ops;
        rts->flags |= GDTE_RTS_EAGER;
        payload_len = (size_t)req->size;
        if (req->size > 0 && req->contig && !req->on_dev) {
            payload = (const char *)buf + req->L.disp;
        } else if (req->size > 0) {
            if (!(req->eager_buf = malloc((size_t)req->size))) {
                st = GDTE_ERR_NO_MEMORY;
                goto err;
            }
            if (req->on_dev && gdte_rdma_gpu_work()) {
                /* A kernel cannot write pageable memory: pack through the pinned bounce. */
                if ((st = gdte_proto_pack_range(req, ctx->bounce, 0, req->size, 1)) != GDTE_OK ||
                    (st = gdte_gpu_stream_synchronize(gdte_proto_stream(req))) != GDTE_OK)
                    goto err;
                memcpy(req->eager_buf, ctx->bounce, (size_t)req->size);
            } else if ((st = gdte_proto_pack_range(req, req->eager_buf, 0, req->size, 0)) != GDTE_OK) {
                goto err;
            }
            payload = req->eager_buf;
        }
        req->info.bytes = req->size;
        req->state = GDTE_REQ_ACTIVE;
    } else {
        if (req->want_protocol != GDTE_PROTOCOL_COPYINOUT) gdte_proto_rdma_offer(req, rts);
        req->state = GDTE_REQ_WAIT_CTS;
    }

    ucp_request_param_t up = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .cb.send = rts_sent_cb,
        .user_data = req,
        .flags = UCP_AM_SEND_FLAG_EAGER,
        .memory_type = UCS_MEMORY_TYPE_HOST,
    };
    void *r = ucp_am_send_nbx(ep, GDTE_AM_RTS, rts, sizeof *rts, payload, payload_len, &up);
    if (UCS_PTR_IS_ERR(r)) {
        st = gdte_proto_status_from_ucs(UCS_PTR_STATUS(r));
        gdte_error("peer %d: cannot send a handshake: %s", peer, ucs_status_string(UCS_PTR_STATUS(r)));
        goto err;
    }
    p->tx_seq++;
    gdte_proto_activate(req);
    if (r) req->outstanding++;
    else if (req->proto == &gdte_proto_eager_ops) gdte_proto_finish(req);
    *req_p = req;
    return GDTE_OK;
err:
    req_discard(req);
    return st;
}

/* ---- receiving ----------------------------------------------------------------------------- */
static int matches(const struct gdte_msg_req *r, const gdte_wire_rts_t *rts)
{
    return (r->peer == GDTE_ANY_PEER || r->peer == rts->src) && ((r->tag ^ rts->tag) & r->tag_mask) == 0;
}

/* Bind a receive to a handshake; the protocol starts from the progress loop. */
static void bind_rts(struct gdte_msg_req *req, gdte_unexp_t *u)
{
    req->rts = u->rts;
    req->eager_buf = u->payload;
    req->peer = u->rts.src;
    req->peer_req = u->rts.sreq;
    req->info.tag = u->rts.tag;
    req->info.peer = u->rts.src;
    free(u);
    req->state = GDTE_REQ_WAIT_RES;
    gdte_proto_touch(req);
    gdte_proto_activate(req);
}

static void deliver(struct gdte_comm *ctx, gdte_unexp_t *u)
{
    struct gdte_msg_req *r;
    DL_FOREACH(ctx->posted, r)
    {
        if (matches(r, &u->rts)) {
            bind_rts(r, u);
            return;
        }
    }
    DL_APPEND(ctx->unexpected, u);
}

ucs_status_t gdte_proto_rts_handler(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                    const ucp_am_recv_param_t *param)
{
    struct gdte_comm *ctx = arg;
    if (header_length != sizeof(gdte_wire_rts_t)) {
        gdte_error("handshake of %zu bytes ignored (expected %zu)", header_length, sizeof(gdte_wire_rts_t));
        return UCS_OK;
    }
    gdte_unexp_t *u = calloc(1, sizeof *u);
    if (!u) return UCS_OK; /* the sender's request will time out: nothing better to do */
    memcpy(&u->rts, header, sizeof u->rts);
    if (u->rts.src < 0 || u->rts.src >= ctx->size) {
        free(u);
        return UCS_OK;
    }
    if (u->rts.flags & GDTE_RTS_EAGER) {
        if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || (int64_t)length != u->rts.size) {
            gdte_error("eager message from %d arrived malformed", u->rts.src);
            free(u);
            return UCS_OK;
        }
        if (length) {
            if (!(u->payload = malloc(length))) {
                free(u);
                return UCS_OK;
            }
            memcpy(u->payload, data, length);
            u->payload_len = (int64_t)length;
        }
    }
    gdte_peer_t *p = &ctx->peers[u->rts.src];
    if (u->rts.seq != p->rx_seq) {
        gdte_unexp_t *e;
        DL_FOREACH(p->early, e)
        if (e->rts.seq > u->rts.seq) break;
        if (e) DL_PREPEND_ELEM(p->early, e, u);
        else DL_APPEND(p->early, u);
        return UCS_OK;
    }
    deliver(ctx, u);
    p->rx_seq++;
    while (p->early && p->early->rts.seq == p->rx_seq) {
        gdte_unexp_t *e = p->early;
        DL_DELETE(p->early, e);
        deliver(ctx, e);
        p->rx_seq++;
    }
    return UCS_OK;
}

gdte_status_t gdte_proto_recv_nb(gdte_proto_ctx_h ctx, void *buf, int64_t count, gdte_type_h type, int peer,
                                 uint64_t tag, const gdte_msg_params_t *prm, gdte_proto_req_h *req_p)
{
    struct gdte_msg_req *req;
    gdte_status_t st = req_new(ctx, 0, buf, count, type, peer, tag, prm, &req);
    if (st != GDTE_OK) return st;
    gdte_unexp_t *u;
    DL_FOREACH(ctx->unexpected, u)
    {
        if (matches(req, &u->rts)) {
            DL_DELETE(ctx->unexpected, u);
            bind_rts(req, u);
            *req_p = req;
            return GDTE_OK;
        }
    }
    if (peer != GDTE_ANY_PEER && ctx->peers[peer].failed) {
        st = ctx->peers[peer].fail_status;
        req_discard(req);
        return st;
    }
    req->state = GDTE_REQ_POSTED;
    DL_APPEND(ctx->posted, req);
    req->on_list = 1;
    *req_p = req;
    return GDTE_OK;
}

gdte_status_t gdte_proto_probe(gdte_proto_ctx_h ctx, int peer, uint64_t tag, uint64_t tag_mask, int *found_p,
                               gdte_msg_status_t *status_p)
{
    if (!ctx || !found_p || peer < GDTE_ANY_PEER || peer >= ctx->size) return GDTE_ERR_INVALID_ARG;
    gdte_proto_progress(ctx);
    struct gdte_msg_req probe = {.peer = peer, .tag = tag, .tag_mask = tag_mask};
    gdte_unexp_t *u;
    DL_FOREACH(ctx->unexpected, u)
    {
        if (matches(&probe, &u->rts)) {
            *found_p = 1;
            if (status_p) {
                memset(status_p, 0, sizeof *status_p);
                status_p->peer = u->rts.src;
                status_p->tag = u->rts.tag;
                status_p->bytes = u->rts.size;
                status_p->protocol = (u->rts.flags & GDTE_RTS_EAGER) ? GDTE_PROTOCOL_EAGER : GDTE_PROTOCOL_AUTO;
            }
            return GDTE_OK;
        }
    }
    *found_p = 0;
    return GDTE_OK;
}

/* ---- after a match: checks and the choice of protocol ------------------------------------- */
static gdte_status_t check_shape(struct gdte_msg_req *req)
{
    const gdte_wire_rts_t *rts = &req->rts;
    req->len = rts->size < req->size ? rts->size : req->size;
    if (rts->size > req->size) return GDTE_ERR_TRUNCATE; /* MPI: deliver what fits, then report */
    if ((rts->flags & GDTE_RTS_ANY_SIG) || (req->flags & GDTE_MSG_FLAG_ANY_SIGNATURE)) return GDTE_OK;
    uint64_t h = req->sig_hash;
    int64_t n = req->sig_n;
    if (rts->size < req->size) {
        /* A shorter message is checked against as many whole receive elements; one that ends
         * inside an element (MPI allows it) can only be checked for its element count, as
         * the signature of part of an element is not available. */
        gdte_type_info_t ti;
        if (gdte_type_get_info(req->type, &ti) != GDTE_OK || ti.size <= 0) return GDTE_ERR_MISMATCH;
        if (rts->size % ti.size) return rts->sig_n < req->sig_n ? GDTE_OK : GDTE_ERR_MISMATCH;
        if (gdte_type_signature(rts->size / ti.size, req->type, &h, &n) != GDTE_OK) return GDTE_ERR_MISMATCH;
    }
    return (h == rts->sig_hash && n == rts->sig_n) ? GDTE_OK : GDTE_ERR_MISMATCH;
}

static const gdte_proto_ops_t *choose(struct gdte_msg_req *req)
{
    const gdte_wire_rts_t *rts = &req->rts;
    if (rts->flags & GDTE_RTS_EAGER) return &gdte_proto_eager_ops;
    int want = req->want_protocol;
    if (rts->protocol != GDTE_PROTOCOL_AUTO && want == GDTE_PROTOCOL_AUTO) want = rts->protocol;
    if (want != GDTE_PROTOCOL_COPYINOUT && gdte_proto_rdma_ops.usable(req)) return &gdte_proto_rdma_ops;
    if (want == GDTE_PROTOCOL_RDMA && req->len > 0) {
        static int warned;
        if (!warned++)
            gdte_warn("GDTE_PROTOCOL=rdma: no RDMA path between rank %d and %d for this message (needs device "
                      "buffers on one node and GPU IPC); using copyinout",
                      req->ctx->rank, req->peer);
    }
    return &gdte_proto_copyinout_ops;
}

gdte_status_t gdte_proto_send_cts(struct gdte_msg_req *rreq, int credits, uint32_t flags, int64_t buf_off,
                                  const gdte_gpu_ipc_handle_t *buf_h)
{
    gdte_wire_cts_t cts = {
        .src = rreq->ctx->rank,
        .status = GDTE_OK,
        .sreq = rreq->peer_req,
        .rreq = rreq->id,
        .len = rreq->len,
        .frag = rreq->frag,
        .protocol = rreq->proto->id,
        .credits = credits,
        .flags = flags,
        .buf_off = buf_off,
    };
    if (buf_h) cts.buf_h = *buf_h;
    return gdte_proto_ctrl_send(rreq->ctx, rreq->peer, GDTE_AM_CTS, &cts, sizeof cts);
}

void gdte_proto_match_retry(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    if (!req->proto) {
        gdte_status_t st = check_shape(req);
        int eager = (req->rts.flags & GDTE_RTS_EAGER) != 0;
        if (st == GDTE_ERR_MISMATCH) {
            /* Nothing is written; a sender still waiting learns why. */
            req->info.bytes = 0;
            if (!eager) {
                gdte_wire_cts_t cts = {.src = ctx->rank, .status = st, .sreq = req->peer_req, .rreq = req->id};
                gdte_proto_ctrl_send(ctx, req->peer, GDTE_AM_CTS, &cts, sizeof cts);
            }
            gdte_proto_fail(req, st, 0);
            return;
        }
        if (st == GDTE_ERR_TRUNCATE) req->truncated = 1; /* reported once the bytes that fit are in */
        if (!eager && ctx->peers[req->peer].failed) {
            gdte_proto_fail(req, ctx->peers[req->peer].fail_status, 0);
            return;
        }
        req->proto = choose(req);
    }
    gdte_status_t st = req->proto->recv_start(req);
    if (st == GDTE_INPROGRESS) return; /* staging is busy: retried from the progress loop */
    if (st != GDTE_OK) {
        gdte_proto_fail(req, st, 1);
        return;
    }
    if (req->state == GDTE_REQ_WAIT_RES) {
        req->state = GDTE_REQ_ACTIVE;
        req->timed = 1;
        gdte_proto_touch(req);
    }
}

ucs_status_t gdte_proto_cts_handler(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                    const ucp_am_recv_param_t *param)
{
    struct gdte_comm *ctx = arg;
    (void)data;
    (void)length;
    (void)param;
    gdte_wire_cts_t cts_copy;
    if (!gdte_proto_header(&cts_copy, sizeof cts_copy, header, header_length)) return UCS_OK;
    const gdte_wire_cts_t *cts = &cts_copy;
    struct gdte_msg_req *req = gdte_proto_req_lookup(ctx, cts->sreq);
    if (!req || !req->is_send || req->state != GDTE_REQ_WAIT_CTS) return UCS_OK;
    req->cts = *cts;
    req->cts_arrived = 1;
    gdte_proto_touch(req);
    return UCS_OK;
}

ucs_status_t gdte_proto_fin_handler(void *arg, const void *header, size_t header_length, void *data, size_t length,
                                    const ucp_am_recv_param_t *param)
{
    struct gdte_comm *ctx = arg;
    (void)data;
    (void)length;
    (void)param;
    gdte_wire_fin_t fin_copy;
    if (!gdte_proto_header(&fin_copy, sizeof fin_copy, header, header_length)) return UCS_OK;
    const gdte_wire_fin_t *fin = &fin_copy;
    if (fin->req == 0) {
        /* A sender gave up before our CTS reached it: drop its handshake, or end the
         * receive it matched. */
        gdte_unexp_t *u;
        DL_FOREACH(ctx->unexpected, u)
        {
            if (u->rts.src == fin->src && u->rts.sreq == fin->sreq) {
                DL_DELETE(ctx->unexpected, u);
                free(u->payload);
                free(u);
                return UCS_OK;
            }
        }
        struct gdte_msg_req *r, *tmp;
        HASH_ITER(hh, ctx->by_id, r, tmp)
        {
            if (!r->is_send && r->peer == fin->src && r->peer_req == fin->sreq && r->state != GDTE_REQ_POSTED) {
                gdte_proto_fail(r, fin->status != GDTE_OK ? (gdte_status_t)fin->status : GDTE_ERR_CANCELED, 0);
                break;
            }
        }
        return UCS_OK;
    }
    struct gdte_msg_req *req = gdte_proto_req_lookup(ctx, fin->req);
    if (!req || req->peer != fin->src) return UCS_OK;
    gdte_proto_touch(req);
    if (fin->status == GDTE_FIN_REDO) {
        gdte_proto_rdma_redo(req);
        return UCS_OK;
    }
    if (fin->status != GDTE_OK) {
        /* The peer gave up on this message: stop, and do not answer. */
        gdte_proto_fail(req, (gdte_status_t)fin->status, 0);
        return UCS_OK;
    }
    gdte_proto_rdma_fin(req, fin);
    return UCS_OK;
}

/* ---- eager: the bytes came with the handshake --------------------------------------------- */
static int eager_usable(struct gdte_msg_req *req) { return (req->rts.flags & GDTE_RTS_EAGER) != 0; }

static gdte_status_t eager_recv_start(struct gdte_msg_req *req)
{
    gdte_status_t st = GDTE_OK;
    int64_t len = req->len;
    if (len > 0) {
        if (!req->on_dev || !gdte_rdma_gpu_work()) {
            st = gdte_proto_unpack_range(req, req->eager_buf, 0, len, 0);
        } else if (req->contig) {
            st = gdte_gpu_memcpy((char *)req->buf + req->L.disp, req->eager_buf, (size_t)len);
        } else {
            memcpy(req->ctx->bounce, req->eager_buf, (size_t)len);
            st = gdte_proto_unpack_range(req, req->ctx->bounce, 0, len, 1);
            if (st == GDTE_OK) st = gdte_gpu_stream_synchronize(gdte_proto_stream(req));
        }
    }
    if (st != GDTE_OK) return st;
    req->info.bytes = len;
    gdte_proto_finish(req);
    return GDTE_OK;
}

static gdte_status_t eager_send_start(struct gdte_msg_req *req, const gdte_wire_cts_t *cts)
{
    (void)req;
    (void)cts;
    return GDTE_ERR_INTERNAL; /* an eager send never waits for a CTS */
}

static int eager_progress(struct gdte_msg_req *req)
{
    (void)req;
    return 0;
}

const gdte_proto_ops_t gdte_proto_eager_ops = {
    .name = "eager",
    .id = GDTE_PROTOCOL_EAGER,
    .usable = eager_usable,
    .recv_start = eager_recv_start,
    .send_start = eager_send_start,
    .progress = eager_progress,
};
