/*
 * Bad input to the engine's public calls: NULL, freed and foreign handles, negative counts
 * and blocklengths, sizes and extents that overflow 63 bits, offsets past the packed
 * stream, max_bytes 0, NULL buffers, uncommitted types, malformed constructor arguments.
 * Each call must return the status gdte.h documents, write no buffer (all poisoned and
 * compared afterwards) and no output parameter, and the library must keep working.
 */
#include "testutil.h"

#define INT gdte_type_predefined(GDTE_BASIC_INT32)
#define DBL gdte_type_predefined(GDTE_BASIC_DOUBLE)

static unsigned char in[512], out[512], in0[512], out0[512];
static gdte_type_h good; /* a committed vector(4, 2, 3, int): 32 bytes of data */

static void poison(void)
{
    for (int i = 0; i < 512; i++) {
        in[i] = (unsigned char)(i * 13 + 1);
        out[i] = 0xAB;
    }
    memcpy(in0, in, sizeof in);
    memcpy(out0, out, sizeof out);
}

static int untouched(void) { return !memcmp(in, in0, sizeof in) && !memcmp(out, out0, sizeof out); }

/* A call that must fail with `expected`, leave both buffers and the output sentinel alone. */
#define BAD(call, expected, sentinel_var, sentinel)                                                  \
    do {                                                                                            \
        poison();                                                                                   \
        sentinel_var = sentinel;                                                                    \
        CHECK_ST(call, expected);                                                                   \
        CHECK(untouched());                                                                         \
        CHECK(sentinel_var == sentinel);                                                            \
    } while (0)

static int64_t done;
static gdte_type_h th;
#define SENT_DONE ((int64_t)-777)
#define SENT_TYPE ((gdte_type_h)(uintptr_t)0xdeadbeef)

/* The library still works: a valid pack gives the right 32 bytes. */
static void still_works(int line)
{
    poison();
    int64_t d = -1;
    gdte_status_t st = gdte_pack(in, 1, good, out, sizeof out, NULL, &d);
    int ok = st == GDTE_OK && d == 32;
    static const int offs[8] = {0, 4, 12, 16, 24, 28, 36, 40};
    for (int i = 0; ok && i < 8; i++) ok = !memcmp(out + 4 * i, in + offs[i], 4);
    tu_checks++;
    if (!ok) {
        fprintf(stderr, "line %d: the library stopped working after bad input\n", line);
        tu_failures++;
    }
}

