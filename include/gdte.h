/**
 * @file gdte.h
 * @brief gdte: a GPU datatype engine for non-contiguous MPI messages.
 *
 * The one public header. Conventions:
 *  - every call returns a ::gdte_status_t (GDTE_OK == 0, errors negative);
 *  - output parameters come last and end in `_p`; they are written only on success;
 *  - handles are opaque and reference counted;
 *  - option structs start with `uint64_t field_mask`: a field is read only when its bit is
 *    set, so fields can be added without breaking callers.
 */
#ifndef GDTE_H
#define GDTE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the calls the library exports (everything else in it is hidden). */
#if defined(_WIN32)
#define GDTE_API
#else
#define GDTE_API __attribute__((visibility("default")))
#endif

/** Major version of this header; the shared library's soname carries it. */
#define GDTE_VERSION_MAJOR 0
/** Minor version of this header. */
#define GDTE_VERSION_MINOR 1
/** Patch version of this header. */
#define GDTE_VERSION_PATCH 0

/** Version of the library actually loaded (major*10000 + minor*100 + patch). */
GDTE_API unsigned gdte_version(void);
/** Version string: the version and the GPU backend compiled in, e.g. "0.1.0 (gpu=CUDA)"
 * ("NONE", "CUDA" or "HIP"). */
GDTE_API const char *gdte_version_string(void);

/* ------------------------------------------------------------------------------------------ */
/** @name Status codes
 * One list, from which the enum, gdte_status_string() and gdte_status_name() are made. */
/**@{*/
/** The status codes as X(name, value, text): GDTE_OK (0), GDTE_INPROGRESS (1), and the errors
 * (negative). Expand it with a macro of your own to make tables of them. */
#define GDTE_STATUS_LIST(X)                                                                    \
    X(GDTE_OK, 0, "success")                                                                   \
    X(GDTE_INPROGRESS, 1, "operation in progress")                                             \
    X(GDTE_ERR_INVALID_ARG, -1, "invalid argument")                                            \
    X(GDTE_ERR_INVALID_TYPE, -2, "invalid, NULL or freed datatype handle")                     \
    X(GDTE_ERR_NOT_COMMITTED, -3, "datatype not committed")                                    \
    X(GDTE_ERR_COUNT, -4, "negative count or blocklength")                                     \
    X(GDTE_ERR_OVERFLOW, -5, "size or extent overflows 63 bits")                               \
    X(GDTE_ERR_NULL_BUFFER, -6, "NULL buffer with a nonzero amount of data")                   \
    X(GDTE_ERR_OFFSET, -7, "offset past the end of the packed stream")                         \
    X(GDTE_ERR_TRUNCATE, -8, "message longer than the receive buffer")                         \
    X(GDTE_ERR_MISMATCH, -9, "type signatures of sender and receiver differ")                  \
    X(GDTE_ERR_NO_MEMORY, -10, "out of host memory")                                           \
    X(GDTE_ERR_NO_DEVICE_MEMORY, -11, "out of device or staging memory")                       \
    X(GDTE_ERR_NO_DEVICE, -12, "no GPU backend or device available")                           \
    X(GDTE_ERR_GPU, -13, "GPU runtime error")                                                  \
    X(GDTE_ERR_MEMORY_KIND, -14, "unsupported memory kind for this operation")                 \
    X(GDTE_ERR_TRANSPORT, -15, "transport (UCX) error")                                        \
    X(GDTE_ERR_PEER_FAILED, -16, "peer process failed or disconnected")                        \
    X(GDTE_ERR_TIMEOUT, -17, "operation timed out")                                            \
    X(GDTE_ERR_NOT_INITIALIZED, -18, "library not initialized")                                \
    X(GDTE_ERR_BAD_KNOB, -19, "invalid value in a GDTE_* environment variable")                \
    X(GDTE_ERR_UNSUPPORTED, -20, "operation or datatype feature not supported")                \
    X(GDTE_ERR_CANCELED, -21, "operation canceled")                                            \
    X(GDTE_ERR_INTERNAL, -22, "internal error")

