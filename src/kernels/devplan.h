/* Device copies of plans: uploaded once per type and device, kept until the type is freed or
 * evicted (GDTE_CACHE_MAX, least recently used first). */
#ifndef GDTE_DEVPLAN_H
#define GDTE_DEVPLAN_H
#include "gdte.h"
#include "layout.h"

/* Device pointer to the type's units on the current device, uploading them on first use. */
gdte_status_t gdte_devplan_units(gdte_type_h type, const gdte_unit_t **dunits_p);
/* Bytes of device memory held by cached plans; number of uploads and evictions so far. */
int64_t gdte_devplan_bytes(void);
int64_t gdte_devplan_uploads(void);
int64_t gdte_devplan_evictions(void);
void gdte_devplan_finalize(void);
#endif
