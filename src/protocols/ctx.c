/*
 * The context: UCP context and worker, endpoints made on first use, bootstrap through the
 * caller's allgather, the progress loop, request lifetime, peer failure and timeouts.
 *
 * UCX callbacks (active messages, completions, endpoint errors) only record what happened and
 * put the request on the active list; every UCX call that starts an operation is made from
 * gdte_proto_progress, outside the callbacks, so no callback ever re-enters UCX.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ucs/debug/log_def.h>
#include <utlist.h>
#include "proto_int.h"

gdte_status_t gdte_proto_status_from_ucs(ucs_status_t s)
{
    switch (s) {
    case UCS_OK: return GDTE_OK;
    case UCS_INPROGRESS: return GDTE_INPROGRESS;
    case UCS_ERR_CANCELED: return GDTE_ERR_CANCELED;
    case UCS_ERR_NO_MEMORY: return GDTE_ERR_NO_MEMORY;
    case UCS_ERR_TIMED_OUT: return GDTE_ERR_TIMEOUT;
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED: return GDTE_ERR_PEER_FAILED;
    default: return GDTE_ERR_TRANSPORT;
    }
}

/* ---- identity of this host and GPU -------------------------------------------------------- */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        h ^= c[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Hostname and boot id: two containers on one host with different names do not use IPC
 * between them, which is what we want (their IPC may be blocked). */
static uint64_t node_identity(void)
{
    char buf[256] = {0};
    uint64_t h = 0xcbf29ce484222325ull;
    if (gethostname(buf, sizeof buf - 1) == 0) h = fnv1a(h, buf, strlen(buf));
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        memset(buf, 0, sizeof buf);
        if (fgets(buf, sizeof buf, f)) h = fnv1a(h, buf, strlen(buf));
        fclose(f);
    }
    return h;
}

/* ---- endpoints and failure ---------------------------------------------------------------- */
static void ep_error_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    gdte_peer_t *p = arg;
    (void)ep;
    gdte_warn("peer %d: transport error: %s", p->rank, ucs_status_string(status));
    gdte_proto_peer_failed(p->ctx, p->rank, gdte_proto_status_from_ucs(status) == GDTE_ERR_TRANSPORT
                                                  ? GDTE_ERR_TRANSPORT
                                                  : GDTE_ERR_PEER_FAILED);
}

/* Keeps UCX quiet while an endpoint is tried in a mode it may not support. */
static ucs_log_func_rc_t silence(const char *file, unsigned line, const char *function, ucs_log_level_t level,
                                 const ucs_log_component_config_t *comp_conf, const char *message, va_list ap)
{
    (void)file, (void)line, (void)function, (void)level, (void)comp_conf, (void)message, (void)ap;
    return UCS_LOG_FUNC_RC_STOP;
}

static ucs_status_t ep_create(struct gdte_comm *ctx, gdte_peer_t *p, ucp_err_handling_mode_t mode)
{
    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .address = p->addr,
        .err_mode = mode,
    };
    if (mode == UCP_ERR_HANDLING_MODE_PEER) {
        ep_params.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep_params.err_handler = (ucp_err_handler_t){.cb = ep_error_cb, .arg = p};
    }
    return ucp_ep_create(ctx->worker, &ep_params, &p->ep);
}

ucp_ep_h gdte_proto_ep(struct gdte_comm *ctx, int peer)
{
    gdte_peer_t *p = &ctx->peers[peer];
    if (p->failed) return NULL;
    if (p->ep) return p->ep;
    ucs_status_t s = UCS_ERR_UNREACHABLE;
    if (ctx->peer_errh) {
        /* UCX 1.13's shared-memory transports cannot report a dead peer, and refuse an
         * endpoint that asks for it: then the endpoint goes without, and GDTE_TIMEOUT is what
         * detects a peer that stopped answering. */
        ucs_log_push_handler(silence);
        s = ep_create(ctx, p, UCP_ERR_HANDLING_MODE_PEER);
        ucs_log_pop_handler();
        if (s == UCS_ERR_UNREACHABLE) {
            ctx->peer_errh = 0;
            gdte_info("UCX transports here cannot detect a failed peer; GDTE_TIMEOUT (%.0f s) will", ctx->timeout);
        }
    }
    if (!ctx->peer_errh) s = ep_create(ctx, p, UCP_ERR_HANDLING_MODE_NONE);
    if (s != UCS_OK) {
        gdte_error("peer %d: cannot create a UCX endpoint: %s", peer, ucs_status_string(s));
        p->ep = NULL;
        gdte_proto_peer_failed(ctx, peer, GDTE_ERR_TRANSPORT);
        return NULL;
    }
    return p->ep;
}