/** What every call returns: GDTE_OK, GDTE_INPROGRESS, or a negative error (GDTE_STATUS_LIST). */
typedef enum {
/** @cond */
#define GDTE_X_ENUM(name, value, text) name = value,
/** @endcond */
    GDTE_STATUS_LIST(GDTE_X_ENUM)
#undef GDTE_X_ENUM
} gdte_status_t;

/** Human-readable text of a status. Never NULL. */
GDTE_API const char *gdte_status_string(gdte_status_t status);
/** Symbolic name of a status ("GDTE_ERR_TRUNCATE"). Never NULL. */
GDTE_API const char *gdte_status_name(gdte_status_t status);
/**@}*/

/* ------------------------------------------------------------------------------------------ */
/** @name Library lifetime */
/**@{*/
enum {
    GDTE_INIT_FIELD_DEVICE = 1u << 0,   /**< gdte_init_params_t::device is set */
    GDTE_INIT_FIELD_FLAGS = 1u << 1,    /**< gdte_init_params_t::flags is set */
};
enum {
    GDTE_INIT_FLAG_HOST_ONLY = 1u << 0, /**< never touch a GPU runtime */
};
/** Options of gdte_init(). */
typedef struct gdte_init_params {
    uint64_t field_mask; /**< GDTE_INIT_FIELD_*: which fields below are set */
    int device;     /**< GPU ordinal to use; default: the runtime's current device */
    uint64_t flags; /**< GDTE_INIT_FLAG_* */
} gdte_init_params_t;

/** Initialise the library (reference counted: each init needs one finalize). Reads and
 * validates every GDTE_* knob: a bad value fails with GDTE_ERR_BAD_KNOB. @p params may be NULL. */
GDTE_API gdte_status_t gdte_init(const gdte_init_params_t *params);
/** Release what gdte_init acquired once the last user finalizes. */
GDTE_API gdte_status_t gdte_finalize(void);
/**@}*/

/* ------------------------------------------------------------------------------------------ */
/** @name Datatypes
 * Constructors follow MPI's, with 64-bit counts and byte displacements. A negative count or
 * blocklength is GDTE_ERR_COUNT; sizes and extents that overflow 63 bits are GDTE_ERR_OVERFLOW.
 * A new type holds a reference on each type it is made of, so the caller may free those at
 * once. Types must be committed before they are used to pack.
 *
 * Bounds follow the MPI standard's type-map rules: a type made with gdte_type_create_resized()
 * has explicit bounds, and any type built over such a type takes its lb/ub from those; other
 * types take lb/ub from their data, with ub padded so the extent is a multiple of the largest
 * alignment among their elements (MPI's epsilon; e.g. a struct {double at 0, char at 8} has
 * extent 16). Padding is not inherited: a parent pads its own data span once. Open MPI differs
 * in two corners (it builds a parent over each child's padded bounds, and an empty child
 * still moves the bounds); docs/ENGINE.md lists them, and the MPI import resizes to what the
 * MPI in use reports.
 *
 * Byte displacements, strides, lb and extent must be greater than INT64_MIN (else
 * GDTE_ERR_INVALID_ARG), so that every bound can be negated. A type nests at most
 * GDTE_MAX_TYPE_DEPTH levels (a dup adds none); a constructor that would go deeper returns
 * GDTE_ERR_UNSUPPORTED. Commit, pack and free walk types without recursion, so any depth up
 * to the limit works.
 *
 * A handle is an opaque value, not an address: it names one type for that type's lifetime
 * only, so a handle used after its type is gone is GDTE_ERR_INVALID_TYPE even when a newer
 * type took its place in memory. */
/**@{*/
/** A datatype: an opaque, reference-counted handle. */
typedef struct gdte_type *gdte_type_h;
/** Deepest nesting of constructors in one type. */
#define GDTE_MAX_TYPE_DEPTH (1 << 20)

/** Builtin element kinds: each is one indivisible element of a type signature. */
typedef enum {
    GDTE_BASIC_BYTE = 0,
    GDTE_BASIC_CHAR,
    GDTE_BASIC_INT8,
    GDTE_BASIC_UINT8,
    GDTE_BASIC_INT16,
    GDTE_BASIC_UINT16,
    GDTE_BASIC_INT32,
    GDTE_BASIC_UINT32,
    GDTE_BASIC_INT64,
    GDTE_BASIC_UINT64,
    GDTE_BASIC_FLOAT,
    GDTE_BASIC_DOUBLE,
    GDTE_BASIC_LONG_DOUBLE,
    GDTE_BASIC_COMPLEX_FLOAT,
    GDTE_BASIC_COMPLEX_DOUBLE,
    GDTE_BASIC_COUNT_
} gdte_basic_t;

