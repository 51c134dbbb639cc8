/*
 * RDMA within a node through GPU IPC (Wu 2017, 4.3.1), driven by the receiver (GET).
 *
 * Each sender exposes one device fragment ring per peer, made on the first RDMA offer to
 * that peer and exported once (its IPC handle rides in every RDMA-capable handshake, and the
 * receiver opens it only when it sees a ring id it has not opened: once per peer).
 *
 *   ring:  CTS (pack request, with credits) -> sender packs k into a free ring slot ->
 *          READY(k, slot) -> receiver copies the slot to local device memory and unpacks it
 *          (GDTE_RDMA_LOCAL_COPY=1 and two GPUs: DONE as soon as the copy is done, so the
 *          sender refills early) or unpacks straight from the peer's slot (=0, or one GPU:
 *          DONE after the unpack) -> DONE(slot) frees the ring slot and returns a credit.
 *   contiguous sender:   the receiver unpacks straight from the sender's user buffer, then
 *                        FIN; the sender only waits (no ring, no pack).
 *   contiguous receiver: the sender packs straight into the receiver's user buffer, then FIN.
 *
 *   pull (non-contiguous sender, GDTE_RDMA_PULL=1): the sender exports its buffer and sends its
 *                        layout (and, for an irregular layout, its device units) in the handshake;
 *                        the receiver packs fragments out of the sender's buffer into local
 *                        staging on one stream and unpacks them on another, the two ordered by
 *                        events, everything queued at once; then FIN. All the GPU work of the
 *                        message is the receiver's: no control message per fragment, and on one
 *                        GPU no switch between the two processes' contexts per fragment (which
 *                        is what bounds the ring there: each switch costs tens of microseconds).
 *
 * Same GPU or two GPUs: IPC mappings are opened with lazy peer access, so kernels and copies
 * reach the peer's memory over NVLink/PCIe where the devices allow it; whether they do is
 * checked once per peer GPU before RDMA is offered.
 */
#include <stdlib.h>
#include <string.h>
#include "kernels/devplan.h"
#include "kernels/kernels.h"
#include "proto_int.h"

#define RDMA_FRAG_MIN (256 << 10)

/* GDTE_RDMA_LOCAL_COPY matters across GPUs, where reading a peer's memory from the unpack
 * kernel can be slower than one bulk copy (remote reads in small pieces; not measured here).
 * On one GPU the ring already is local memory, and a copy would only add a third pass over
 * the bytes to pack and unpack. */
static int local_copy(const struct gdte_msg_req *req)
{
    if (!gdte_knob(GDTE_KNOB_RDMA_LOCAL_COPY)) return 0;
    return gdte_rdma_emulated() || req->rts.pci != req->ctx->pci;
}

/* ---- IPC mappings of a peer's memory --------------------------------------------------------- */
/* CUDA maps an allocation into a process at most once: a second cudaIpcOpenMemHandle of the
 * same allocation fails with cudaErrorAlreadyMapped, even through the handle of another buffer
 * inside it. So every mapping of a peer's memory (its ring, its user buffers) lives in one table
 * per peer, one entry per remote allocation (named by the handle of the allocation's base,
 * which is what gdte_rdma_export sends), reference counted and shared by every buffer of that
 * allocation. An entry is closed only when nothing uses it and its place is needed. */
static void ipc_unmap(struct gdte_comm *ctx, gdte_ipc_map_t *m)
{
    (void)ctx;
    if (!m->base) return;
    gdte_rdma_close(m->base);
    m->base = NULL;
    m->refs = 0;
    memset(&m->h, 0, sizeof m->h);
}

/* Close every unused mapping of the peer. A mapping kept after its allocation was freed by the
 * peer pins that memory, and a new allocation of the peer can come back with the same handle
 * bytes (the handle names the memory, not its lifetime) or overlap it in the driver's view:
 * dropping what is unused is the one remedy when an open is refused. */
static int ipc_flush_unused(struct gdte_comm *ctx, gdte_peer_t *p)
{
    int n = 0;
    for (int i = 0; i < GDTE_PROTO_IPC_CACHE; i++) {
        gdte_ipc_map_t *m = &p->ipc_cache[i];
        if (m->base && m->refs == 0) {
            ipc_unmap(ctx, m);
            n++;
        }
    }
    return n;
}

/* A reference to the mapping of the allocation named by `h` (opened now if needed).
 * GDTE_INPROGRESS: every entry is in use; an error: the runtime refused the mapping. */
static gdte_status_t ipc_acquire(struct gdte_comm *ctx, gdte_peer_t *p, const gdte_gpu_ipc_handle_t *h,
                                 gdte_ipc_map_t **map_p)
{
    gdte_ipc_map_t *victim = NULL;
    for (int i = 0; i < GDTE_PROTO_IPC_CACHE; i++) {
        gdte_ipc_map_t *m = &p->ipc_cache[i];
        if (m->base && !memcmp(&m->h, h, sizeof *h)) {
            m->last_use = ++ctx->ipc_clock;
            m->refs++;
            *map_p = m;
            return GDTE_OK;
        }
        if (m->refs == 0 && (!victim || !m->base || (victim->base && m->last_use < victim->last_use))) victim = m;
    }
    if (!victim) return GDTE_INPROGRESS; /* every mapping is in use: wait for one */
    ipc_unmap(ctx, victim);
    void *base;
    gdte_status_t st = gdte_rdma_open(h, &base);
    if (st != GDTE_OK && ipc_flush_unused(ctx, p) > 0) {
        gdte_info("peer %d: IPC open refused (%s); retrying after closing unused mappings", p->rank,
                  gdte_status_name(st));
        st = gdte_rdma_open(h, &base);
    }
    if (st != GDTE_OK) return st;
    ctx->stats.ipc_opens++;
    victim->h = *h;
    victim->base = base;
    victim->last_use = ++ctx->ipc_clock;
    victim->refs = 1;
    *map_p = victim;
    return GDTE_OK;
}

static void ipc_release(gdte_ipc_map_t *m)
{
    if (m && m->refs > 0) m->refs--;
}

static void ipc_ok(gdte_peer_t *p) { p->ipc_fail_count = 0; }

/* An IPC failure with this peer: the message at hand falls back; after a few in a row, RDMA with
 * the peer is given up (no more offers or acceptances). */
static void ipc_failed(gdte_peer_t *p, gdte_status_t why)
{
    if (++p->ipc_fail_count >= GDTE_PROTO_IPC_MAX_FAIL && !p->ipc_failed) {
        p->ipc_failed = 1;
        p->ring_failed = 1;
        gdte_warn("peer %d: GPU IPC failed %d times in a row (%s): copy-in/out from now on", p->rank,
                  p->ipc_fail_count, gdte_status_name(why));
    }
}