void gdte_proto_print_transports(gdte_proto_ctx_h ctx, int peer, FILE *f)
{
    if (!ctx || !f || peer < 0 || peer >= ctx->size || peer == ctx->rank) return;
    ucp_ep_h ep = gdte_proto_ep(ctx, peer);
    if (!ep) {
        fprintf(f, "gdte: no UCX endpoint to peer %d\n", peer);
        return;
    }
    /* UCX lists the endpoint's lanes with their transport and device (posix/sysv/cma = shared
     * memory, tcp = sockets): what every control message and copy-in/out fragment rides on. */
    fprintf(f, "gdte: UCX %s, UCX_TLS=%s, endpoint to peer %d:\n", ucp_get_version_string(),
            getenv("UCX_TLS") ? getenv("UCX_TLS") : "(default)", peer);
    ucp_ep_print_info(ep, f);
    fflush(f);
}

static void close_ep(gdte_peer_t *p, int force)
{
    if (!p->ep) return;
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    void *r = ucp_ep_close_nbx(p->ep, &prm);
    p->ep = NULL;
    if (UCS_PTR_IS_PTR(r)) p->close_req = r;
}

void gdte_proto_peer_failed(struct gdte_comm *ctx, int peer, gdte_status_t why)
{
    gdte_peer_t *p = &ctx->peers[peer];
    if (p->failed) return;
    p->failed = 1;
    p->fail_status = why;
    ctx->stats.peer_failures++;
    /* Forcing the close completes every UCX operation still queued to this peer (canceled),
     * which is what lets the requests below drain instead of waiting forever. */
    close_ep(p, 1);
    struct gdte_msg_req *r, *tmp;
    HASH_ITER(hh, ctx->by_id, r, tmp)
    {
        if (r->peer == peer && r->state != GDTE_REQ_DONE) gdte_proto_fail(r, why, 0);
    }
}

/* ---- control messages ---------------------------------------------------------------------- */
static void ctrl_done_cb(void *request, ucs_status_t status, void *user_data)
{
    if (status != UCS_OK && status != UCS_ERR_CANCELED)
        gdte_debug("control message failed: %s", ucs_status_string(status));
    free(user_data);
    ucp_request_free(request);
}

gdte_status_t gdte_proto_ctrl_send(struct gdte_comm *ctx, int peer, unsigned am_id, const void *hdr, size_t hdr_len)
{
    ucp_ep_h ep = gdte_proto_ep(ctx, peer);
    if (!ep) return ctx->peers[peer].fail_status ? ctx->peers[peer].fail_status : GDTE_ERR_PEER_FAILED;
    /* UCX 1.13 reads the header until the send completes: give it a copy of its own. */
    void *copy = malloc(hdr_len);
    if (!copy) return GDTE_ERR_NO_MEMORY;
    memcpy(copy, hdr, hdr_len);
    ucp_request_param_t prm = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = ctrl_done_cb,
        .user_data = copy,
        .flags = UCP_AM_SEND_FLAG_EAGER,
    };
    void *r = ucp_am_send_nbx(ep, am_id, copy, hdr_len, NULL, 0, &prm);
    if (r == NULL) {
        free(copy);
        return GDTE_OK;
    }
    if (UCS_PTR_IS_ERR(r)) {
        free(copy);
        gdte_debug("peer %d: control message %u: %s", peer, am_id, ucs_status_string(UCS_PTR_STATUS(r)));
        return gdte_proto_status_from_ucs(UCS_PTR_STATUS(r));
    }
    return GDTE_OK;
}

