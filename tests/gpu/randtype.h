/* A seeded generator of random datatypes over the public constructors, for the GPU tests. */
#ifndef GDTETEST_RANDTYPE_H
#define GDTETEST_RANDTYPE_H
#include <stddef.h>
#include <stdint.h>
#include "gdte.h"

typedef struct rt_rng {
    uint64_t s;
} rt_rng_t;
uint64_t rt_next(rt_rng_t *r);
/* uniform in [0, n) */
int64_t rt_below(rt_rng_t *r, int64_t n);

/* A committed random type whose element spans at most about `max_extent` bytes, and its
 * constructor expression in `desc` (for failure messages). NULL on a constructor error (a
 * bug: the generator only asks for valid types). */
gdte_type_h rt_random_type(rt_rng_t *r, int64_t max_extent, char *desc, size_t desc_len);

/* The shapes of the benchmark, small: each must take a known GPU kernel variant. */
typedef enum {
    RT_SHAPE_VECTOR,    /* column sub-matrix: STRIDED, big blocks */
    RT_SHAPE_SMALLBLK,  /* 64-byte blocks at a 128-byte stride: STRIDED */
    RT_SHAPE_TRIANGLE,  /* lower triangle, indexed: UNITS, warp per unit */
    RT_SHAPE_TRANSPOSE, /* vector of resized single-element columns: TILED */
    RT_SHAPE_STRUCT,    /* struct {int, double, float[3]} array: UNITS, thread per unit */
    RT_SHAPE_FACE_X,    /* single elements at a large stride: STRIDED, 8-byte blocks */
    RT_SHAPE_TRANSPOSE_C16, /* transpose of complex doubles: TILED, 16-byte words */
    RT_SHAPE_TRANSPOSE_B1,  /* transpose of bytes: TILED, 1-byte words */
    RT_SHAPE_LONGBLK,       /* a few 12 KiB blocks: STRIDED, blocks cut into pieces */
    RT_SHAPE_LONGIDX,       /* irregular 8-24 KiB blocks: UNITS with runs (compact upload) */
    RT_SHAPE_COUNT_
} rt_shape_t;
gdte_type_h rt_shape_type(rt_shape_t shape, int64_t n, char *desc, size_t desc_len);
#endif