static gdte_status_t open_peer_ring(struct gdte_comm *ctx, gdte_peer_t *p, const gdte_wire_rts_t *rts)
{
    if (p->peer_ring_map && p->peer_ring_id == rts->ring_id) return GDTE_OK;
    /* A new ring of the peer (the old one is gone with its context): drop ours to the old. */
    ipc_release(p->peer_ring_map);
    p->peer_ring_map = NULL;
    gdte_status_t st = ipc_acquire(ctx, p, &rts->ring_h, &p->peer_ring_map);
    if (st != GDTE_OK) {
        p->peer_ring_map = NULL;
        return st;
    }
    ctx->stats.ring_opens++;
    p->peer_ring_id = rts->ring_id;
    return GDTE_OK;
}

void gdte_proto_rdma_cleanup(struct gdte_comm *ctx)
{
    for (int i = 0; i < 4; i++) {
        gdte_rdma_free(ctx, ctx->emu_units_free[i]);
        ctx->emu_units_free[i] = NULL;
    }
    for (int i = 0; i < ctx->size; i++) {
        gdte_peer_t *p = &ctx->peers[i];
        p->peer_ring_map = NULL;
        for (int j = 0; j < GDTE_PROTO_IPC_CACHE; j++) ipc_unmap(ctx, &p->ipc_cache[j]);
        if (p->ring) {
            gdte_rdma_free(ctx, p->ring->buf);
            free(p->ring);
            p->ring = NULL;
        }
    }
}

/* ---- sender: what is offered in the handshake ---------------------------------------------- */
static gdte_ring_t *make_ring(struct gdte_comm *ctx)
{
    /* The ring bounds the depth of every message to this peer (a message's own depth parameter
     * cannot go past it), so it has at least GDTE_PROTO_RING_SLOTS_MIN slots: with only the
     * default depth's 4, a message asking for depth 8 ran at depth 4. */
    int slots = (int)gdte_knob(GDTE_KNOB_PIPELINE_DEPTH);
    if (slots < GDTE_PROTO_RING_SLOTS_MIN) slots = GDTE_PROTO_RING_SLOTS_MIN;
    if (slots > GDTE_PROTO_MAX_DEPTH) slots = GDTE_PROTO_MAX_DEPTH;
    int64_t slot_bytes = gdte_knob(GDTE_KNOB_FRAG_SIZE);
    if (slot_bytes <= 0) slot_bytes = GDTE_PROTO_RING_SLOT_DEFAULT;
    /* Rings of later peers shrink to what is left of the share, down to 256 KiB slots. */
    int64_t left = gdte_gpu_pool_room(&ctx->pool, GDTE_STG_RING);
    int64_t need = (int64_t)1 << gdte_log2_ceil((int64_t)slots * slot_bytes);
    while (slot_bytes > (256 << 10) && need > left) {
        slot_bytes /= 2;
        need = (int64_t)1 << gdte_log2_ceil((int64_t)slots * slot_bytes);
    }
    if (need > left) return NULL;
    gdte_ring_t *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    int64_t off;
    if (gdte_rdma_alloc(ctx, GDTE_STG_RING, need, 1, &r->buf) != GDTE_OK) {
        free(r);
        return NULL;
    }
    if (gdte_rdma_export(r->buf->ptr, &r->handle, &off) != GDTE_OK || off != 0) {
        gdte_rdma_free(ctx, r->buf);
        free(r);
        return NULL;
    }
    r->slots = slots;
    r->slot_bytes = slot_bytes;
    r->id = ctx->next_ring_id++;
    ctx->stats.ring_allocs++;
    return r;
}

/* Sender: export the unit array of a UNITS layout for a pulling receiver. On a GPU the type's
 * cached device plan, pinned until the request completes; emulated, a shared copy. */
static int export_units(struct gdte_msg_req *req, gdte_wire_layout_t *w)
{
    const gdte_unit_t *hu;
    int64_t n;
    if (gdte_engine_units(req->type, &hu, &n) != GDTE_OK || n != req->L.nunits || n <= 0) return 0;
    const void *units;
    if (gdte_rdma_emulated()) {
        struct gdte_comm *ctx = req->ctx;
        int64_t need = (int64_t)1 << gdte_log2_ceil(n * (int64_t)sizeof *hu);
        for (int i = 0; i < 4 && !req->units_emu; i++)
            if (ctx->emu_units_free[i] && (int64_t)ctx->emu_units_free[i]->size >= need) {
                req->units_emu = ctx->emu_units_free[i];
                ctx->emu_units_free[i] = NULL;
            }
        if (!req->units_emu && gdte_rdma_alloc(ctx, GDTE_STG_SEND, need, 1, &req->units_emu) != GDTE_OK) {
            req->units_emu = NULL;
            return 0;
        }
        memcpy(req->units_emu->ptr, hu, (size_t)n * sizeof *hu);
        units = req->units_emu->ptr;
    } else {
        const gdte_unit_t *du;
        if (gdte_devplan_pin(req->type, &du) != GDTE_OK) return 0;
        req->units_pinned = 1;
        units = du;
    }
    if (gdte_rdma_export(units, &w->units_h, &w->units_off) != GDTE_OK) return 0;
    if (gdte_devplan_units_hash(req->type, &w->units_hash) != GDTE_OK) return 0;
    const int M = GDTE_WIRE_UNIT_MARKS;
    for (int j = 0; j < M; j++) {
        w->mark_byte[j] = req->L.rep_bytes / M * j + req->L.rep_bytes % M * j / M;
        w->mark_unit[j] = gdte_layout_find_unit(hu, n, w->mark_byte[j]);
    }
    w->mark_byte[M] = req->L.rep_bytes;
    w->mark_unit[M] = n;
    return 1;
}

/* What a UNITS export holds, released (the sender's request is over, or the offer was withdrawn). */
static void release_units(struct gdte_msg_req *req)
{
    if (req->units_pinned) gdte_devplan_unpin(req->type, req->ctx->dev);
    req->units_pinned = 0;
    for (int i = 0; i < 4 && req->units_emu; i++)
        if (!req->ctx->emu_units_free[i]) {
            req->ctx->emu_units_free[i] = req->units_emu;
            req->units_emu = NULL;
        }
    if (req->units_emu) gdte_rdma_free(req->ctx, req->units_emu);
    req->units_emu = NULL;
}