/* ---- events -------------------------------------------------------------------------------- */
gdte_status_t gdte_proto_event_get(struct gdte_comm *ctx, gdte_gpu_event_t *ev_p)
{
    if (ctx->n_ev_cache > 0) {
        *ev_p = ctx->ev_cache[--ctx->n_ev_cache];
        return GDTE_OK;
    }
    return gdte_gpu_event_create(ev_p, 0);
}

void gdte_proto_event_put(struct gdte_comm *ctx, gdte_gpu_event_t ev)
{
    if (!ev) return;
    if (ctx->n_ev_cache == ctx->cap_ev_cache) {
        int cap = ctx->cap_ev_cache ? 2 * ctx->cap_ev_cache : 16;
        gdte_gpu_event_t *n = realloc(ctx->ev_cache, (size_t)cap * sizeof *n);
        if (!n) {
            gdte_gpu_event_destroy(ev);
            return;
        }
        ctx->ev_cache = n;
        ctx->cap_ev_cache = cap;
    }
    ctx->ev_cache[ctx->n_ev_cache++] = ev;
}

/* ---- request lifetime ---------------------------------------------------------------------- */
struct gdte_msg_req *gdte_proto_req_lookup(struct gdte_comm *ctx, uint64_t id)
{
    struct gdte_msg_req *r = NULL;
    HASH_FIND(hh, ctx->by_id, &id, sizeof id, r);
    return (r && r->state != GDTE_REQ_DONE) ? r : NULL;
}

void gdte_proto_activate(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    if (req->on_list == 2) return;
    if (req->on_list == 1) DL_DELETE(ctx->posted, req);
    DL_APPEND(ctx->active, req);
    req->on_list = 2;
}

static void complete(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    if (req->on_list == 1) DL_DELETE(ctx->posted, req);
    else if (req->on_list == 2) DL_DELETE(ctx->active, req);
    req->on_list = 0;
    if (req->in_hash) HASH_DELETE(hh, ctx->by_id, req);
    req->in_hash = 0;
    gdte_proto_slots_release(req);
    free(req->eager_buf);
    req->eager_buf = NULL;
    if (req->type) gdte_type_release(req->type);
    req->type = NULL;
    if (req->status == GDTE_OK && req->proto) ctx->stats.msgs[req->proto->id]++;
    if (req->status == GDTE_OK && req->truncated) req->status = GDTE_ERR_TRUNCATE;
    req->info.status = req->status;
    req->info.peer = req->peer;
    req->info.protocol = req->proto ? req->proto->id : GDTE_PROTOCOL_AUTO;
    req->state = GDTE_REQ_DONE;
    gdte_debug("req %llu (%s peer %d tag %llu) done: %s via %s, %lld bytes", (unsigned long long)req->id,
               req->is_send ? "send" : "recv", req->peer, (unsigned long long)req->info.tag,
               gdte_status_name(req->status), req->proto ? req->proto->name : "-", (long long)req->info.bytes);
}

void gdte_proto_fail(struct gdte_msg_req *req, gdte_status_t st, int tell_peer)
{
    if (req->state == GDTE_REQ_DONE) return;
    if (req->status == GDTE_OK) req->status = st;
    /* A send still waiting for its CTS revokes its handshake; anything later names the
     * peer's request. */
    if (tell_peer && (req->peer_req || (req->is_send && req->state == GDTE_REQ_WAIT_CTS)) &&
        !req->ctx->peers[req->peer].failed)
        req->fin_send = 1;
    if (req->state == GDTE_REQ_POSTED) {
        complete(req);
        return;
    }
    req->state = GDTE_REQ_DRAIN;
    gdte_proto_activate(req);
}

