/**
 * @file gdte_ucx.h
 * @brief gdte as a UCX generic datatype: hand non-contiguous (device or host) data described by
 * a gdte type to UCX's tag-matching calls (ucp_tag_send_nbx, ucp_tag_recv_nbx). Not to RMA:
 * UCX's ucp_put_nbx and ucp_get_nbx accept only contiguous data (ucp_dt_make_contig(1)), so a
 * one-sided transfer packs with gdte_pack() first. An MPI built on UCX (Open MPI's pml/ucx,
 * MPICH's ch4:ucx) plugs gdte in by creating the UCX datatype of an MPI datatype from
 * gdte_mpi-imported or gdte-built types.
 *
 * The callbacks pack and unpack by byte offset with gdte_pack/gdte_unpack, so UCX may split the
 * message into fragments of any size (eager, rendezvous pipeline) and deliver them in any
 * order. See docs/MPI_BACKEND.md. Link: -lgdte_ucx -lgdte -lucp -lucs (`pkg-config gdte_ucx`,
 * or CMake's gdte::gdte_ucx from find_package(gdte COMPONENTS ucx)).
 */
#ifndef GDTE_UCX_H
#define GDTE_UCX_H

#include <stdint.h>
#include <ucp/api/ucp.h>
#include "gdte.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A UCX datatype of which one element is @p count consecutive elements of the committed type
 * @p type (consecutive: one extent apart). A UCP call with count c then moves c * @p count
 * elements of @p type, and its packed stream is gdte's (and MPI_Pack's) stream of those.
 *
 * The datatype keeps its own reference to the type: the caller may free @p type at once.
 * Release it with gdte_ucx_dt_destroy() (not ucp_dt_destroy(), which would leak the reference).
 * Thread safe; the datatype may be used by any number of operations at once.
 */
GDTE_API gdte_status_t gdte_ucx_dt_create(gdte_type_h type, int64_t count, ucp_datatype_t *dt_p);

/** Destroy a datatype made by gdte_ucx_dt_create(). Operations using it must have completed.
 * GDTE_ERR_INVALID_ARG if @p dt was not made by gdte_ucx_dt_create(). */
GDTE_API gdte_status_t gdte_ucx_dt_destroy(ucp_datatype_t dt);

#ifdef __cplusplus
}
#endif
#endif /* GDTE_UCX_H */
