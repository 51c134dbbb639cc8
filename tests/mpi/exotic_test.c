/*
 * Element types and shapes that outside programs use and the other tests do not: every pair
 * type (MPI_SHORT_INT, MPI_LONG_DOUBLE_INT, ...), long double and its complex (32-byte
 * elements), MPI_C_BOOL, MPI_WCHAR, MPI_AINT, MPI_COUNT, each alone and in a vector on one side
 * against a dense receive of one signature on the other (12 elements; 18000, past the eager
 * size, for MPI_SHORT_INT, MPI_LONG_DOUBLE_INT and the complex); an hvector of stride 0 and a
 * type of extent 0 (sends only: their elements overlap), a type of negative extent on either side and
 * both, a negative-stride hvector of a struct with holes; a receive longer than the message
 * (MPI_Get_elements on a partial struct); intercommunicator messages; MPI_Request_free of a
 * nonblocking send; MPI_Cancel of a send. Four call patterns (Irecv/Isend/Waitall, Sendrecv,
 * Isend + Request_free, Iprobe + Recv), every host/device pairing, on MPI_COMM_WORLD and
 * MPI_COMM_SELF. Oracle: MPI_Pack/MPI_Unpack of host copies; every byte of each allocation,
 * margins included, is compared.
 *
 * Found with it: a marker (the node path's 248 bytes) received into a host buffer whose type
 * it cuts inside a 32-byte element made Open MPI 4.1 abort (a partial-element unpack).
 */
#include "mpitest.h"
#define MARGIN 32
static int left, right;
static int big; /* the large cases: fewer patterns */

static void oracle(mt_ubuf_t *s, MPI_Datatype st, int sc, mt_ubuf_t *r, MPI_Datatype rt, int rc)
{
    int psize = 0, pos = 0;
    MPI_Pack_size(sc, st, MPI_COMM_WORLD, &psize);
    unsigned char *p = malloc(psize + 1);
    MPI_Pack(s->img + (s->buf - s->base), sc, st, p, psize, &pos, MPI_COMM_WORLD);
    int n = pos;
    pos = 0;
    if (n) MPI_Unpack(p, n, &pos, r->img + (r->buf - r->base), rc, rt, MPI_COMM_WORLD);
    free(p);
}

/* send sc of st to `dst` on comm, receive rc of rt from `src`; `how` selects the calls. */
static void xchg(const char *name, MPI_Datatype st, int sc, MPI_Datatype rt, int rc, MPI_Comm comm, int dst,
                 int src, int how, int sdev, int rdev, unsigned seed)
{
    char what[200];
    snprintf(what, sizeof what, "%s how %d s%s r%s", name, how, sdev ? "dev" : "host", rdev ? "dev" : "host");
    mt_ubuf_t s = mt_ubuf_new(sdev, st, sc, MARGIN, 0), r = mt_ubuf_new(rdev, rt, rc, MARGIN, 0);
    /* the sender's image as the receiver would see it: the peer seeds the same way */
    mt_ubuf_t l = mt_ubuf_new(0, st, sc, MARGIN, 0);
    mt_ubuf_set(&s, seed + mt_rank * 17, 0);
    int srank = src;
    if (comm != MPI_COMM_WORLD && comm != MPI_COMM_SELF) {
        int inter = 0;
        MPI_Comm_test_inter(comm, &inter);
        MPI_Group g, wg;
        if (inter) MPI_Comm_remote_group(comm, &g);
        else MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &wg);
        MPI_Group_translate_ranks(g, 1, &src, wg, &srank);
        MPI_Group_free(&g);
        MPI_Group_free(&wg);
    } else if (comm == MPI_COMM_SELF) srank = mt_rank;
    mt_ubuf_set(&l, seed + srank * 17, 0);
    mt_ubuf_set(&r, 0, 0xA5);
    oracle(&l, st, sc, &r, rt, rc);
    MPI_Request q[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status stt[2];
    int rcode = MPI_SUCCESS;
    switch (how) {
    case 0: /* Irecv, Isend, Waitall */
        MPI_Irecv(r.buf, rc, rt, src, 7, comm, &q[1]);
        MPI_Isend(s.buf, sc, st, dst, 7, comm, &q[0]);
        rcode = MPI_Waitall(2, q, stt);
        break;
    case 1: /* Sendrecv */
        rcode = MPI_Sendrecv(s.buf, sc, st, dst, 8, r.buf, rc, rt, src, 8, comm, &stt[1]);
        break;
    case 2: /* Isend then Request_free, Recv, barrier-ish sync */
        MPI_Isend(s.buf, sc, st, dst, 9, comm, &q[0]);
        MPI_Request_free(&q[0]);
        rcode = MPI_Recv(r.buf, rc, rt, src, 9, comm, &stt[1]);
        break;
    case 3: /* Iprobe loop, Get_count, Recv */
    {
        MPI_Isend(s.buf, sc, st, dst, 10, comm, &q[0]);
        int flag = 0;
        while (!flag) MPI_Iprobe(src, MPI_ANY_TAG, comm, &flag, &stt[1]);
        rcode = MPI_Recv(r.buf, rc, rt, stt[1].MPI_SOURCE, stt[1].MPI_TAG, comm, &stt[1]);
        MPI_Wait(&q[0], MPI_STATUS_IGNORE);
        break;
    }
    }
    MT_CHECK(rcode == MPI_SUCCESS, "%s: rc %d", what, rcode);
    mt_ubuf_check(&r, what);
    /* the send buffer is untouched */
    mt_ubuf_set(&l, seed + mt_rank * 17, 0);
    memcpy(s.img, l.img, s.len);
    mt_ubuf_check(&s, what);
    /* the status: the message's bytes, and as many basic elements of rt as the MPI counts in
     * those bytes (a status made by the MPI from the byte count is the reference) */
    int ssz = 0, bytes = -1, el = -1, want_el = -2;
    MPI_Type_size(st, &ssz);
    MPI_Get_count(&stt[1], MPI_BYTE, &bytes);
    MT_CHECK(bytes == ssz * sc, "%s: status says %d bytes, want %d", what, bytes, ssz * sc);
    MPI_Status ref;
    memset(&ref, 0, sizeof ref);
    MPI_Status_set_elements(&ref, MPI_BYTE, ssz * sc);
    MPI_Get_elements(&ref, rt, &want_el);
    MPI_Get_elements(&stt[1], rt, &el);
    MT_CHECK(el == want_el, "%s: MPI_Get_elements %d, want %d", what, el, want_el);
    if (how == 2 && comm != MPI_COMM_SELF) MPI_Barrier(MPI_COMM_WORLD);
    mt_ubuf_free(&s);
    mt_ubuf_free(&r);
    mt_ubuf_free(&l);
}

