/*
 * Knob parsing (src/util/knobs.c): numbers are decimal, whatever their leading zeros
 * ("065536" once read as octal 27,486); "0x" and other bases are refused, not guessed; the
 * k/m/g suffixes still scale; the environment path (gdte_knobs_load) reads the same way.
 */
#include "testutil.h"
#include "util/util.h"

static int64_t parse(gdte_knob_id_t id, const char *text, gdte_status_t expect)
{
    int64_t v = -12345;
    CHECK_ST(gdte_knob_parse(id, text, &v), expect);
    return v;
}

int main(void)
{
    /* leading zeros: decimal */
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "065536", GDTE_OK), 65536);
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "0065536", GDTE_OK), 65536);
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "08192", GDTE_OK), 8192); /* invalid octal digits */
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "064k", GDTE_OK), 65536);
    CHECK_EQ(parse(GDTE_KNOB_PIPELINE_DEPTH, "010", GDTE_OK), 10);
    CHECK_EQ(parse(GDTE_KNOB_PIPELINE_DEPTH, "08", GDTE_OK), 8);
    CHECK_EQ(parse(GDTE_KNOB_TIMEOUT, "0120", GDTE_OK), 120);
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "0", GDTE_OK), 0);
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "00", GDTE_OK), 0);
    /* suffixes and spacing as before */
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "64k", GDTE_OK), 65536);
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "1M", GDTE_OK), 1 << 20);
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "1mb", GDTE_OK), 1 << 20);
    CHECK_EQ(parse(GDTE_KNOB_CACHE_MAX, " 1g ", GDTE_OK), 1 << 30);
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "+8192", GDTE_OK), 8192);
    /* other bases are refused */
    parse(GDTE_KNOB_FRAG_SIZE, "0x10000", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_FRAG_SIZE, "0X10000", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_PIPELINE_DEPTH, "0x4", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_PIPELINE_DEPTH, "0b11", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_PIPELINE_DEPTH, "", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_PIPELINE_DEPTH, "+", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_PIPELINE_DEPTH, "-", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_PIPELINE_DEPTH, "k", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_FRAG_SIZE, "k", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_FRAG_SIZE, "+-5", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_PIPELINE_DEPTH, "4k", GDTE_ERR_BAD_KNOB); /* no suffix on an INT knob */
    parse(GDTE_KNOB_FRAG_SIZE, "99999999999999999999", GDTE_ERR_BAD_KNOB);
    parse(GDTE_KNOB_FRAG_SIZE, "9000000000000000g", GDTE_ERR_BAD_KNOB); /* overflows */
    /* range checks still apply to the decimal value: 027486 is below the 4096 minimum only
     * if read as octal; as decimal (27,486) it is accepted */
    CHECK_EQ(parse(GDTE_KNOB_FRAG_SIZE, "027486", GDTE_OK), 27486);
    parse(GDTE_KNOB_FRAG_SIZE, "04095", GDTE_ERR_BAD_KNOB);

    /* the environment path */
    setenv("GDTE_FRAG_SIZE", "065536", 1);
    setenv("GDTE_PIPELINE_DEPTH", "010", 1);
    gdte_knobs_reset();
    CHECK_OK(gdte_knobs_load());
    CHECK_EQ(gdte_knob(GDTE_KNOB_FRAG_SIZE), 65536);
    CHECK_EQ(gdte_knob(GDTE_KNOB_PIPELINE_DEPTH), 10);
    setenv("GDTE_FRAG_SIZE", "0x10000", 1);
    gdte_knobs_reset();
    CHECK_ST(gdte_knobs_load(), GDTE_ERR_BAD_KNOB);
    unsetenv("GDTE_FRAG_SIZE");
    unsetenv("GDTE_PIPELINE_DEPTH");
    gdte_knobs_reset();
    CHECK_OK(gdte_knobs_load());
    CHECK_EQ(gdte_knob(GDTE_KNOB_FRAG_SIZE), 0);
    return tu_report("engine_knobs");
}