/* Sender: a non-contiguous device buffer with its layout, for a receiver that pulls. */
static void offer_layout(struct gdte_msg_req *req, gdte_wire_rts_t *rts)
{
    const gdte_layout_t *L = &req->L;
    if (!gdte_knob(GDTE_KNOB_RDMA_PULL) || req->contig || !gdte_rdma_exportable(req)) return;
    if ((L->kind != GDTE_LAYOUT_KIND_STRIDED && L->kind != GDTE_LAYOUT_KIND_UNITS) || L->ndims < 0 ||
        L->ndims > GDTE_MAX_DIMS)
        return;
    release_units(req); /* an earlier offer of this request */
    gdte_wire_layout_t *w = &rts->lay;
    memset(w, 0, sizeof *w);
    if (L->kind == GDTE_LAYOUT_KIND_UNITS && !export_units(req, w)) {
        release_units(req);
        return;
    }
    /* Exported per message, not cached: the handle names the allocation, and an application
     * that frees and reallocates at the same address gets a new one that a cache keyed by
     * address would not see. The receiver's side is cached (one mapping per allocation). */
    if (gdte_rdma_export((const char *)req->buf + L->disp, &rts->buf_h, &rts->buf_off) != GDTE_OK) {
        release_units(req);
        return;
    }
    w->kind = L->kind;
    w->ndims = L->ndims;
    w->blocklen = L->blocklen;
    w->total = L->total;
    for (int k = 0; k < L->ndims; k++) {
        w->count[k] = L->count[k];
        w->stride[k] = L->stride[k];
    }
    w->nunits = L->nunits;
    w->rep_bytes = L->rep_bytes;
    w->max_unit_len = L->max_unit_len;
    w->align = L->align;
    rts->flags |= GDTE_RTS_SRC_LAYOUT;
}

void gdte_proto_rdma_release(struct gdte_msg_req *req)
{
    release_units(req);
    ipc_release(req->units_ref);
    req->units_ref = NULL;
}

void gdte_proto_rdma_offer(struct gdte_msg_req *req, gdte_wire_rts_t *rts)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_peer_t *p = &ctx->peers[req->peer];
    /* A process cannot open its own IPC handles: messages to itself go by copy. */
    if (!gdte_rdma_capable(ctx) || !gdte_rdma_buffer_ok(req) || req->size == 0 || req->peer == ctx->rank ||
        p->ring_failed)
        return;
    if (req->contig && gdte_rdma_exportable(req) &&
        gdte_rdma_export((const char *)req->buf + req->L.disp, &rts->buf_h, &rts->buf_off) == GDTE_OK)
        rts->flags |= GDTE_RTS_BUF_HANDLE;
    offer_layout(req, rts);
    if (!p->ring) {
        p->ring = make_ring(ctx);
        if (!p->ring) {
            p->ring_failed = 1;
            gdte_info("peer %d: no RDMA fragment ring (device memory or IPC export failed)", req->peer);
        }
    }
    if (p->ring) {
        rts->flags |= GDTE_RTS_RING;
        rts->ring_id = p->ring->id;
        rts->ring_slots = p->ring->slots;
        rts->ring_slot_bytes = p->ring->slot_bytes;
        rts->ring_h = p->ring->handle;
    }
}

/* ---- receiver: can RDMA move this message? ---------------------------------------------------- */
static int peer_gpu_reachable(struct gdte_comm *ctx, gdte_peer_t *p, uint32_t pci)
{
    if (pci == ctx->pci || gdte_rdma_emulated()) return 1;
    if (p->reach && p->reach_pci == pci) return p->reach > 0;
    int ok = 0;
    int n = gdte_gpu_device_count();
    for (int d = 0; d < n; d++) {
        gdte_gpu_props_t pr;
        if (gdte_gpu_get_props(d, &pr) != GDTE_OK) continue;
        uint32_t id = ((uint32_t)pr.pci_domain << 16) | ((uint32_t)pr.pci_bus << 8) | (uint32_t)pr.pci_device;
        if (id != pci) continue;
        int can = 0;
        ok = gdte_gpu_can_access_peer(ctx->dev, d, &can) == GDTE_OK && can;
        if (ok) gdte_gpu_enable_peer(d);
        break;
    }
    p->reach_pci = pci;
    p->reach = ok ? 1 : -1;
    return ok;
}

static int rdma_usable(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    const gdte_wire_rts_t *rts = &req->rts;
    gdte_peer_t *p = &ctx->peers[req->peer];
    if (!gdte_rdma_capable(ctx) || !gdte_rdma_buffer_ok(req) || req->len == 0 || p->ipc_failed ||
        req->peer == ctx->rank)
        return 0;
    if (!(rts->flags & (GDTE_RTS_RING | GDTE_RTS_BUF_HANDLE | GDTE_RTS_SRC_LAYOUT))) return 0;
    if (rts->node != ctx->node) return 0;
    return peer_gpu_reachable(ctx, p, rts->pci);
}

static int64_t rdma_frag(const struct gdte_msg_req *req)
{
    int64_t f = req->want_frag;
    if (f <= 0) {
        f = (int64_t)1 << gdte_log2_ceil(req->len / 4 > 0 ? req->len / 4 : 1);
        if (f < RDMA_FRAG_MIN) f = RDMA_FRAG_MIN;
    }
    if (f > req->rts.ring_slot_bytes) f = req->rts.ring_slot_bytes;
    if (f > req->len) f = req->len;
    return f < 1 ? 1 : f;
}

/* This message cannot go by RDMA after all (the sender's memory could not be mapped here):
 * it goes by copy-in/out, which the CTS tells the sender; nothing was written yet. */
static gdte_status_t fall_back(struct gdte_msg_req *req, gdte_status_t why)
{
    gdte_peer_t *p = &req->ctx->peers[req->peer];
    gdte_warn("peer %d: GPU IPC failed (%s): this message goes by copyinout", req->peer, gdte_status_name(why));
    if (why != GDTE_ERR_UNSUPPORTED) ipc_failed(p, why);
    gdte_proto_slots_release(req);
    req->rdma_mode = 0;
    req->proto = &gdte_proto_copyinout_ops;
    return req->proto->recv_start(req);
}


/* Map the peer's allocation named by `h` into *ref unless it is mapped already. 0: the caller
 * returns *ret: GDTE_INPROGRESS (every mapping entry in use: retried later) or, when the runtime
 * refused, the status of this message's fall back to copy-in/out. */
static int map_peer(struct gdte_msg_req *req, const gdte_gpu_ipc_handle_t *h, gdte_ipc_map_t **ref, gdte_status_t *ret)
{
    if (*ref) return 1;
    gdte_status_t st = ipc_acquire(req->ctx, &req->ctx->peers[req->peer], h, ref);
    if (st == GDTE_OK) return 1;
    *ref = NULL;
    *ret = st == GDTE_INPROGRESS ? st : fall_back(req, st);
    return 0;
}

/* Local device staging for the receiver's fragment slots: as many slots as staging allows now
 * (at least one, else GDTE_INPROGRESS), the rest given up. */
static gdte_status_t take_local_slots(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    int got = 0;
    for (int i = 0; i < req->nslots; i++) {
        gdte_slot_t *s = &req->slots[i];
        if (!s->dev) {
            gdte_status_t st = gdte_rdma_alloc(ctx, GDTE_STG_RECV, req->frag, 0, &s->dev);
            if (st == GDTE_INPROGRESS) break;
            if (st != GDTE_OK) return st;
        }
        got++;
    }
    if (got == 0) return GDTE_INPROGRESS;
    for (int i = got; i < req->nslots; i++) gdte_stg_put(&ctx->pool, req->slots[i].dev), req->slots[i].dev = NULL;
    req->nslots = got;
    return GDTE_OK;
}