/** The predefined type of a builtin element kind; a permanent handle (freeing it is a no-op). */
GDTE_API gdte_type_h gdte_type_predefined(gdte_basic_t basic);
/** A builtin element of @p size bytes (1..2^20) with signature tag @p tag: elements of equal
 * tags match in a signature check. Use this for elements of an MPI outside the list above.
 * Its alignment (for extent padding) is the largest power of two dividing @p size, at most 16. */
GDTE_API gdte_status_t gdte_type_create_basic(int64_t size, uint32_t tag, gdte_type_h *type_p);

/** @p count consecutive elements of @p old (MPI_Type_contiguous). */
GDTE_API gdte_status_t gdte_type_create_contiguous(int64_t count, gdte_type_h old,
                                                   gdte_type_h *type_p);
/** @p stride in elements of @p old's extent. */
GDTE_API gdte_status_t gdte_type_create_vector(int64_t count, int64_t blocklength,
                                               int64_t stride, gdte_type_h old,
                                               gdte_type_h *type_p);
/** @p stride in bytes. */
GDTE_API gdte_status_t gdte_type_create_hvector(int64_t count, int64_t blocklength,
                                                int64_t stride, gdte_type_h old,
                                                gdte_type_h *type_p);
/** Displacements in multiples of @p old's extent. */
GDTE_API gdte_status_t gdte_type_create_indexed(int64_t count, const int64_t *blocklengths,
                                                const int64_t *displacements, gdte_type_h old,
                                                gdte_type_h *type_p);
/** Displacements in bytes. */
GDTE_API gdte_status_t gdte_type_create_hindexed(int64_t count, const int64_t *blocklengths,
                                                 const int64_t *displacements, gdte_type_h old,
                                                 gdte_type_h *type_p);
/** Blocks of one length; displacements in multiples of @p old's extent. */
GDTE_API gdte_status_t gdte_type_create_indexed_block(int64_t count, int64_t blocklength,
                                                      const int64_t *displacements,
                                                      gdte_type_h old, gdte_type_h *type_p);
/** Blocks of one length; displacements in bytes. */
GDTE_API gdte_status_t gdte_type_create_hindexed_block(int64_t count, int64_t blocklength,
                                                       const int64_t *displacements,
                                                       gdte_type_h old, gdte_type_h *type_p);
/** Displacements in bytes. */
GDTE_API gdte_status_t gdte_type_create_struct(int64_t count, const int64_t *blocklengths,
                                               const int64_t *displacements,
                                               const gdte_type_h *types, gdte_type_h *type_p);

/** Array storage order of subarray and darray types. */
typedef enum {
    GDTE_ORDER_C = 0,      /**< row-major: the last dimension is contiguous */
    GDTE_ORDER_FORTRAN = 1 /**< column-major: the first dimension is contiguous */
} gdte_order_t;
/** A @p ndims -dimensional sub-block of an array (MPI_Type_create_subarray); the extent is
 * the whole array's. */
GDTE_API gdte_status_t gdte_type_create_subarray(int ndims, const int64_t *sizes,
                                                 const int64_t *subsizes, const int64_t *starts,
                                                 gdte_order_t order, gdte_type_h old,
                                                 gdte_type_h *type_p);

/** How a darray dimension is distributed over the process grid. */
typedef enum {
    GDTE_DISTRIBUTE_BLOCK = 0,  /**< contiguous blocks */
    GDTE_DISTRIBUTE_CYCLIC = 1, /**< round robin in blocks of the distribution argument */
    GDTE_DISTRIBUTE_NONE = 2    /**< not distributed */
} gdte_distribute_t;
/** MPI's default distribution argument. */
#define GDTE_DISTRIBUTE_DFLT_DARG (-1)
/** Process @p rank 's part of a distributed array (MPI_Type_create_darray). */
GDTE_API gdte_status_t gdte_type_create_darray(int size, int rank, int ndims,
                                               const int64_t *gsizes,
                                               const gdte_distribute_t *distribs,
                                               const int64_t *dargs, const int64_t *psizes,
                                               gdte_order_t order, gdte_type_h old,
                                               gdte_type_h *type_p);