static void all_pairs(const char *name, MPI_Datatype st, int sc, MPI_Datatype rt, int rc, unsigned seed)
{
    for (int how = 0; how < 4; how++)
        for (int p = 0; p < 4; p++) {
            if (big && (how == 1 || how == 2)) continue;
            xchg(name, st, sc, rt, rc, MPI_COMM_WORLD, right, left, how, p & 1, p >> 1, seed + how * 4 + p);
            if (!big && how != 2 && how != 3) xchg(name, st, sc, rt, rc, MPI_COMM_SELF, 0, 0, how, p & 1, p >> 1, seed + 99 + p);
        }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    left = (mt_rank + mt_size - 1) % mt_size;
    right = (mt_rank + 1) % mt_size;
    MPI_Datatype pairs[] = {MPI_SHORT_INT, MPI_LONG_DOUBLE_INT, MPI_DOUBLE_INT, MPI_2INT, MPI_LONG_INT, MPI_FLOAT_INT,
                            MPI_LONG_DOUBLE, MPI_C_LONG_DOUBLE_COMPLEX, MPI_C_BOOL, MPI_WCHAR, MPI_AINT, MPI_COUNT};
    const char *pn[] = {"SHORT_INT", "LONG_DOUBLE_INT", "DOUBLE_INT", "2INT", "LONG_INT", "FLOAT_INT",
                        "LONG_DOUBLE", "C_LONG_DOUBLE_COMPLEX", "C_BOOL", "WCHAR", "AINT", "COUNT"};
    for (int i = 0; i < 12; i++) {
        all_pairs(pn[i], pairs[i], 7, pairs[i], 7, 100 + i);
        /* a vector of it */
        MPI_Datatype v;
        MPI_Type_vector(3, 2, 3, pairs[i], &v);
        MPI_Type_commit(&v);
        all_pairs(pn[i], v, 2, pairs[i], 12, 200 + i);
        all_pairs(pn[i], pairs[i], 12, v, 2, 300 + i);
        if (i == 0 || i == 1 || i == 7) {
            /* past the eager size: 3000 vectors (18000 elements), two call patterns */
            big = 1;
            all_pairs(pn[i], v, 3000, pairs[i], 18000, 400 + i);
            all_pairs(pn[i], pairs[i], 18000, v, 3000, 500 + i);
            big = 0;
        }
        MPI_Type_free(&v);
    }
    /* stride 0 hvector (send only) */
    MPI_Datatype z, ne, ze, nv, dense;
    MPI_Type_create_hvector(5, 3, 0, MPI_INT, &z);
    MPI_Type_commit(&z);
    MPI_Type_contiguous(15, MPI_INT, &dense);
    MPI_Type_commit(&dense);
    all_pairs("hvector stride 0", z, 2, dense, 2, 400);
    /* extent 0, count 4 (send only) */
    MPI_Type_create_resized(MPI_DOUBLE, 0, 0, &ze);
    MPI_Type_commit(&ze);
    all_pairs("extent 0", ze, 4, MPI_DOUBLE, 4, 500);
    /* negative extent -16 on a double: count 4 back to front */
    MPI_Type_create_resized(MPI_DOUBLE, 0, -16, &ne);
    MPI_Type_commit(&ne);
    all_pairs("extent -16", ne, 4, MPI_DOUBLE, 4, 600);
    all_pairs("extent -16 recv", MPI_DOUBLE, 4, ne, 4, 650);
    all_pairs("extent -16 both", ne, 3, ne, 3, 660);
    /* negative stride vector of a struct with holes, count 3 */
    {
        int bl[3] = {1, 2, 1};
        MPI_Aint d[3] = {0, 8, 40};
        MPI_Datatype ts[3] = {MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, s, hv;
        MPI_Type_create_struct(3, bl, d, ts, &s);
        MPI_Type_create_hvector(4, 2, -120, s, &hv);
        MPI_Type_commit(&hv);
        MPI_Type_contiguous(8, s, &nv);
        MPI_Type_commit(&nv);
        all_pairs("neg hvector of struct", hv, 3, nv, 3, 700);
        all_pairs("neg hvector of struct r", nv, 3, hv, 3, 750);
        MPI_Type_free(&s);
        MPI_Type_free(&hv);
    }
    /* a receive longer than the message: partial elements */
    {
        int bl[2] = {1, 3};
        MPI_Aint d[2] = {0, 4};
        MPI_Datatype ts[2] = {MPI_INT, MPI_DOUBLE}, s;
        MPI_Type_create_struct(2, bl, d, ts, &s);
        MPI_Type_commit(&s);
        for (int p = 0; p < 4; p++) {
            mt_ubuf_t sb = mt_ubuf_new(p & 1, MPI_BYTE, 28 * 3 + 12, MARGIN, 0), rb = mt_ubuf_new(p >> 1, s, 5, MARGIN, 0);
            mt_ubuf_set(&sb, 9, 0);
            mt_ubuf_set(&rb, 0, 0xA5);
            MPI_Status st;
            MPI_Request q;
            MPI_Irecv(rb.buf, 5, s, left, 3, MPI_COMM_WORLD, &q);
            MPI_Send(sb.buf, 28 * 3 + 12, MPI_BYTE, right, 3, MPI_COMM_WORLD);
            MPI_Wait(&q, &st);
            int el = -1, c = -1;
            MPI_Get_elements(&st, s, &el);
            MPI_Get_count(&st, s, &c);
            MT_CHECK(el == 3 * 4 + 2 && c == MPI_UNDEFINED, "partial struct p %d: elements %d count %d", p, el, c);
            mt_ubuf_free(&sb);
            mt_ubuf_free(&rb);
        }
        MPI_Type_free(&s);
    }
    /* intercommunicator p2p (np even) */
    if (mt_size % 2 == 0) {
        MPI_Comm half, inter;
        MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, mt_rank, &half);
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, mt_rank % 2 ? 0 : 1, 55, &inter);
        int lr;
        MPI_Comm_rank(half, &lr);
        MPI_Datatype v;
        MPI_Type_vector(4, 3, 5, MPI_FLOAT, &v);
        MPI_Type_commit(&v);
        for (int how = 0; how < 4; how++)
            for (int p = 0; p < 4; p++) xchg("intercomm", v, 3, v, 3, inter, lr, lr, how, p & 1, p >> 1, 800 + how * 4 + p);
        MPI_Type_free(&v);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    /* cancel of a device send that cannot match */
    for (int dev = 0; dev < 2; dev++) {
        int *b = mt_alloc(dev, 4096);
        MPI_Request q;
        MPI_Status st;
        MPI_Datatype v;
        MPI_Type_vector(100, 1, 2, MPI_INT, &v);
        MPI_Type_commit(&v);
        MPI_Isend(b, 1, v, right, 4242, MPI_COMM_WORLD, &q);
        MPI_Cancel(&q);
        int rc = MPI_Wait(&q, &st), canc = -1, pcanc = -1;
        MPI_Test_cancelled(&st, &canc);
        MT_CHECK(rc == MPI_SUCCESS, "cancel send dev %d: rc %d", dev, rc);
        MPI_Sendrecv(&canc, 1, MPI_INT, right, 4243, &pcanc, 1, MPI_INT, left, 4243, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (!pcanc) {
            int *r = mt_alloc(dev, 4096);
            MPI_Recv(r, 1, v, left, 4242, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            mt_free(dev, r);
        }
        int flag = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Iprobe(MPI_ANY_SOURCE, 4242, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        MT_CHECK(!flag, "cancel send dev %d: a cancelled send still arrives", dev);
        MPI_Type_free(&v);
        mt_free(dev, b);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Type_free(&z);
    MPI_Type_free(&ze);
    MPI_Type_free(&ne);
    MPI_Type_free(&nv);
    MPI_Type_free(&dense);
    return mt_finish("exotic_test");
}