/* ---- receiver: pull ------------------------------------------------------------------------- */
#define PULL_FRAG_MIN (256 << 10)
#define PULL_FRAG_MAX (16 << 20)

/* The sender's layout is one this build can run, and describes exactly the message's bytes (a
 * kernel is about to walk the sender's memory with it). */
static int pull_usable(const struct gdte_msg_req *req)
{
    const gdte_wire_rts_t *rts = &req->rts;
    const gdte_wire_layout_t *w = &rts->lay;
    if (!(rts->flags & GDTE_RTS_SRC_LAYOUT) || !gdte_knob(GDTE_KNOB_RDMA_PULL)) return 0;
    if (w->ndims < 0 || w->ndims > GDTE_MAX_DIMS || w->total != rts->size || w->total <= 0) return 0;
    int64_t n = 1;
    for (int k = 0; k < w->ndims; k++) {
        if (w->count[k] <= 0 || n > INT64_MAX / w->count[k]) return 0;
        n *= w->count[k];
    }
    if (w->kind == GDTE_LAYOUT_KIND_STRIDED) return w->blocklen > 0 && n <= INT64_MAX / w->blocklen && n * w->blocklen == w->total;
    if (w->kind != GDTE_LAYOUT_KIND_UNITS) return 0;
    if (w->nunits <= 0 || w->rep_bytes <= 0 || n > INT64_MAX / w->rep_bytes || n * w->rep_bytes != w->total) return 0;
    for (int j = 0; j <= GDTE_WIRE_UNIT_MARKS; j++)
        if (w->mark_unit[j] < 0 || w->mark_unit[j] > w->nunits || (j && w->mark_unit[j] < w->mark_unit[j - 1]) ||
            (j && w->mark_byte[j] < w->mark_byte[j - 1]))
            return 0;
    return 1;
}

/* Thread blocks for a pack out of the peer's memory. From another GPU the pack is bound by the
 * link, which a block per SM saturates; a resident grid would hold every SM while it waits on
 * the link and keep the local unpack of the previous fragment from overlapping with it (2 x H200:
 * pack then unpack, 122 us for 32 MiB, whatever the depth). GDTE_MAX_BLOCKS, when set, rules. */
static int pull_pack_blocks(const struct gdte_msg_req *req)
{
    int mb = (int)gdte_knob(GDTE_KNOB_MAX_BLOCKS);
    if (mb > 0 || req->rts.pci == req->ctx->pci) return mb;
    gdte_gpu_props_t pr;
    return gdte_gpu_get_props(-1, &pr) == GDTE_OK && pr.sm_count > 0 ? pr.sm_count : 0;
}

/* Pack bytes [off, off+len) of the sender's stream from its mapped buffer into `dst`. */
static gdte_status_t pull_pack(struct gdte_msg_req *req, const gdte_layout_t *Ls, char *dst, int64_t off, int64_t len,
                               gdte_stream_t stream)
{
    if (gdte_rdma_emulated()) {
        gdte_host_exec(Ls, GDTE_DIR_PACK, req->peer_mem, dst, off, len);
        return GDTE_OK;
    }
    gdte_gpu_exec_opts_t o;
    memset(&o, 0, sizeof o);
    o.max_blocks = pull_pack_blocks(req);
    const gdte_wire_layout_t *w = &req->rts.lay;
    int64_t r0 = off / Ls->rep_bytes;
    if (Ls->kind == GDTE_LAYOUT_KIND_UNITS && (off + len - 1) / Ls->rep_bytes == r0) {
        /* Inside one repetition: only the units between the marks around the range. */
        int64_t q0 = off - r0 * Ls->rep_bytes, q1 = q0 + len - 1;
        int j0 = 0, j1 = GDTE_WIRE_UNIT_MARKS;
        while (j0 + 1 < GDTE_WIRE_UNIT_MARKS && w->mark_byte[j0 + 1] <= q0) j0++;
        for (int j = GDTE_WIRE_UNIT_MARKS; j > j0; j--)
            if (w->mark_byte[j] > q1) j1 = j;
        o.unit_lo = w->mark_unit[j0];
        o.unit_hi = w->mark_unit[j1] + 1 < Ls->nunits ? w->mark_unit[j1] + 1 : Ls->nunits;
    }
    return gdte_gpu_exec_ex(Ls, &o, GDTE_DIR_PACK, req->peer_mem, dst, off, len, stream);
}

/* Both layouts regular: one kernel reads the sender's memory through its layout and writes ours
 * through our layout, no staging (half the passes over the bytes of a pack and an unpack). */
static int pull_direct(const struct gdte_msg_req *req, const gdte_layout_t *Ls)
{
    if (req->pull_same) return 1;
    return Ls->kind == GDTE_LAYOUT_KIND_STRIDED &&
           (req->L.kind == GDTE_LAYOUT_KIND_STRIDED || req->L.kind == GDTE_LAYOUT_KIND_CONTIG);
}

/* The sender's irregular layout is ours: same shape, and units hashing alike. Then one kernel
 * moves each unit from the sender's buffer to ours with our own (local) unit array. */
static int pull_same_units(struct gdte_msg_req *req)
{
    const gdte_wire_layout_t *w = &req->rts.lay;
    const gdte_layout_t *L = &req->L;
    if (w->kind != GDTE_LAYOUT_KIND_UNITS || L->kind != GDTE_LAYOUT_KIND_UNITS || w->nunits != L->nunits ||
        w->rep_bytes != L->rep_bytes || w->ndims != L->ndims)
        return 0;
    for (int k = 0; k < L->ndims; k++)
        if (w->count[k] != L->count[k] || w->stride[k] != L->stride[k]) return 0;
    uint64_t h;
    return gdte_devplan_units_hash(req->type, &h) == GDTE_OK && h == w->units_hash;
}

static gdte_status_t pull_copy(struct gdte_msg_req *req, const gdte_layout_t *Ls, gdte_stream_t stream)
{
    const int mb = (int)gdte_knob(GDTE_KNOB_MAX_BLOCKS);
    if (!gdte_rdma_emulated() && req->pull_same) {
        const gdte_unit_t *du;
        gdte_status_t st = gdte_devplan_pin(req->type, &du);
        if (st != GDTE_OK) return st;
        req->units_pinned = 1;
        gdte_layout_t L = req->L;
        L.units = du;
        /* peer_mem is the sender's buf + disp, ours is buf + disp: the same layout from both. */
        return gdte_gpu_exec_copy_units(&L, (const char *)req->peer_mem - L.disp, req->buf, 0, req->len, stream, mb);
    }
    if (!gdte_rdma_emulated()) return gdte_gpu_exec_copy(Ls, req->peer_mem, &req->L, req->buf, 0, req->len, stream, mb);
    /* Emulated: the same bytes through a host buffer. */
    char *tmp = malloc((size_t)req->len);
    if (!tmp) return GDTE_ERR_NO_MEMORY;
    if (req->pull_same) /* the sender's units were not mapped: ours describe its buffer too */
        gdte_host_exec(&req->L, GDTE_DIR_PACK, (char *)req->peer_mem - req->L.disp, tmp, 0, req->len);
    else
        gdte_host_exec(Ls, GDTE_DIR_PACK, req->peer_mem, tmp, 0, req->len);
    gdte_host_exec(&req->L, GDTE_DIR_UNPACK, req->buf, tmp, 0, req->len);
    free(tmp);
    return GDTE_OK;
}