void gdte_proto_finish(struct gdte_msg_req *req)
{
    if (req->state == GDTE_REQ_DONE || req->state == GDTE_REQ_DRAIN) return;
    req->state = GDTE_REQ_DRAIN;
    gdte_proto_activate(req);
}

/* Release buffers once nothing (UCX, GPU) holds them, then complete. */
static int drain(struct gdte_msg_req *req)
{
    if (req->outstanding > 0) {
        /* GPU work still pending on a failed request is polled here, not by the protocol. */
        if (req->proto && req->proto->progress) req->proto->progress(req);
        if (req->outstanding > 0) return 0;
    }
    if (req->fin_send) {
        gdte_wire_fin_t fin = {.src = req->ctx->rank, .status = req->status, .req = req->peer_req,
                               .sreq = req->is_send ? req->id : 0, .bytes = req->info.bytes};
        gdte_proto_ctrl_send(req->ctx, req->peer, GDTE_AM_FIN, &fin, sizeof fin);
        req->fin_send = 0;
    }
    complete(req);
    return 1;
}

static int advance(struct gdte_msg_req *req)
{
    switch (req->state) {
    case GDTE_REQ_WAIT_RES:
        gdte_proto_match_retry(req);
        return req->state != GDTE_REQ_WAIT_RES;
    case GDTE_REQ_WAIT_CTS:
        if (!req->cts_arrived) return 0;
        req->cts_arrived = 0;
        {
            const gdte_wire_cts_t *cts = &req->cts;
            if (cts->status != GDTE_OK) {
                /* The receiver refused (signature mismatch): nothing moved. */
                gdte_proto_fail(req, (gdte_status_t)cts->status, 0);
                return 1;
            }
            req->peer_req = cts->rreq;
            req->len = cts->len;
            req->info.bytes = cts->len;
            req->proto = gdte_proto_ops_by_id(cts->protocol);
            if (!req->proto) {
                gdte_proto_fail(req, GDTE_ERR_INTERNAL, 1);
                return 1;
            }
            req->state = GDTE_REQ_ACTIVE;
            req->timed = 1;
            gdte_proto_touch(req);
            gdte_status_t st = req->proto->send_start(req, cts);
            if (st != GDTE_OK) gdte_proto_fail(req, st, 1);
        }
        return 1;
    case GDTE_REQ_ACTIVE: return req->proto->progress(req);
    case GDTE_REQ_DRAIN: return drain(req);
    default: return 0;
    }
}

static void check_liveness(struct gdte_comm *ctx);

static void check_timeouts(struct gdte_comm *ctx, double now)
{
    struct gdte_msg_req *r, *tmp;
    DL_FOREACH_SAFE(ctx->active, r, tmp)
    {
        if (!r->timed || now - r->t_last <= ctx->timeout) continue;
        gdte_error("req %llu (%s peer %d tag %llu): no progress for %.0f s: failing it and treating the peer as "
                   "failed",
                   (unsigned long long)r->id, r->is_send ? "send" : "recv", r->peer, (unsigned long long)r->tag,
                   now - r->t_last);
        ctx->stats.timeouts++;
        r->timed = 0;
        gdte_proto_fail(r, GDTE_ERR_TIMEOUT, 0);
        /* Operations queued to a peer that stopped answering would hold the buffers forever;
         * a forced close cancels them, and the peer cannot be trusted with more messages. */
        gdte_proto_peer_failed(ctx, r->peer, GDTE_ERR_PEER_FAILED);
    }
}