static void test_handles(void)
{
    gdte_pack_params_t p = {0};
    /* NULL */
    BAD(gdte_pack(in, 1, NULL, out, sizeof out, &p, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_unpack(in, 8, out, 1, NULL, &p, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_type_commit(NULL), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_type_create_contiguous(2, NULL, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);
    BAD(gdte_type_create_vector(2, 1, 2, NULL, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);
    BAD(gdte_type_create_resized(NULL, 0, 4, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);
    BAD(gdte_type_dup(NULL, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);
    BAD(gdte_type_pack_size(1, NULL, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_type_signature(1, NULL, NULL, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    gdte_type_info_t info;
    CHECK_ST(gdte_type_get_info(NULL, &info), GDTE_ERR_INVALID_TYPE);
    char text[16];
    CHECK_ST(gdte_type_describe(NULL, text, sizeof text), GDTE_ERR_INVALID_TYPE);
    th = NULL;
    CHECK_ST(gdte_type_free(&th), GDTE_ERR_INVALID_TYPE);
    CHECK_ST(gdte_type_free(NULL), GDTE_ERR_INVALID_ARG);

    /* a handle validated a moment ago (and remembered by the fast path) dies at its free */
    gdte_type_h v, v_stale;
    CHECK_OK(gdte_type_create_contiguous(3, INT, &v));
    CHECK_OK(gdte_type_commit(v));
    poison();
    CHECK_OK(gdte_pack(in, 1, v, out, sizeof out, NULL, &done));
    CHECK_OK(gdte_pack(in, 1, v, out, sizeof out, NULL, &done));
    v_stale = v;
    CHECK_OK(gdte_type_free(&v));
    BAD(gdte_pack(in, 1, v_stale, out, sizeof out, NULL, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    /* a pointer that was never a handle */
    struct { uint64_t junk[32]; } fake = {{0}};
    gdte_type_h bogus = (gdte_type_h)&fake;
    BAD(gdte_pack(in, 1, bogus, out, sizeof out, NULL, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_type_create_contiguous(2, bogus, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);
    gdte_type_h ty2[2] = {INT, bogus};
    int64_t bl2[2] = {1, 1}, d2[2] = {0, 8};
    BAD(gdte_type_create_struct(2, bl2, d2, ty2, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);

    /* freed: the handle dies at gdte_type_free, even while a parent still holds the object */
    gdte_type_h t, parent;
    CHECK_OK(gdte_type_create_vector(3, 1, 2, INT, &t));
    CHECK_OK(gdte_type_commit(t));
    CHECK_OK(gdte_type_create_contiguous(2, t, &parent));
    CHECK_OK(gdte_type_commit(parent));
    gdte_type_h stale = t;
    CHECK_OK(gdte_type_free(&t));
    CHECK(t == NULL);
    BAD(gdte_pack(in, 1, stale, out, sizeof out, NULL, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_unpack(in, 12, out, 1, stale, NULL, &done), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_type_commit(stale), GDTE_ERR_INVALID_TYPE, done, SENT_DONE);
    BAD(gdte_type_create_contiguous(2, stale, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);
    BAD(gdte_type_dup(stale, &th), GDTE_ERR_INVALID_TYPE, th, SENT_TYPE);
    CHECK_ST(gdte_type_get_info(stale, &info), GDTE_ERR_INVALID_TYPE);
    t = stale;
    CHECK_ST(gdte_type_free(&t), GDTE_ERR_INVALID_TYPE); /* double free */
    CHECK(t == stale);
    /* the parent is unaffected */
    poison();
    CHECK_OK(gdte_pack(in, 1, parent, out, sizeof out, NULL, &done));
    CHECK(done == 24 && !memcmp(out, in, 4) && !memcmp(out + 4, in + 8, 4) && !memcmp(out + 12, in + 20, 4));
    CHECK_OK(gdte_type_free(&parent));
    /* now the object itself is gone: still an error, never a crash */
    BAD(gdte_pack(in, 1, parent ? parent : stale, out, sizeof out, NULL, &done), GDTE_ERR_INVALID_TYPE, done,
        SENT_DONE);
    still_works(__LINE__);
}

static void test_counts(void)
{
    int64_t bl[2] = {1, -1}, d[2] = {0, 4}, one = 1;
    gdte_type_h ty[2] = {INT, INT};
    BAD(gdte_type_create_contiguous(-1, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_vector(-2, 1, 1, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_vector(2, -1, 1, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_hvector(-1, 1, 8, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_hvector(1, -5, 8, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_indexed(-1, bl, d, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_indexed(2, bl, d, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_hindexed(2, bl, d, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_indexed_block(-1, 1, d, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_indexed_block(2, -1, d, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_hindexed_block(2, -1, d, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_struct(-1, bl, d, ty, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_type_create_struct(2, bl, d, ty, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    int64_t sz[1] = {4}, sub[1] = {-1}, st[1] = {0};
    BAD(gdte_type_create_subarray(1, sz, sub, st, GDTE_ORDER_C, INT, &th), GDTE_ERR_COUNT, th, SENT_TYPE);
    BAD(gdte_pack(in, -1, good, out, sizeof out, NULL, &done), GDTE_ERR_COUNT, done, SENT_DONE);
    BAD(gdte_unpack(in, 32, out, -1, good, NULL, &done), GDTE_ERR_COUNT, done, SENT_DONE);
    BAD(gdte_type_pack_size(-1, good, &done), GDTE_ERR_COUNT, done, SENT_DONE);
    BAD(gdte_type_signature(-3, good, NULL, &done), GDTE_ERR_COUNT, done, SENT_DONE);
    (void)one;
    still_works(__LINE__);
}

static void test_overflow(void)
{
    const int64_t big = INT64_MAX / 4;
    BAD(gdte_type_create_contiguous(big, DBL, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE);
    BAD(gdte_type_create_vector(2, 1, big, DBL, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE); /* stride x extent */
    BAD(gdte_type_create_hvector(3, 1, INT64_MAX / 2, INT, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE);
    BAD(gdte_type_create_hvector(big, big, 1, INT, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE); /* count x blocklength */
    BAD(gdte_type_create_resized(INT, INT64_MAX - 2, 10, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE);
    int64_t bl[2] = {big, big}, d[2] = {0, 8};
    BAD(gdte_type_create_hindexed(2, bl, d, DBL, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE);
    int64_t dd[2] = {INT64_MAX / 2, 0}, one[2] = {1, 1};
    BAD(gdte_type_create_indexed(2, one, dd, DBL, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE); /* displacement x extent */
    int64_t sz[2] = {INT64_MAX / 8, 16}, sub[2] = {1, 1}, st[2] = {0, 0};
    BAD(gdte_type_create_subarray(2, sz, sub, st, GDTE_ORDER_C, DBL, &th), GDTE_ERR_OVERFLOW, th, SENT_TYPE);
    /* count x size of a legal type */
    gdte_type_h t, r;
    CHECK_OK(gdte_type_create_contiguous(1LL << 40, DBL, &t));
    CHECK_OK(gdte_type_commit(t));
    BAD(gdte_type_pack_size(1LL << 30, t, &done), GDTE_ERR_OVERFLOW, done, SENT_DONE);
    BAD(gdte_pack(in, 1LL << 30, t, out, sizeof out, NULL, &done), GDTE_ERR_OVERFLOW, done, SENT_DONE);
    BAD(gdte_unpack(in, 8, out, 1LL << 30, t, NULL, &done), GDTE_ERR_OVERFLOW, done, SENT_DONE);
    CHECK_OK(gdte_type_free(&t));
    /* count x extent overflows while count x size does not: a small element, a huge extent */
    CHECK_OK(gdte_type_create_resized(INT, 0, 1LL << 40, &r));
    CHECK_OK(gdte_type_commit(r));
    CHECK_OK(gdte_type_pack_size(1LL << 30, r, &done));
    CHECK_EQ(done, 4LL << 30);
    BAD(gdte_pack(in, 1LL << 30, r, out, sizeof out, NULL, &done), GDTE_ERR_OVERFLOW, done, SENT_DONE);
    BAD(gdte_unpack(in, 8, out, 1LL << 30, r, NULL, &done), GDTE_ERR_OVERFLOW, done, SENT_DONE);
    CHECK_OK(gdte_type_free(&r));
    still_works(__LINE__);
}

static void test_ranges(void)
{
    gdte_pack_params_t p = {.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = 33};
    /* offset past the packed size (32 bytes) */
    BAD(gdte_pack(in, 1, good, out, sizeof out, &p, &done), GDTE_ERR_OFFSET, done, SENT_DONE);
    BAD(gdte_unpack(in, 8, out, 1, good, &p, &done), GDTE_ERR_OFFSET, done, SENT_DONE);
    p.offset = 1LL << 62;
    BAD(gdte_pack(in, 2, good, out, sizeof out, &p, &done), GDTE_ERR_OFFSET, done, SENT_DONE);
    p.offset = -1;
    BAD(gdte_pack(in, 1, good, out, sizeof out, &p, &done), GDTE_ERR_INVALID_ARG, done, SENT_DONE);
    BAD(gdte_unpack(in, 8, out, 1, good, &p, &done), GDTE_ERR_INVALID_ARG, done, SENT_DONE);
    p = (gdte_pack_params_t){.field_mask = GDTE_PACK_FIELD_MAX_BYTES, .max_bytes = -1};
    BAD(gdte_pack(in, 1, good, out, sizeof out, &p, &done), GDTE_ERR_INVALID_ARG, done, SENT_DONE);
    BAD(gdte_pack(in, 1, good, out, -1, NULL, &done), GDTE_ERR_INVALID_ARG, done, SENT_DONE);
    BAD(gdte_unpack(in, -1, out, 1, good, NULL, &done), GDTE_ERR_INVALID_ARG, done, SENT_DONE);

    /* Documented successes that move nothing: offset == packed size, max_bytes 0, no room. */
    p = (gdte_pack_params_t){.field_mask = GDTE_PACK_FIELD_OFFSET, .offset = 32};
    poison();
    CHECK_OK(gdte_pack(in, 1, good, out, sizeof out, &p, &done));
    CHECK(done == 0 && untouched());
    p = (gdte_pack_params_t){.field_mask = GDTE_PACK_FIELD_MAX_BYTES, .max_bytes = 0};
    poison();
    CHECK_OK(gdte_pack(in, 1, good, out, sizeof out, &p, &done));
    CHECK(done == 0 && untouched());
    poison();
    CHECK_OK(gdte_unpack(in, sizeof in, out, 1, good, &p, &done));
    CHECK(done == 0 && untouched());
    poison();
    CHECK_OK(gdte_pack(in, 1, good, out, 0, NULL, &done));
    CHECK(done == 0 && untouched());
    /* fields without their mask bit are not read */
    p = (gdte_pack_params_t){.field_mask = 0, .offset = -5, .max_bytes = -5};
    poison();
    CHECK_OK(gdte_pack(in, 1, good, out, sizeof out, &p, &done));
    CHECK_EQ(done, 32);
    still_works(__LINE__);
}

static void test_null_buffers(void)
{
    BAD(gdte_pack(NULL, 1, good, out, sizeof out, NULL, &done), GDTE_ERR_NULL_BUFFER, done, SENT_DONE);
    BAD(gdte_pack(in, 1, good, NULL, sizeof out, NULL, &done), GDTE_ERR_NULL_BUFFER, done, SENT_DONE);
    BAD(gdte_unpack(NULL, 32, out, 1, good, NULL, &done), GDTE_ERR_NULL_BUFFER, done, SENT_DONE);
    BAD(gdte_unpack(in, 32, NULL, 1, good, NULL, &done), GDTE_ERR_NULL_BUFFER, done, SENT_DONE);
    /* nothing to move: NULL is fine */
    CHECK_OK(gdte_pack(NULL, 0, good, NULL, 0, NULL, &done));
    CHECK_EQ(done, 0);
    CHECK_OK(gdte_unpack(NULL, 0, NULL, 0, good, NULL, &done));
    CHECK_OK(gdte_pack(NULL, 3, good, NULL, 0, NULL, NULL)); /* the count is not checked against the room */
    still_works(__LINE__);
}

static void test_uncommitted(void)
{
    gdte_type_h t;
    CHECK_OK(gdte_type_create_vector(2, 1, 2, INT, &t));
    BAD(gdte_pack(in, 1, t, out, sizeof out, NULL, &done), GDTE_ERR_NOT_COMMITTED, done, SENT_DONE);
    BAD(gdte_unpack(in, 8, out, 1, t, NULL, &done), GDTE_ERR_NOT_COMMITTED, done, SENT_DONE);
    BAD(gdte_pack(in, 0, t, out, sizeof out, NULL, &done), GDTE_ERR_NOT_COMMITTED, done, SENT_DONE);
    /* the queries work on an uncommitted type */
    gdte_type_info_t in_;
    CHECK_OK(gdte_type_get_info(t, &in_));
    CHECK(!in_.committed && in_.size == 8 && in_.num_blocks == 2);
    char text[64];
    CHECK_OK(gdte_type_describe(t, text, sizeof text));
    CHECK_OK(gdte_type_commit(t));
    poison();
    CHECK_OK(gdte_pack(in, 1, t, out, sizeof out, NULL, &done));
    CHECK(done == 8 && !memcmp(out, in, 4) && !memcmp(out + 4, in + 8, 4));
    CHECK_OK(gdte_type_free(&t));
}

static void test_constructor_args(void)
{
    int64_t bl[2] = {1, 1}, d[2] = {0, 4};
    gdte_type_h ty[2] = {INT, INT};
    BAD(gdte_type_create_contiguous(2, INT, NULL), GDTE_ERR_INVALID_ARG, done, SENT_DONE);
    BAD(gdte_type_create_hindexed(2, NULL, d, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_hindexed(2, bl, NULL, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_indexed(2, NULL, d, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_indexed_block(2, 1, NULL, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_struct(2, bl, d, NULL, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_struct(2, NULL, d, ty, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_basic(0, 1, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_basic((1 << 20) + 1, 1, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_basic(-8, 1, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    /* subarray */
    int64_t sz[2] = {4, 5}, sub[2] = {2, 6}, st[2] = {0, 0}, okst[2] = {3, 0}, oksub[2] = {2, 2};
    BAD(gdte_type_create_subarray(0, sz, oksub, st, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_subarray(2, sz, sub, st, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_subarray(2, sz, oksub, okst, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_subarray(2, sz, oksub, st, (gdte_order_t)7, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    BAD(gdte_type_create_subarray(2, NULL, oksub, st, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th, SENT_TYPE);
    /* darray */
    int64_t g[1] = {10}, p2[1] = {2}, p3[1] = {3}, dflt[1] = {GDTE_DISTRIBUTE_DFLT_DARG}, small[1] = {3}, zero[1] = {0};
    gdte_distribute_t blk[1] = {GDTE_DISTRIBUTE_BLOCK}, none[1] = {GDTE_DISTRIBUTE_NONE},
                      weird[1] = {(gdte_distribute_t)9};
    BAD(gdte_type_create_darray(3, 0, 1, g, blk, dflt, p2, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th,
        SENT_TYPE); /* 2 processes in the grid, size 3 */
    BAD(gdte_type_create_darray(3, 3, 1, g, blk, dflt, p3, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th,
        SENT_TYPE); /* rank out of range */
    BAD(gdte_type_create_darray(3, 0, 1, g, blk, small, p3, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th,
        SENT_TYPE); /* block of 3 x 3 processes < 10 */
    BAD(gdte_type_create_darray(2, 0, 1, g, none, dflt, p2, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th,
        SENT_TYPE); /* no distribution over 2 processes */
    BAD(gdte_type_create_darray(3, 0, 1, g, weird, dflt, p3, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th,
        SENT_TYPE);
    BAD(gdte_type_create_darray(3, 0, 1, g, blk, zero, p3, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th,
        SENT_TYPE);
    BAD(gdte_type_create_darray(0, 0, 1, g, blk, dflt, p3, GDTE_ORDER_C, INT, &th), GDTE_ERR_INVALID_ARG, th,
        SENT_TYPE);
    /* queries */
    CHECK_ST(gdte_type_get_info(good, NULL), GDTE_ERR_INVALID_ARG);
    CHECK_ST(gdte_type_pack_size(1, good, NULL), GDTE_ERR_INVALID_ARG);
    CHECK_ST(gdte_type_describe(good, NULL, 10), GDTE_ERR_INVALID_ARG);
    char c1[1] = {'x'};
    CHECK_ST(gdte_type_describe(good, c1, 0), GDTE_ERR_INVALID_ARG);
    CHECK(c1[0] == 'x');
    still_works(__LINE__);
}

int main(void)
{
    if (gdte_init(NULL) != GDTE_OK) return 1;
    int64_t before = 0;
    (void)before;
    CHECK_OK(gdte_type_create_vector(4, 2, 3, INT, &good));
    CHECK_OK(gdte_type_commit(good));
    still_works(__LINE__);
    test_handles();
    test_counts();
    test_overflow();
    test_ranges();
    test_null_buffers();
    test_uncommitted();
    test_constructor_args();
    CHECK_OK(gdte_type_free(&good));
    int rc = tu_report("badinput");
    gdte_finalize();
    return rc;
}