/** @p old with explicit bounds @p lb and @p extent (MPI_Type_create_resized). */
GDTE_API gdte_status_t gdte_type_create_resized(gdte_type_h old, int64_t lb, int64_t extent,
                                                gdte_type_h *type_p);
/** A new handle on the same type (MPI_Type_dup). */
GDTE_API gdte_status_t gdte_type_dup(gdte_type_h old, gdte_type_h *type_p);

/** Build the canonical form and the pack plan (host side; device copies are made on first
 * use on each device, or ahead with gdte_type_prepare_device()). Idempotent. */
GDTE_API gdte_status_t gdte_type_commit(gdte_type_h type);
/** Upload the committed type's plan to the current GPU now, so the first pack does not pay for
 * it. GDTE_ERR_NO_DEVICE without a GPU backend. */
GDTE_API gdte_status_t gdte_type_prepare_device(gdte_type_h type);
/** Release the caller's reference and set *type_p to NULL. The type lives on while a parent
 * type or an operation in flight holds it. Freeing a predefined type only clears *type_p. */
GDTE_API gdte_status_t gdte_type_free(gdte_type_h *type_p);

/** How a committed type will be packed. */
typedef enum {
    GDTE_LAYOUT_EMPTY = 0,   /**< no data */
    GDTE_LAYOUT_CONTIG = 1,  /**< one contiguous block */
    GDTE_LAYOUT_STRIDED = 2, /**< equal blocks on a regular grid of up to 8 dimensions */
    GDTE_LAYOUT_UNITS = 3    /**< irregular: an array of work units (DEV) */
} gdte_layout_kind_t;

/** What gdte_type_get_info() reports about a type. */
typedef struct gdte_type_info {
    int64_t size;         /**< bytes of data in one element */
    int64_t extent;       /**< ub - lb */
    int64_t lb;           /**< lower bound (MPI's lb) */
    int64_t true_lb;      /**< lowest byte touched, relative to the buffer */
    int64_t true_extent;  /**< highest byte touched + 1 - true_lb */
    int is_contiguous;    /**< data is one dense block and extent == size */
    int64_t num_blocks;   /**< contiguous blocks in one element (after merging) */
    int depth;            /**< nesting depth of the constructor tree (predefined: 0) */
    int committed;        /**< gdte_type_commit() was called */
    /* Available once committed: */
    gdte_layout_kind_t layout; /**< how it is packed (committed types only, like the fields below) */
    int ndims;            /**< STRIDED: dimensions; UNITS: dimensions repeating the units */
    int64_t block_bytes;  /**< STRIDED/CONTIG: bytes per block */
    int64_t num_units;    /**< UNITS: work units per repetition */
    int64_t plan_bytes;   /**< host memory the plan uses */
} gdte_type_info_t;

/** Size, bounds and, once committed, the plan of @p type. */
GDTE_API gdte_status_t gdte_type_get_info(gdte_type_h type, gdte_type_info_t *info_p);
/** Bytes that packing @p count elements produces. */
GDTE_API gdte_status_t gdte_type_pack_size(int64_t count, gdte_type_h type, int64_t *size_p);
/** Signature of @p count elements: number of builtin elements and a hash of their sequence.
 * Two types may exchange data when their signatures are equal. */
GDTE_API gdte_status_t gdte_type_signature(int64_t count, gdte_type_h type, uint64_t *hash_p,
                                           int64_t *nelems_p);
/** A short text of the canonical form, for logs and gdte_info (NUL-terminated, truncated to
 * @p len). */
GDTE_API gdte_status_t gdte_type_describe(gdte_type_h type, char *buf, size_t len);
/**@}*/

/* ------------------------------------------------------------------------------------------ */
/** @name Pack and unpack
 * Both work on a byte range of the packed stream of `count` elements of `type`: the stream a
 * full MPI_Pack would produce. Ranges may be packed and unpacked independently, in any order.
 * Buffers may be host or device memory (detected; the GPU backend runs when any side is on a
 * device). */
