/*
 * callprof.h: where the host time of one gdte_pack / gdte_unpack goes, stage by stage (bench/pack's
 * callcost rows). Off unless GDTETEST_PROFILE_CALLS=1 is in the environment at load time or
 * gdte_callprof_enable(1) is called; off, each stage costs one test of a global. Per thread.
 * The storage lives in host_exec.c, which every build that runs pack.c or pack_kernels.cu links
 * (the library, the kernels' CPU emulator, the device plan cache's test).
 */
#ifndef GDTE_CALLPROF_H
#define GDTE_CALLPROF_H
#include <stdint.h>

typedef enum {
    GDTE_CP_LAYOUT = 0, /* type lookup, the layout of `count` elements, the parameters */
    GDTE_CP_MEMKIND,    /* the memory kind of both buffers (memquery.c's cache) */
    GDTE_CP_PLAN,       /* the device plan cache's lookup (UNITS layouts only) */
    GDTE_CP_CHOOSE,     /* word size and kernel variant */
    GDTE_CP_LAUNCH,     /* the kernel's arguments and its launch (or the async copy) */
    GDTE_CP_SYNC,       /* the wait of the blocking form */
    GDTE_CP_TOTAL,      /* the whole call */
    GDTE_CP_FIRST_COPY, /* a plan's first use: the host's writes of its runs into the bounce buffer */
    GDTE_CP_FIRST_QUEUE,/* ... the rest of the first use: cuts, waits, the packs' launches */
    GDTE_CP_COUNT_
} gdte_cp_stage_t;

typedef struct gdte_callprof {
    int64_t calls;
    double sec[GDTE_CP_COUNT_]; /* summed over the calls */
} gdte_callprof_t;

extern int gdte_callprof_on;
void gdte_callprof_enable(int on);
void gdte_callprof_add(gdte_cp_stage_t stage, double sec);
void gdte_callprof_call(void);
/* The calling thread's sums since the last take, then zeroed. */
void gdte_callprof_take(gdte_callprof_t *p);
#endif