/* Queue the whole message: fragment k is packed from the sender's buffer into staging slot
 * k % nslots on the send stream and unpacked from it on the receive stream; the pack of k waits
 * for the unpack of k - nslots (same slot), the unpack of k for the pack of k. req->ev follows
 * the last unpack. A contiguous receiver takes the packed bytes straight into its buffer. */
static gdte_status_t pull_queue(struct gdte_msg_req *req, const gdte_layout_t *Ls)
{
    struct gdte_comm *ctx = req->ctx;
    const int gpu = gdte_rdma_gpu_work();
    gdte_stream_t sa = ctx->stream, sb = ctx->rstream;
    gdte_status_t st = GDTE_OK;
    if (req->contig) {
        st = pull_pack(req, Ls, (char *)req->buf + req->L.disp, 0, req->len, sb);
    } else if (pull_direct(req, Ls)) {
        st = pull_copy(req, Ls, sb);
    } else {
        for (int64_t k = 0; k < req->nfrags && st == GDTE_OK; k++) {
            gdte_slot_t *s = &req->slots[k % req->nslots];
            int64_t off = k * req->frag, len = req->len - off < req->frag ? req->len - off : req->frag;
            if (gpu) {
                if (!s->ev && (st = gdte_proto_event_get(ctx, &s->ev)) != GDTE_OK) break;
                if (!s->ev2 && (st = gdte_proto_event_get(ctx, &s->ev2)) != GDTE_OK) break;
                if (k >= req->nslots && (st = gdte_gpu_stream_wait_event(sa, s->ev2)) != GDTE_OK) break;
            }
            if ((st = pull_pack(req, Ls, s->dev->ptr, off, len, sa)) != GDTE_OK) break;
            if (gpu && ((st = gdte_gpu_event_record(s->ev, sa)) != GDTE_OK ||
                        (st = gdte_gpu_stream_wait_event(sb, s->ev)) != GDTE_OK))
                break;
            if ((st = gdte_proto_unpack_range(req, s->dev->ptr, off, len, gpu)) != GDTE_OK) break;
            if (gpu && (st = gdte_gpu_event_record(s->ev2, sb)) != GDTE_OK) break;
        }
    }
    if (st != GDTE_OK) {
        /* Whatever was queued runs to its end before the request lets go of its buffers. */
        if (gpu) {
            gdte_gpu_stream_synchronize(sa);
            gdte_gpu_stream_synchronize(sb);
        }
        return st;
    }
    if ((st = gdte_rdma_record(req, &req->ev)) != GDTE_OK) {
        if (gpu) gdte_gpu_stream_synchronize(sb);
        return st;
    }
    req->ev_pending = 1;
    req->outstanding++;
    return GDTE_OK;
}

/* The sender's layout, runnable here: byte 0 at the mapped buffer, units in the mapped plan. */
static void pull_layout(const gdte_wire_layout_t *w, const gdte_ipc_map_t *units_ref, gdte_layout_t *Ls)
{
    memset(Ls, 0, sizeof *Ls);
    Ls->kind = w->kind;
    Ls->ndims = w->ndims;
    Ls->disp = 0; /* peer_mem is the sender's buf + disp */
    Ls->blocklen = w->blocklen;
    Ls->total = w->total;
    for (int k = 0; k < w->ndims; k++) {
        Ls->count[k] = w->count[k];
        Ls->stride[k] = w->stride[k];
    }
    Ls->nunits = w->nunits;
    Ls->rep_bytes = w->kind == GDTE_LAYOUT_KIND_UNITS ? w->rep_bytes : w->total;
    Ls->max_unit_len = w->max_unit_len;
    Ls->align = w->align;
    if (w->kind == GDTE_LAYOUT_KIND_UNITS && units_ref)
        Ls->units = (const gdte_unit_t *)((char *)units_ref->base + w->units_off);
}

/* Receiver: take the message by pull. GDTE_INPROGRESS: no staging or mapping free yet. */
static gdte_status_t pull_start(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_peer_t *p = &ctx->peers[req->peer];
    const gdte_wire_rts_t *rts = &req->rts;
    const gdte_wire_layout_t *w = &rts->lay;
    gdte_status_t st;
    if (!map_peer(req, &rts->buf_h, &req->ipc_ref, &st)) return st;
    req->peer_mem = (char *)req->ipc_ref->base + rts->buf_off;
    req->pull_same = pull_same_units(req);
    if (w->kind == GDTE_LAYOUT_KIND_UNITS && !req->pull_same && !map_peer(req, &w->units_h, &req->units_ref, &st))
        return st;
    ipc_ok(p);
    gdte_layout_t Ls;
    pull_layout(w, req->units_ref, &Ls);
    const int staged = !req->contig && !pull_direct(req, &Ls);
    if (staged && !req->slots) {
        int64_t f = req->want_frag;
        if (f <= 0) {
            f = (int64_t)1 << gdte_log2_ceil(req->len / 4 > 0 ? req->len / 4 : 1);
            if (f < PULL_FRAG_MIN) f = PULL_FRAG_MIN;
            if (f > PULL_FRAG_MAX) f = PULL_FRAG_MAX;
        }
        /* A fragment the staging share can hold (several at once). */
        int64_t lim = gdte_stg_frag_limit(&ctx->pool, GDTE_STG_RECV);
        if (f > lim) f = lim;
        req->frag = f < req->len ? f : req->len;
        req->nfrags = (req->len + req->frag - 1) / req->frag;
        int depth = req->want_depth > 0 ? req->want_depth : 1;
        if (depth > req->nfrags) depth = (int)req->nfrags;
        if ((st = gdte_proto_slots_alloc(req, depth)) != GDTE_OK) return st;
    }
    if (staged && (st = take_local_slots(req)) != GDTE_OK) return st;
    req->rdma_mode = GDTE_CTS_SRC_DIRECT;
    ctx->stats.pulls++;
    ctx->stats.pulls_same += req->pull_same;
    ctx->stats.frags_recvd += staged ? req->nfrags : 1;
    gdte_debug("message %llu: pull of %lld bytes (%s sender layout, %s)", (unsigned long long)req->id,
               (long long)req->len, w->kind == GDTE_LAYOUT_KIND_UNITS ? "units" : "strided",
               req->contig ? "packed into our buffer" : staged ? "staged fragments" : req->pull_same ? "same units" : "layout to layout");
    st = pull_queue(req, &Ls);
    if (st != GDTE_OK) return st;
    return gdte_proto_send_cts(req, 0, GDTE_CTS_SRC_DIRECT, 0, NULL);
}