/**@{*/
typedef void *gdte_stream_t; /**< a cudaStream_t / hipStream_t; NULL: the default stream */

enum {
    GDTE_PACK_FIELD_OFFSET = 1u << 0,    /**< offset is set (default 0) */
    GDTE_PACK_FIELD_MAX_BYTES = 1u << 1, /**< max_bytes is set (default: all) */
    GDTE_PACK_FIELD_STREAM = 1u << 2,    /**< stream is set (default: the default stream) */
    GDTE_PACK_FIELD_FLAGS = 1u << 3,     /**< flags is set */
};
enum {
    /** Return when the work is queued on the stream, not when it is done (GPU only). */
    GDTE_PACK_FLAG_ASYNC = 1u << 0,
    /** Run on the host even if a GPU is present. A buffer in device memory is then
     * GDTE_ERR_MEMORY_KIND (nothing is touched). */
    GDTE_PACK_FLAG_HOST = 1u << 1,
};
/** Options of gdte_pack() and gdte_unpack(). */
typedef struct gdte_pack_params {
    uint64_t field_mask;  /**< GDTE_PACK_FIELD_*: which fields below are set */
    int64_t offset;       /**< first byte of the packed stream to produce or consume */
    int64_t max_bytes;    /**< at most this many bytes */
    gdte_stream_t stream; /**< GPU stream the work goes on */
    uint64_t flags;       /**< GDTE_PACK_FLAG_* */
} gdte_pack_params_t;

/**
 * Pack bytes [offset, offset + n) of the packed stream of @p count elements of @p type at
 * @p inbuf into @p outbuf, where n = min(max_bytes, outsize, packed size - offset).
 * An offset equal to the packed size gives n = 0; larger is GDTE_ERR_OFFSET.
 * On error nothing is written.
 */
GDTE_API gdte_status_t gdte_pack(const void *inbuf, int64_t count, gdte_type_h type,
                                 void *outbuf, int64_t outsize, const gdte_pack_params_t *params,
                                 int64_t *packed_p);
/** The inverse of gdte_pack: scatter @p insize bytes of packed stream, which start at
 * params->offset, into @p outbuf. */
GDTE_API gdte_status_t gdte_unpack(const void *inbuf, int64_t insize, void *outbuf,
                                   int64_t count, gdte_type_h type,
                                   const gdte_pack_params_t *params, int64_t *unpacked_p);
/**@}*/

/* ------------------------------------------------------------------------------------------ */
/** @name Memory */
/**@{*/
/** Kinds of memory a buffer may be in. */
typedef enum {
    GDTE_MEM_HOST = 0,    /**< pageable host memory */
    GDTE_MEM_PINNED = 1,  /**< page-locked host memory registered with the GPU runtime */
    GDTE_MEM_DEVICE = 2,  /**< device memory */
    GDTE_MEM_MANAGED = 3, /**< managed (unified) memory */
} gdte_mem_kind_t;

/** Where a buffer lives (gdte_mem_query()). */
typedef struct gdte_mem_info {
    gdte_mem_kind_t kind; /**< the kind of memory */
    int device; /**< owning device for DEVICE/MANAGED, else -1 */
} gdte_mem_info_t;

/** Where @p ptr lives (cached lookups). Host memory without a GPU backend. */
GDTE_API gdte_status_t gdte_mem_query(const void *ptr, gdte_mem_info_t *info_p);
/**@}*/

/* ------------------------------------------------------------------------------------------ */
/** @name Messages between processes
 * Send and receive `count` elements of a gdte type, in host or device memory, to and from
 * another process, over UCX (needs a build with GDTE_WITH_UCX; otherwise every call returns
 * GDTE_ERR_UNSUPPORTED). A communicator is a set of `size` processes that found each other
 * through a caller-provided allgather (MPI_Allgather in an MPI program). Messages match by
 * (peer, tag) in posting order; the sender and receiver types may differ when their type
 * signatures are equal. Large messages move in fragments with pack, transfer and unpack
 * overlapped (knobs GDTE_FRAG_SIZE, GDTE_PIPELINE_DEPTH, GDTE_PROTOCOL, GDTE_STAGING_MAX,
 * GDTE_RDMA_LOCAL_COPY, GDTE_TIMEOUT).
 *
 * Progress happens inside gdte_comm_progress(), gdte_msg_test() and gdte_msg_wait() only: a
 * process that stops calling them stalls its peers. A communicator and its requests must be
 * used by one thread at a time. A peer that dies, a transport error, or a transfer that
 * makes no progress for GDTE_TIMEOUT seconds completes the requests involved with an error;
 * no call blocks forever on a failed peer. Call gdte_init() first. */