unsigned gdte_proto_progress(gdte_proto_ctx_h ctx)
{
    if (!ctx || ctx->in_progress) return 0;
    ctx->in_progress = 1;
    unsigned n = 0;
    for (int i = 0; i < 64; i++) {
        unsigned c = ucp_worker_progress(ctx->worker);
        n += c;
        if (!c) break;
    }
    struct gdte_msg_req *r, *tmp;
    unsigned adv = 0;
    DL_FOREACH_SAFE(ctx->active, r, tmp) adv += (unsigned)advance(r);
    n += adv;
    /* READY/DONE/CTS just queued go out now rather than on the caller's next call: on the
     * RDMA ring every fragment waits for one of them, so this is on its critical path. */
    if (adv) n += ucp_worker_progress(ctx->worker);
    for (int i = 0; i < ctx->size; i++) {
        gdte_peer_t *p = &ctx->peers[i];
        if (p->close_req && ucp_request_check_status(p->close_req) != UCS_INPROGRESS) {
            ucp_request_free(p->close_req);
            p->close_req = NULL;
        }
    }
    double now = gdte_time_now();
    if (now >= ctx->next_check) {
        check_timeouts(ctx, now);
        check_liveness(ctx);
        ctx->next_check = now + (ctx->timeout < 10 ? ctx->timeout / 10 : 1.0);
    }
    ctx->in_progress = 0;
    return n;
}

/* ---- create and destroy -------------------------------------------------------------------- */
static gdte_status_t set_handlers(struct gdte_comm *ctx)
{
    static const ucp_am_recv_callback_t cbs[GDTE_AM_COUNT_] = {
        [GDTE_AM_RTS] = gdte_proto_rts_handler,     [GDTE_AM_CTS] = gdte_proto_cts_handler,
        [GDTE_AM_FRAG] = gdte_proto_frag_handler,   [GDTE_AM_ACK] = gdte_proto_ack_handler,
        [GDTE_AM_READY] = gdte_proto_ready_handler, [GDTE_AM_DONE] = gdte_proto_done_handler,
        [GDTE_AM_FIN] = gdte_proto_fin_handler,
    };
    for (unsigned id = 0; id < GDTE_AM_COUNT_; id++) {
        ucp_am_handler_param_t hp = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                          UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
            .id = id,
            .flags = UCP_AM_FLAG_WHOLE_MSG,
            .cb = cbs[id],
            .arg = ctx,
        };
        ucs_status_t s = ucp_worker_set_am_recv_handler(ctx->worker, &hp);
        if (s != UCS_OK) {
            gdte_error("cannot set UCX active message handler %u: %s", id, ucs_status_string(s));
            return GDTE_ERR_TRANSPORT;
        }
    }
    return GDTE_OK;
}

/* Worker addresses differ in length: gather the lengths first (with each process's pid and
 * node identity, for the liveness check), then addresses padded to the longest. */
typedef struct boot_rec {
    uint64_t len, pid, node;
} boot_rec_t;

static gdte_status_t exchange_addresses(struct gdte_comm *ctx, const gdte_proto_ctx_params_t *prm,
                                        const void *mine, size_t len)
{
    gdte_status_t st = GDTE_ERR_NO_MEMORY;
    boot_rec_t my = {len, (uint64_t)getpid(), node_identity()};
    boot_rec_t *recs = calloc((size_t)ctx->size, sizeof *recs);
    char *all = NULL, *padded = NULL;
    if (!recs) goto out;
    void *garg = (prm->field_mask & GDTE_PROTO_CTX_FIELD_ALLGATHER_ARG) ? prm->allgather_arg : NULL;
    if (prm->allgather(&my, sizeof my, recs, garg) != 0) {
        st = GDTE_ERR_TRANSPORT;
        gdte_error("bootstrap: the allgather callback failed");
        goto out;
    }
    uint64_t max = 0;
    for (int i = 0; i < ctx->size; i++)
        if (recs[i].len > max) max = recs[i].len;
    if (recs[ctx->rank].len != len || max == 0 || max > (1u << 20)) {
        st = GDTE_ERR_INVALID_ARG;
        gdte_error("bootstrap: the allgather callback returned inconsistent data");
        goto out;
    }
    padded = calloc(1, max);
    all = calloc((size_t)ctx->size, max);
    if (!padded || !all) goto out;
    memcpy(padded, mine, len);
    if (prm->allgather(padded, max, all, garg) != 0) {
        st = GDTE_ERR_TRANSPORT;
        gdte_error("bootstrap: the allgather callback failed");
        goto out;
    }
    for (int i = 0; i < ctx->size; i++) {
        ctx->peers[i].addr = malloc(recs[i].len);
        if (!ctx->peers[i].addr) goto out;
        memcpy(ctx->peers[i].addr, all + (size_t)i * max, recs[i].len);
        ctx->peers[i].addr_len = recs[i].len;
        /* Same node: its pid can be checked for life (below). */
        ctx->peers[i].pid = recs[i].node == my.node ? (int64_t)recs[i].pid : 0;
    }
    st = GDTE_OK;
out:
    free(recs);
    free(all);
    free(padded);
    return st;
}