static gdte_status_t rdma_recv_start(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_peer_t *p = &ctx->peers[req->peer];
    const gdte_wire_rts_t *rts = &req->rts;
    gdte_status_t st;

    if (rts->flags & GDTE_RTS_BUF_HANDLE) {
        /* Contiguous sender: read its buffer directly, one operation for the whole message. */
        if (!req->ipc_ref) {
            if (!map_peer(req, &rts->buf_h, &req->ipc_ref, &st)) return st;
            ipc_ok(p);
            req->peer_mem = (char *)req->ipc_ref->base + rts->buf_off;
        }
        req->rdma_mode = GDTE_CTS_SRC_DIRECT;
        if (req->contig)
            st = gdte_rdma_copy(req, (char *)req->buf + req->L.disp, req->peer_mem, req->len);
        else
            st = gdte_proto_unpack_range(req, req->peer_mem, 0, req->len, gdte_rdma_gpu_work());
        if (st == GDTE_OK) st = gdte_rdma_record(req, &req->ev);
        if (st != GDTE_OK) return st;
        req->ev_pending = 1;
        req->outstanding++;
        return gdte_proto_send_cts(req, 0, GDTE_CTS_SRC_DIRECT, 0, NULL);
    }
    if (req->contig && gdte_rdma_exportable(req)) {
        /* Contiguous receiver: the sender packs straight into our buffer and says when (or
         * that it could not map it: GDTE_FIN_REDO, then the message goes by copy-in/out). */
        gdte_gpu_ipc_handle_t h;
        int64_t off;
        if (gdte_rdma_export((char *)req->buf + req->L.disp, &h, &off) == GDTE_OK) {
            req->rdma_mode = GDTE_CTS_DST_HANDLE;
            req->fin_wait = 1;
            return gdte_proto_send_cts(req, 0, GDTE_CTS_DST_HANDLE, off, &h);
        }
    }
    if (pull_usable(req)) return pull_start(req);
    if (!(rts->flags & GDTE_RTS_RING)) return fall_back(req, GDTE_ERR_UNSUPPORTED);
    st = open_peer_ring(ctx, p, rts);
    if (st == GDTE_INPROGRESS) return st;
    if (st != GDTE_OK) return fall_back(req, st);
    ipc_ok(p);
    req->rdma_mode = 0;
    if (!req->slots) {
        req->frag = rdma_frag(req);
        req->nfrags = (req->len + req->frag - 1) / req->frag;
        int depth = req->want_depth;
        if (depth > rts->ring_slots) depth = rts->ring_slots;
        if (depth > req->nfrags) depth = (int)req->nfrags;
        if ((st = gdte_proto_slots_alloc(req, depth)) != GDTE_OK) return st;
    }
    int got = req->nslots;
    if (local_copy(req)) {
        if ((st = take_local_slots(req)) != GDTE_OK) return st;
        got = req->nslots;
    }
    req->credits = got;
    return gdte_proto_send_cts(req, got, 0, 0, NULL);
}

/* Receiver, contiguous-receiver shortcut: the sender could not map our buffer and asks for the
 * message again by copy-in/out. */
void gdte_proto_rdma_redo(struct gdte_msg_req *req)
{
    if (req->is_send || req->state != GDTE_REQ_ACTIVE || req->proto != &gdte_proto_rdma_ops ||
        req->rdma_mode != GDTE_CTS_DST_HANDLE || !req->fin_wait)
        return;
    req->fin_wait = 0;
    req->rdma_mode = 0;
    req->proto = &gdte_proto_copyinout_ops;
    req->state = GDTE_REQ_WAIT_RES; /* the progress loop starts copy-in/out and sends its CTS */
    gdte_proto_touch(req);
}

/* Sender: our side of GDTE_FIN_REDO. Back to waiting for a CTS, which will be copy-in/out. */
static gdte_status_t redo_by_copy(struct gdte_msg_req *req)
{
    gdte_wire_fin_t fin = {.src = req->ctx->rank, .status = GDTE_FIN_REDO, .req = req->peer_req, .sreq = req->id};
    gdte_status_t st = gdte_proto_ctrl_send(req->ctx, req->peer, GDTE_AM_FIN, &fin, sizeof fin);
    if (st != GDTE_OK) return st;
    req->rdma_mode = 0;
    req->proto = NULL;
    req->cts_arrived = 0;
    req->state = GDTE_REQ_WAIT_CTS;
    gdte_proto_touch(req);
    return GDTE_OK;
}

ucs_status_t gdte_proto_ready_handler(void *arg, const void *header, size_t header_length, void *data,
                                      size_t length, const ucp_am_recv_param_t *param)
{
    struct gdte_comm *ctx = arg;
    (void)data;
    (void)length;
    (void)param;
    gdte_wire_ready_t h_copy;
    if (!gdte_proto_header(&h_copy, sizeof h_copy, header, header_length)) return UCS_OK;
    const gdte_wire_ready_t *h = &h_copy;
    struct gdte_msg_req *req = gdte_proto_req_lookup(ctx, h->req);
    if (!req || req->is_send || req->proto != &gdte_proto_rdma_ops || req->state != GDTE_REQ_ACTIVE ||
        req->peer != h->src)
        return UCS_OK;
    if (h->k < 0 || h->k >= req->nfrags || h->ring_id != ctx->peers[req->peer].peer_ring_id || h->slot < 0 ||
        h->slot >= req->rts.ring_slots || req->nrdy >= GDTE_PROTO_MAX_DEPTH) {
        gdte_error("message %llu: unexpected RDMA fragment %lld", (unsigned long long)req->id, (long long)h->k);
        gdte_proto_fail(req, GDTE_ERR_INTERNAL, 1);
        return UCS_OK;
    }
    /* Queued in arrival order; recv_progress gives it a local slot as soon as one is free. */
    req->rdy_k[req->nrdy] = h->k;
    req->rdy_slot[req->nrdy] = h->slot;
    req->nrdy++;
    req->outstanding++;
    gdte_proto_touch(req);
    return UCS_OK;
}

static gdte_status_t send_done(struct gdte_msg_req *req, int ring_slot)
{
    gdte_wire_ready_t d = {.src = req->ctx->rank, .slot = ring_slot, .req = req->peer_req,
                           .ring_id = req->ctx->peers[req->peer].peer_ring_id};
    return gdte_proto_ctrl_send(req->ctx, req->peer, GDTE_AM_DONE, &d, sizeof d);
}

/* A one-sided transfer (pull, the contiguous shortcuts) whose GPU work is queued: once it is done,
 * tell the peer (its buffer is free, or ours is filled) and finish. */