/**@{*/
/** A communicator: processes that can message each other (opaque handle). */
typedef struct gdte_comm *gdte_comm_h;
/** A message in flight (opaque handle), completed by gdte_msg_test() or gdte_msg_wait(). */
typedef struct gdte_msg_req *gdte_msg_req_h;

/** Gather @p len bytes from every process: @p all receives size * len bytes, process i's
 * contribution at offset i * len (MPI_Allgather of bytes). Returns 0 on success. */
typedef int (*gdte_allgather_fn_t)(const void *mine, size_t len, void *all, void *arg);

enum {
    GDTE_COMM_FIELD_RANK = 1u << 0,          /**< rank is set (required) */
    GDTE_COMM_FIELD_SIZE = 1u << 1,          /**< size is set (required) */
    GDTE_COMM_FIELD_ALLGATHER = 1u << 2,     /**< allgather is set (required) */
    GDTE_COMM_FIELD_ALLGATHER_ARG = 1u << 3, /**< allgather_arg is set (default NULL) */
};
/** Options of gdte_comm_create(). */
typedef struct gdte_comm_params {
    uint64_t field_mask;           /**< GDTE_COMM_FIELD_*: which fields below are set */
    int rank;                      /**< this process, 0 <= rank < size */
    int size;                      /**< number of processes */
    gdte_allgather_fn_t allgather; /**< used during gdte_comm_create only */
    void *allgather_arg;           /**< passed to allgather */
} gdte_comm_params_t;

/** Create a communicator: a UCX context, a worker, and (lazily) one endpoint per peer.
 * Collective: every process of the set calls it (allgather runs twice). */
GDTE_API gdte_status_t gdte_comm_create(const gdte_comm_params_t *params, gdte_comm_h *comm_p);
/** Destroy a communicator (local). Requests still in flight complete with
 * GDTE_ERR_CANCELED and must still be tested, waited or freed. To avoid error reports at
 * the peers, synchronise (e.g. a barrier) after the last message and before destroying. */
GDTE_API gdte_status_t gdte_comm_destroy(gdte_comm_h comm);
/** Drive communication once (never blocks). GDTE_OK, or GDTE_ERR_INVALID_ARG. */
GDTE_API gdte_status_t gdte_comm_progress(gdte_comm_h comm);

/** A receive from any peer. */
#define GDTE_ANY_PEER (-1)

/** How a message moves. The receiver chooses, from the two sides' shapes. */
typedef enum {
    GDTE_PROTOCOL_AUTO = 0,      /**< choose by size, locality and capability */
    GDTE_PROTOCOL_EAGER = 1,     /**< small: packed bytes travel with the handshake */
    GDTE_PROTOCOL_COPYINOUT = 2, /**< fragments through pinned host staging on both sides */
    GDTE_PROTOCOL_RDMA = 3,      /**< same node, device memory: the receiver reads the
                                      sender's device fragment ring over GPU IPC */
} gdte_protocol_t;
/** "auto", "eager", "copyinout", "rdma"; never NULL. */
GDTE_API const char *gdte_protocol_name(gdte_protocol_t protocol);

enum {
    GDTE_MSG_FIELD_TAG_MASK = 1u << 0,  /**< tag_mask is set (receives; default all ones) */
    GDTE_MSG_FIELD_FLAGS = 1u << 1,     /**< flags is set */
    GDTE_MSG_FIELD_PROTOCOL = 1u << 2,  /**< protocol is set (default GDTE_PROTOCOL knob) */
    GDTE_MSG_FIELD_FRAG_SIZE = 1u << 3, /**< frag_size is set (default GDTE_FRAG_SIZE) */
    GDTE_MSG_FIELD_DEPTH = 1u << 4,     /**< depth is set (default GDTE_PIPELINE_DEPTH) */
};
enum {
    /** Accept any sender signature (MPI_PACKED, MPI_BYTE-as-raw-bytes); either side may set it. */
    GDTE_MSG_FLAG_ANY_SIGNATURE = 1u << 0,
};
/** Options of one message. On a send, protocol/frag_size/depth bound what the sender
 * offers; on a receive they choose among it (the receiver drives the transfer). */