/* A process on this node that is gone: no such pid, or a zombie nobody reaped yet. */
static int pid_dead(int64_t pid)
{
    if (pid <= 0) return 0;
    if (kill((pid_t)pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); /* the state follows the command name */
    return rp && (rp[1] == ' ') && (rp[2] == 'Z' || rp[2] == 'X');
}

/* UCX's shared-memory transports do not report a peer that died (they cannot ask for error
 * handling), and a receive posted for such a peer is no "stalled" request: it would wait
 * forever. So peers on this node are checked by pid, each once per check, while this process
 * has requests outstanding. */
static void check_liveness(struct gdte_comm *ctx)
{
    if (!ctx->by_id) return;
    for (int i = 0; i < ctx->size; i++) {
        gdte_peer_t *p = &ctx->peers[i];
        if (i == ctx->rank || p->failed || p->pid <= 0 || !pid_dead(p->pid)) continue;
        gdte_error("peer %d (pid %lld on this node) is gone: failing its requests", i, (long long)p->pid);
        gdte_proto_peer_failed(ctx, i, GDTE_ERR_PEER_FAILED);
    }
}

gdte_status_t gdte_proto_ctx_create(const gdte_proto_ctx_params_t *prm, gdte_proto_ctx_h *ctx_p)
{
    const uint64_t need = GDTE_PROTO_CTX_FIELD_RANK | GDTE_PROTO_CTX_FIELD_SIZE | GDTE_PROTO_CTX_FIELD_ALLGATHER;
    if (!prm || !ctx_p || (prm->field_mask & need) != need || !prm->allgather || prm->size <= 0 ||
        prm->rank < 0 || prm->rank >= prm->size)
        return GDTE_ERR_INVALID_ARG;
    gdte_status_t st = gdte_knobs_load();
    if (st != GDTE_OK) return st;

    struct gdte_comm *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return GDTE_ERR_NO_MEMORY;
    ctx->rank = prm->rank;
    ctx->size = prm->size;
    ctx->next_id = 1;
    ctx->next_ring_id = 1;
    ctx->timeout = (double)gdte_knob(GDTE_KNOB_TIMEOUT);
    ctx->dev = -1;
    ctx->peer_errh = 1;
    ctx->peers = calloc((size_t)ctx->size, sizeof *ctx->peers);
    if (!ctx->peers) {
        free(ctx);
        return GDTE_ERR_NO_MEMORY;
    }
    for (int i = 0; i < ctx->size; i++) {
        ctx->peers[i].ctx = ctx;
        ctx->peers[i].rank = i;
    }

    ucp_config_t *config = NULL;
    ucs_status_t s = ucp_config_read(NULL, NULL, &config);
    if (s != UCS_OK) {
        gdte_error("ucp_config_read: %s", ucs_status_string(s));
        st = GDTE_ERR_TRANSPORT;
        goto err_free;
    }
    ucp_params_t up = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
        .features = UCP_FEATURE_AM,
        .name = "gdte",
    };
    s = ucp_init(&up, config, &ctx->ucp);
    ucp_config_release(config);
    if (s != UCS_OK) {
        gdte_error("ucp_init: %s", ucs_status_string(s));
        st = GDTE_ERR_TRANSPORT;
        goto err_free;
    }
    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(ctx->ucp, &ca) == UCS_OK)
        ctx->ucx_cuda = (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    s = ucp_worker_create(ctx->ucp, &wp, &ctx->worker);
    if (s != UCS_OK) {
        gdte_error("ucp_worker_create: %s", ucs_status_string(s));
        st = GDTE_ERR_TRANSPORT;
        goto err_ucp;
    }
    ucp_worker_attr_t wa = {.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER};
    s = ucp_worker_query(ctx->worker, &wa);
    if (s != UCS_OK) {
        gdte_error("ucp_worker_query: %s", ucs_status_string(s));
        st = GDTE_ERR_TRANSPORT;
        goto err_worker;
    }
    ctx->max_am_header = wa.max_am_header;
    if (ctx->max_am_header < sizeof(gdte_wire_rts_t)) {
        gdte_error("UCX allows %zu-byte active message headers; gdte needs %zu", ctx->max_am_header,
                   sizeof(gdte_wire_rts_t));
        ucp_worker_release_address(ctx->worker, wa.address);
        st = GDTE_ERR_TRANSPORT;
        goto err_worker;
    }
    st = exchange_addresses(ctx, prm, wa.address, wa.address_length);
    ucp_worker_release_address(ctx->worker, wa.address);
    if (st != GDTE_OK) goto err_worker;
    if ((st = set_handlers(ctx)) != GDTE_OK) goto err_worker;

    ctx->gpu = gdte_gpu_available();
    if (ctx->gpu) {
        ctx->dev = gdte_gpu_current_device();
        gdte_gpu_props_t props;
        if (gdte_gpu_get_props(ctx->dev, &props) == GDTE_OK)
            ctx->pci = ((uint32_t)props.pci_domain << 16) | ((uint32_t)props.pci_bus << 8) | (uint32_t)props.pci_device;
        if ((st = gdte_gpu_stream_create(&ctx->stream)) != GDTE_OK) goto err_worker;
        if ((st = gdte_gpu_stream_create(&ctx->rstream)) != GDTE_OK) goto err_worker;
        if ((st = gdte_gpu_host_alloc(&ctx->bounce, GDTE_PROTO_EAGER_MAX, 1)) != GDTE_OK) goto err_worker;
    }
    ctx->node = node_identity();
    if ((st = gdte_stg_init(&ctx->pool, gdte_knob(GDTE_KNOB_STAGING_MAX), gdte_rdma_capable(ctx))) != GDTE_OK)
        goto err_worker;
    ctx->next_check = gdte_time_now();
    gdte_info("protocols: rank %d of %d, UCX %s, device memory through UCX: %s, GPU %d", ctx->rank, ctx->size,
              ucp_get_version_string(), ctx->ucx_cuda ? "yes" : "no", ctx->dev);
    *ctx_p = ctx;
    return GDTE_OK;

err_worker:
    if (ctx->stream) gdte_gpu_stream_destroy(ctx->stream);
    if (ctx->rstream) gdte_gpu_stream_destroy(ctx->rstream);
    if (ctx->bounce) gdte_gpu_host_free(ctx->bounce);
    ucp_worker_destroy(ctx->worker);
err_ucp:
    ucp_cleanup(ctx->ucp);
err_free:
    for (int i = 0; i < ctx->size; i++) free(ctx->peers[i].addr);
    free(ctx->peers);
    free(ctx);
    return st;
}