static int one_sided_progress(struct gdte_msg_req *req)
{
    gdte_status_t q = gdte_rdma_query(&req->ev);
    if (q == GDTE_INPROGRESS) return 0;
    req->ev_pending = 0;
    req->outstanding--;
    if (q != GDTE_OK) {
        gdte_proto_fail(req, q, 1);
        return 1;
    }
    if (req->state != GDTE_REQ_ACTIVE) return 1;
    gdte_wire_fin_t fin = {.src = req->ctx->rank, .status = GDTE_OK, .req = req->peer_req, .bytes = req->len};
    gdte_status_t st = gdte_proto_ctrl_send(req->ctx, req->peer, GDTE_AM_FIN, &fin, sizeof fin);
    if (st != GDTE_OK) {
        gdte_proto_fail(req, st, 0);
        return 1;
    }
    if (!req->is_send) req->info.bytes = req->len;
    gdte_proto_finish(req);
    return 1;
}

static int recv_progress(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_status_t st = GDTE_OK;
    int n = 0;
    if (req->ev_pending) return one_sided_progress(req);
    gdte_peer_t *p = &ctx->peers[req->peer];
    int active = req->state == GDTE_REQ_ACTIVE;
    /* Announced fragments into free local slots, oldest first. Aborted: hand the ring slots
     * back unread, or the sender's ring shrinks for good. */
    int taken = 0;
    while (taken < req->nrdy) {
        gdte_slot_t *s = active ? gdte_proto_slot_free(req) : NULL;
        if (active && !s) break;
        if (s) {
            s->k = req->rdy_k[taken];
            s->off = s->k * req->frag;
            s->len = req->len - s->off < req->frag ? req->len - s->off : req->frag;
            s->ring_slot = req->rdy_slot[taken];
            s->state = GDTE_SLOT_ARRIVED;
        } else if (!p->failed) {
            send_done(req, req->rdy_slot[taken]);
        }
        req->outstanding--;
        taken++;
        n++;
    }
    if (taken) {
        memmove(req->rdy_k, req->rdy_k + taken, (size_t)(req->nrdy - taken) * sizeof req->rdy_k[0]);
        memmove(req->rdy_slot, req->rdy_slot + taken, (size_t)(req->nrdy - taken) * sizeof req->rdy_slot[0]);
        req->nrdy -= taken;
    }
    for (int i = 0; i < req->nslots && st == GDTE_OK; i++) {
        gdte_slot_t *s = &req->slots[i];
        if (s->state == GDTE_SLOT_ARRIVED) {
            if (!active) {
                /* Aborted: hand the slot back unread, or the sender's ring shrinks for good. */
                if (!p->failed) send_done(req, s->ring_slot);
                s->ring_slot = -1;
                s->state = GDTE_SLOT_FREE;
                continue;
            }
            const char *src = (const char *)p->peer_ring_map->base + (int64_t)s->ring_slot * req->rts.ring_slot_bytes;
            if (s->dev) {
                st = gdte_rdma_copy(req, s->dev->ptr, src, s->len);
                if (st == GDTE_OK) st = gdte_rdma_record(req, &s->ev2);
                if (st == GDTE_OK) {
                    s->ev2_pending = 1;
                    req->outstanding++;
                    st = gdte_proto_unpack_range(req, s->dev->ptr, s->off, s->len, gdte_rdma_gpu_work());
                }
            } else {
                st = gdte_proto_unpack_range(req, src, s->off, s->len, gdte_rdma_gpu_work());
            }
            if (st == GDTE_OK) st = gdte_rdma_record(req, &s->ev);
            if (st != GDTE_OK) {
                /* Whatever was queued before the failure still runs: wait for it to drain. */
                s->state = GDTE_SLOT_UNPACKING;
                if (gdte_rdma_record(req, &s->ev) == GDTE_OK) req->outstanding++;
                else s->state = GDTE_SLOT_FREE;
                break;
            }
            req->outstanding++;
            s->state = GDTE_SLOT_UNPACKING;
            n++;
        }
        if (s->state != GDTE_SLOT_UNPACKING) continue;
        if (s->ev2_pending) {
            gdte_status_t q = gdte_rdma_query(&s->ev2);
            if (q == GDTE_INPROGRESS) continue;
            s->ev2_pending = 0;
            req->outstanding--;
            n++;
            if (q != GDTE_OK) {
                st = q;
                break;
            }
            /* The slot's bytes are local now: the sender may refill it while we unpack. */
            if (s->ring_slot >= 0 && !p->failed) {
                gdte_status_t d = send_done(req, s->ring_slot);
                if (active && d != GDTE_OK) st = d;
            }
            s->ring_slot = -1;
            if (st != GDTE_OK) break;
        }
        gdte_status_t q = gdte_rdma_query(&s->ev);
        if (q == GDTE_INPROGRESS) continue;
        req->outstanding--;
        s->state = GDTE_SLOT_FREE;
        n++;
        if (s->ring_slot >= 0 && !p->failed) {
            gdte_status_t d = send_done(req, s->ring_slot);
            if (active && d != GDTE_OK && q == GDTE_OK) q = d;
        }
        s->ring_slot = -1;
        if (q != GDTE_OK) {
            st = q;
            break;
        }
        if (!active) continue;
        req->frags_done++;
        ctx->stats.frags_recvd++;
        gdte_proto_touch(req);
        if (req->frags_done == req->nfrags) {
            req->info.bytes = req->len;
            gdte_proto_finish(req);
        }
    }
    if (st != GDTE_OK) gdte_proto_fail(req, st, 1);
    return n;
}

/* ---- sender ---------------------------------------------------------------------------------- */
/* Sender, contiguous-receiver shortcut: pack straight into the receiver's mapped buffer.
 * GDTE_INPROGRESS: no mapping entry free now. */
static gdte_status_t dst_handle_start(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_peer_t *p = &ctx->peers[req->peer];
    gdte_gpu_ipc_handle_t h = req->cts.buf_h;
    gdte_status_t st = ipc_acquire(ctx, p, &h, &req->ipc_ref);
    if (st == GDTE_INPROGRESS) {
        req->ipc_ref = NULL;
        return st;
    }
    if (st != GDTE_OK) {
        /* Nothing was written: the receiver takes the message again by copy-in/out. */
        req->ipc_ref = NULL;
        gdte_warn("peer %d: cannot map its receive buffer over GPU IPC (%s): this message goes by copyinout",
                  req->peer, gdte_status_name(st));
        ipc_failed(p, st);
        return redo_by_copy(req);
    }
    ipc_ok(p);
    req->peer_mem = (char *)req->ipc_ref->base + req->cts.buf_off;
    st = gdte_proto_pack_range(req, req->peer_mem, 0, req->len, gdte_rdma_gpu_work());
    if (st == GDTE_OK) st = gdte_rdma_record(req, &req->ev);
    if (st != GDTE_OK) return st;
    req->ev_pending = 1;
    req->outstanding++;
    return GDTE_OK;
}