typedef struct gdte_msg_params {
    uint64_t field_mask;      /**< GDTE_MSG_FIELD_*: which fields below are set */
    uint64_t tag_mask;        /**< receive matches when (msg_tag ^ tag) & tag_mask == 0 */
    uint64_t flags;           /**< GDTE_MSG_FLAG_* */
    gdte_protocol_t protocol; /**< force a protocol; one that cannot run falls back */
    int64_t frag_size;        /**< pipeline fragment bytes (0: chosen by message size) */
    int depth;                /**< fragments in flight, 1..64 */
} gdte_msg_params_t;

/** What a completed request did. */
typedef struct gdte_msg_status {
    gdte_status_t status;     /**< GDTE_OK or why the message failed */
    int peer;                 /**< the other process */
    uint64_t tag;             /**< the message's tag */
    int64_t bytes;            /**< packed bytes delivered (receive) or accepted (send) */
    gdte_protocol_t protocol; /**< how it moved */
} gdte_msg_status_t;

/** Start sending @p count elements of @p type at @p buf to @p peer. The buffer must stay
 * untouched until the request completes.
 * Errors found at once (bad arguments, failed peer) are returned and no request is made. */
GDTE_API gdte_status_t gdte_msg_isend(gdte_comm_h comm, const void *buf, int64_t count, gdte_type_h type,
                                      int peer, uint64_t tag, const gdte_msg_params_t *params,
                                      gdte_msg_req_h *req_p);
/** Start receiving up to @p count elements of @p type into @p buf from @p peer
 * (or GDTE_ANY_PEER). A longer message completes with GDTE_ERR_TRUNCATE, having written the
 * bytes that fit and nothing past them; a shorter one is delivered as it is (status bytes); a
 * message whose signature differs from the receive's (or from that of as many whole receive
 * elements, when shorter) completes with GDTE_ERR_MISMATCH and writes nothing. */
GDTE_API gdte_status_t gdte_msg_irecv(gdte_comm_h comm, void *buf, int64_t count, gdte_type_h type, int peer,
                                      uint64_t tag, const gdte_msg_params_t *params, gdte_msg_req_h *req_p);
/** Progress, then: GDTE_INPROGRESS if the request is still in flight; otherwise its final
 * status (GDTE_OK or an error), *status_p filled if not NULL, the request freed and *req_p set
 * to NULL. A NULL *req_p is GDTE_OK with nothing to do. A send whose receiver reported
 * GDTE_ERR_MISMATCH fails with it (a small message sent eagerly completes before the receiver
 * checks it, and succeeds); on GDTE_ERR_TRUNCATE the send succeeds (as in MPI). */
GDTE_API gdte_status_t gdte_msg_test(gdte_msg_req_h *req_p, gdte_msg_status_t *status_p);
/** gdte_msg_test until it is not GDTE_INPROGRESS. */
GDTE_API gdte_status_t gdte_msg_wait(gdte_msg_req_h *req_p, gdte_msg_status_t *status_p);
/** Cancel a receive that is not matched yet: it completes with GDTE_ERR_CANCELED. Returns
 * GDTE_OK if it was canceled, GDTE_INPROGRESS if it was already matched (it goes on). */
GDTE_API gdte_status_t gdte_msg_cancel(gdte_msg_req_h req);
/** Progress, then look for a message a receive of (@p peer, @p tag, @p tag_mask) would
 * match, without receiving it: *flag_p = 1 and *status_p (peer, tag, bytes) when found. */
GDTE_API gdte_status_t gdte_msg_iprobe(gdte_comm_h comm, int peer, uint64_t tag, uint64_t tag_mask, int *flag_p,
                                       gdte_msg_status_t *status_p);
/**@}*/

#ifdef __cplusplus
}
#endif
#endif /* GDTE_H */
