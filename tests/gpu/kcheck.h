/*
 * The GPU executor checked against the host executor, byte for byte: whole, fragmented and
 * out-of-order partial packs and unpacks, poisoned outputs and guard bytes, every kernel
 * variant and word-size cap forced in turn, misaligned buffers. One driver for the real
 * device (test_gpu_kernels.c) and for the CPU emulation of the kernels (test_kernels_emu.c);
 * they differ only in where "device" memory lives and how a units array gets there.
 */
#ifndef GDTETEST_KCHECK_H
#define GDTETEST_KCHECK_H
#include <stddef.h>
#include <stdint.h>
#include "gdte.h"
#include "kernels/kernels.h"
#include "randtype.h"

typedef struct kc_ops {
    void *(*alloc)(size_t n);
    void (*release)(void *p);
    void (*to_dev)(void *d, const void *h, size_t n);
    void (*to_host)(void *h, const void *d, size_t n);
    /* L->units for a UNITS layout of `type`, as the executor needs it */
    const gdte_unit_t *(*units)(gdte_type_h type, const gdte_layout_t *L);
    /* run and wait */
    gdte_status_t (*exec)(const gdte_layout_t *L, const gdte_gpu_exec_opts_t *o, gdte_dir_t dir, void *user,
                          void *packed, int64_t offset, int64_t len);
    gdte_status_t (*sync)(void); /* wait for the device */
    /* gdte_gpu_exec_copy, run and wait */
    gdte_status_t (*copy)(const gdte_layout_t *Ls, const void *src, const gdte_layout_t *Ld, void *dst, int64_t off,
                          int64_t len);
    /* gdte_gpu_exec_copy_units, run and wait */
    gdte_status_t (*copy_units)(const gdte_layout_t *L, const void *src, void *dst, int64_t off, int64_t len);
} kc_ops_t;

#define KC_NVARIANTS 16 /* room for every gdte_kvar_t */

typedef struct kc_stats {
    int64_t cases, failures, bytes;
    int64_t ran[KC_NVARIANTS][17]; /* [variant][word] launches seen (word 0: DEV, chosen per unit) */
    int64_t cut[KC_NVARIANTS][17]; /* of those, launches whose range starts or ends inside a word */
    int64_t periodic_wide;         /* PERIODIC launches with 64-bit index arithmetic forced */
    int64_t flat_wide[17]; /* FLAT launches with 64-bit index arithmetic forced, by word */
    int64_t flat_nd[4];    /* FLAT launches by the layout's dimensions (1, 2, 3 or more) */
    int64_t skipped_unpack; /* overlapping types: unpack order would matter, as in MPI */
    int64_t runs_checked;   /* plans whose runs were cut on the device and compared */
} kc_stats_t;

/* Check `count` elements of `type` under every forced variant in `variants` (terminated by
 * -1; GDTE_KVAR_NONE = automatic) and word cap in `words` (terminated by -1; 0 = no cap).
 * Returns the number of failures; prints each with `seed` and `desc`. */
int kc_check(const kc_ops_t *ops, gdte_type_h type, int64_t count, uint64_t seed, const char *desc,
             const int *variants, const int *words, kc_stats_t *stats);

/* If the engine kept runs for `type`, cut them into units with gdte_gpu_expand_units and
 * compare with the host units byte for byte. Returns the number of failures. */
int kc_check_runs(const kc_ops_t *ops, gdte_type_h type, uint64_t seed, const char *desc, kc_stats_t *stats);

/* gdte_gpu_exec_copy of `cs` elements of `ts` into `cd` elements of `td` (the shorter stream),
 * whole and in random pieces, against the host executor's pack then unpack; poisoned destination
 * and guards, misaligned buffers. Pairs that are not both regular (CONTIG/STRIDED), and
 * overlapping destinations, are skipped (0). Returns the number of failures. */
int kc_check_copy(const kc_ops_t *ops, gdte_type_h ts, int64_t cs, gdte_type_h td, int64_t cd, uint64_t seed,
                  const char *desc, kc_stats_t *stats);

/* gdte_gpu_exec_copy_units of `count` elements of a UNITS `type` from one buffer to another,
 * whole and in random pieces, against the host executor's pack then unpack. Other layouts and
 * overlapping types are skipped (0). Returns the number of failures. */
int kc_check_copy_units(const kc_ops_t *ops, gdte_type_h type, int64_t count, uint64_t seed, const char *desc,
                        kc_stats_t *stats);

/* Iterations from GDTETEST_ITERS (default `def`), seed from GDTETEST_SEED (default: time). */
int kc_iters(int def);
uint64_t kc_seed(void);
void kc_print_coverage(const kc_stats_t *s);
#endif