static gdte_status_t rdma_send_start(struct gdte_msg_req *req, const gdte_wire_cts_t *cts)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_peer_t *p = &ctx->peers[req->peer];
    gdte_status_t st;
    req->rdma_mode = (int)(cts->flags & (GDTE_CTS_SRC_DIRECT | GDTE_CTS_DST_HANDLE));
    if (req->len == 0) {
        gdte_proto_finish(req);
        return GDTE_OK;
    }
    if (req->rdma_mode == GDTE_CTS_SRC_DIRECT) {
        /* The receiver reads our buffer, then says so. */
        if (req->fin_early) gdte_proto_finish(req);
        else req->fin_wait = 1;
        return GDTE_OK;
    }
    if (req->rdma_mode == GDTE_CTS_DST_HANDLE) {
        st = dst_handle_start(req);
        if (st == GDTE_INPROGRESS) {
            /* Every mapping of the peer's memory is in use by messages under way: retried from
             * progress as soon as one is free (each of them ends without needing another). */
            req->dst_retry = 1;
            return GDTE_OK;
        }
        return st;
    }
    if (!p->ring) return GDTE_ERR_INTERNAL;
    return gdte_proto_send_frags(req, cts, p->ring->slot_bytes);
}

ucs_status_t gdte_proto_done_handler(void *arg, const void *header, size_t header_length, void *data,
                                     size_t length, const ucp_am_recv_param_t *param)
{
    struct gdte_comm *ctx = arg;
    (void)data;
    (void)length;
    (void)param;
    gdte_wire_ready_t h_copy;
    if (!gdte_proto_header(&h_copy, sizeof h_copy, header, header_length)) return UCS_OK;
    const gdte_wire_ready_t *h = &h_copy;
    if (h->src < 0 || h->src >= ctx->size) return UCS_OK;
    gdte_ring_t *ring = ctx->peers[h->src].ring;
    /* The ring slot comes back whether or not its message is still here. */
    if (ring && ring->id == h->ring_id && h->slot >= 0 && h->slot < ring->slots && ring->busy[h->slot]) {
        ring->busy[h->slot] = 0;
        ring->nbusy--;
    }
    struct gdte_msg_req *req = gdte_proto_req_lookup(ctx, h->req);
    if (req && req->is_send && req->proto == &gdte_proto_rdma_ops && req->peer == h->src) {
        req->credits++;
        gdte_proto_touch(req);
    }
    return UCS_OK;
}

void gdte_proto_rdma_fin(struct gdte_msg_req *req, const gdte_wire_fin_t *fin)
{
    if (req->is_send && req->state == GDTE_REQ_WAIT_CTS && req->cts_arrived) {
        /* The receiver read our buffer before we even looked at its CTS. */
        req->fin_early = 1;
        return;
    }
    if (!req->fin_wait || req->state != GDTE_REQ_ACTIVE) return;
    req->fin_wait = 0;
    if (!req->is_send) req->info.bytes = fin->bytes;
    gdte_proto_finish(req);
}

static int send_progress(struct gdte_msg_req *req)
{
    struct gdte_comm *ctx = req->ctx;
    gdte_ring_t *ring = ctx->peers[req->peer].ring;
    gdte_status_t st = GDTE_OK;
    int n = 0;
    if (req->dst_retry) {
        if (req->state != GDTE_REQ_ACTIVE) {
            req->dst_retry = 0;
            return 0;
        }
        st = dst_handle_start(req);
        if (st == GDTE_INPROGRESS) return 0;
        req->dst_retry = 0;
        if (st != GDTE_OK) gdte_proto_fail(req, st, 1);
        return 1;
    }
    if (req->ev_pending) return one_sided_progress(req);
    for (int i = 0; i < req->nslots && st == GDTE_OK; i++) {
        gdte_slot_t *s = &req->slots[i];
        if (s->state != GDTE_SLOT_PACKING) continue;
        gdte_status_t q = gdte_rdma_query(&s->ev);
        if (q == GDTE_INPROGRESS) continue;
        req->outstanding--;
        s->state = GDTE_SLOT_FREE;
        n++;
        if (q != GDTE_OK || req->state != GDTE_REQ_ACTIVE) {
            /* Never announced: the ring slot is still ours. */
            ring->busy[s->ring_slot] = 0;
            ring->nbusy--;
            s->ring_slot = -1;
            if (q != GDTE_OK) st = q;
            continue;
        }
        gdte_wire_ready_t rd = {.src = ctx->rank, .slot = s->ring_slot, .req = req->peer_req, .k = s->k,
                                .ring_id = ring->id};
        st = gdte_proto_ctrl_send(ctx, req->peer, GDTE_AM_READY, &rd, sizeof rd);
        s->ring_slot = -1;
        ctx->stats.frags_sent++;
    }
    if (req->state != GDTE_REQ_ACTIVE || req->rdma_mode) {
        if (st != GDTE_OK) gdte_proto_fail(req, st, 1);
        return n;
    }
    while (st == GDTE_OK && req->next_k < req->nfrags && req->credits > 0 && ring->nbusy < ring->slots) {
        gdte_slot_t *s = gdte_proto_slot_free(req);
        if (!s) break;
        int rs = 0;
        while (ring->busy[rs]) rs++;
        s->k = req->next_k;
        s->off = s->k * req->frag;
        s->len = req->len - s->off < req->frag ? req->len - s->off : req->frag;
        st = gdte_proto_pack_range(req, (char *)ring->buf->ptr + (int64_t)rs * ring->slot_bytes, s->off, s->len,
                                   gdte_rdma_gpu_work());
        if (st == GDTE_OK) st = gdte_rdma_record(req, &s->ev);
        if (st != GDTE_OK) {
            /* Something may have been queued: let it finish before the slot is reused. */
            if (gdte_rdma_record(req, &s->ev) == GDTE_OK) {
                ring->busy[rs] = 1;
                ring->nbusy++;
                s->ring_slot = rs;
                s->state = GDTE_SLOT_PACKING;
                req->outstanding++;
            }
            break;
        }
        ring->busy[rs] = 1;
        ring->nbusy++;
        s->ring_slot = rs;
        s->state = GDTE_SLOT_PACKING;
        req->outstanding++;
        req->next_k++;
        req->credits--;
        n++;
    }
    if (st != GDTE_OK) {
        gdte_proto_fail(req, st, 1);
        return n;
    }
    if (req->next_k == req->nfrags) {
        int busy = 0;
        for (int i = 0; i < req->nslots; i++) busy |= req->slots[i].state != GDTE_SLOT_FREE;
        /* Our buffer is fully packed; the ring slots come back through DONE on their own. */
        if (!busy) gdte_proto_finish(req);
    }
    return n;
}

static int rdma_progress(struct gdte_msg_req *req) { return req->is_send ? send_progress(req) : recv_progress(req); }

const gdte_proto_ops_t gdte_proto_rdma_ops = {
    .name = "rdma",
    .id = GDTE_PROTOCOL_RDMA,
    .usable = rdma_usable,
    .recv_start = rdma_recv_start,
    .send_start = rdma_send_start,
    .progress = rdma_progress,
};