gdte_status_t gdte_proto_ctx_destroy(gdte_proto_ctx_h ctx)
{
    if (!ctx) return GDTE_ERR_INVALID_ARG;
    struct gdte_msg_req *r, *tmp;
    /* Cancel what is in flight; a peer still alive learns it through a FIN. */
    HASH_ITER(hh, ctx->by_id, r, tmp) gdte_proto_fail(r, GDTE_ERR_CANCELED, 1);
    double limit = ctx->timeout < 5 ? ctx->timeout : 5;
    double t0 = gdte_time_now();
    while (ctx->active && gdte_time_now() - t0 < limit) gdte_proto_progress(ctx);
    /* Anything left is held by a peer that does not answer: cut it off. */
    for (int i = 0; i < ctx->size; i++)
        if (ctx->active) gdte_proto_peer_failed(ctx, i, GDTE_ERR_CANCELED);
    t0 = gdte_time_now();
    while (ctx->active && gdte_time_now() - t0 < limit) gdte_proto_progress(ctx);
    HASH_ITER(hh, ctx->by_id, r, tmp)
    {
        gdte_warn("req %llu: still held by the transport at destruction", (unsigned long long)r->id);
        r->outstanding = 0;
        drain(r);
    }
    for (int i = 0; i < ctx->size; i++) close_ep(&ctx->peers[i], ctx->peers[i].failed);
    t0 = gdte_time_now();
    for (;;) {
        int busy = 0;
        ucp_worker_progress(ctx->worker);
        for (int i = 0; i < ctx->size; i++) {
            gdte_peer_t *p = &ctx->peers[i];
            if (p->close_req && ucp_request_check_status(p->close_req) != UCS_INPROGRESS) {
                ucp_request_free(p->close_req);
                p->close_req = NULL;
            }
            busy |= p->close_req != NULL;
        }
        if (!busy) break;
        if (gdte_time_now() - t0 > limit) {
            for (int i = 0; i < ctx->size; i++)
                if (ctx->peers[i].close_req) {
                    ucp_request_cancel(ctx->worker, ctx->peers[i].close_req);
                    ucp_request_free(ctx->peers[i].close_req);
                    ctx->peers[i].close_req = NULL;
                }
            break;
        }
    }
    gdte_proto_rdma_cleanup(ctx);
    /* Requests the user still holds only need their context pointer cleared. */
    DL_FOREACH_SAFE(ctx->posted, r, tmp)
    {
        DL_DELETE(ctx->posted, r);
        r->on_list = 0;
    }
    gdte_unexp_t *u, *ut;
    DL_FOREACH_SAFE(ctx->unexpected, u, ut)
    {
        DL_DELETE(ctx->unexpected, u);
        free(u->payload);
        free(u);
    }
    for (int i = 0; i < ctx->size; i++) {
        DL_FOREACH_SAFE(ctx->peers[i].early, u, ut)
        {
            DL_DELETE(ctx->peers[i].early, u);
            free(u->payload);
            free(u);
        }
        free(ctx->peers[i].addr);
    }
    gdte_stg_destroy(&ctx->pool);
    for (int i = 0; i < ctx->n_ev_cache; i++) gdte_gpu_event_destroy(ctx->ev_cache[i]);
    free(ctx->ev_cache);
    if (ctx->stream) gdte_gpu_stream_destroy(ctx->stream);
    if (ctx->rstream) gdte_gpu_stream_destroy(ctx->rstream);
    if (ctx->bounce) gdte_gpu_host_free(ctx->bounce);
    ucp_worker_destroy(ctx->worker);
    ucp_cleanup(ctx->ucp);
    free(ctx->peers);
    free(ctx);
    return GDTE_OK;
}

gdte_status_t gdte_proto_ctx_query(gdte_proto_ctx_h ctx, gdte_proto_ctx_attr_t *attr)
{
    if (!ctx || !attr) return GDTE_ERR_INVALID_ARG;
    if (attr->field_mask & GDTE_PROTO_CTX_ATTR_FIELD_RANK) attr->rank = ctx->rank;
    if (attr->field_mask & GDTE_PROTO_CTX_ATTR_FIELD_SIZE) attr->size = ctx->size;
    if (attr->field_mask & GDTE_PROTO_CTX_ATTR_FIELD_UCX_DEVICE_MEM) attr->ucx_device_mem = ctx->ucx_cuda;
    if (attr->field_mask & GDTE_PROTO_CTX_ATTR_FIELD_STATS) {
        gdte_gpu_pool_stats_t ps;
        gdte_gpu_pool_get_stats(&ctx->pool, &ps);
        attr->stats = ctx->stats;
        attr->stats.staging_peak = ps.peak_held;
        attr->stats.staging_allocs = ps.allocs;
    }
    return GDTE_OK;
}
