/* SPDX-License-Identifier: Apache-2.0 */
/*
 * recap.h — the whole public C ABI of recap.
 *
 * Conventions: every call returns recap_status_t (RECAP_OK = 0, errors negative); outputs come
 * last and are written only on success; on failure recap_last_error() holds a message for the
 * calling thread. Handles are opaque.
 */
#ifndef RECAP_H
#define RECAP_H

#include <stddef.h>
#include <stdint.h>

#include "recap/philox.h"
#include "recap/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* librecap is built with hidden visibility; only RECAP_API functions are exported (the linker
 * version script, src/librecap.map, gives each the version that added it). The one export macro:
 * the interposed CUDA entry points and the test doubles use it too. */
#define RECAP_API __attribute__((visibility("default")))

/* ---------------------------------------------------------------- status, version, errors */

typedef enum recap_status {
    RECAP_OK = 0,
    RECAP_ERR_INVALID_ARG = -1,      /* NULL handle or pointer, bad value */
    RECAP_ERR_NO_MEMORY = -2,        /* host or device allocation failed */
    RECAP_ERR_NO_DRIVER = -3,        /* no CUDA driver could be loaded */
    RECAP_ERR_NO_DEVICE = -4,        /* no such CUDA device */
    RECAP_ERR_WRONG_DEVICE = -5,     /* buffer or stream belongs to another device */
    RECAP_ERR_CUDA = -6,             /* a CUDA driver call failed (message names it) */
    RECAP_ERR_MISALIGNED = -7,       /* Philox offset not a multiple of 4 */
    RECAP_ERR_NOT_FOUND = -8,        /* unknown name */
    RECAP_ERR_EXISTS = -9,           /* name already present */
    RECAP_ERR_DUPLICATE_SEED = -10,  /* seed already used by this tracker */
    RECAP_ERR_STATE = -11,           /* call not allowed in the object's current state/order */
    RECAP_ERR_NOT_REGISTERED = -12,  /* generator not primed for the running capture */
    RECAP_ERR_CORRUPT = -13,         /* serialized data damaged or truncated */
    RECAP_ERR_VERSION = -14,         /* serialized data of an unknown format version */
    RECAP_ERR_OPTIONS_DIFFER = -15,  /* already initialized with other options */
    RECAP_ERR_UNSUPPORTED = -16,     /* not supported by this build, driver or device */
    RECAP_ERR_BUSY = -17             /* resource held by someone else (e.g. CUPTI) */
} recap_status_t;

/* Handles: a generator, tracker, snapshot, states object, plain host, region, manager or
 * checkpoint handed to a call after it was destroyed (a double destroy included), or one that
 * never came from recap, gets RECAP_ERR_INVALID_ARG wherever recap can tell (its memory not yet
 * reused by a new object of the same kind); destroy tells without reading the object. */

/* (major << 16) | minor of the ABI this library implements. recap_version_string() is the
 * library's RECAP_VERSION_STRING (recap/version.h has the headers' own). */
RECAP_API int recap_abi_version(void);
RECAP_API const char *recap_version_string(void);
/* Text for a status; never NULL. */
RECAP_API const char *recap_strerror(recap_status_t status);
/* The message of the calling thread's last failed call ("" when none). */
RECAP_API const char *recap_last_error(void);

/* ---------------------------------------------------------------- log */

/*
 * recap's log, for a host's own lines too (ABI 1.6), so that a job has one log: the Python
 * package writes its lines through it. RECAP_LOG=warn|info|debug chooses the levels written
 * (none by default); lines go to stderr, or to RECAP_LOG_FILE ("%h": host name, "%p": pid),
 * each one write, as
 *     [TIME ]HOST:PID:TID [RANK] recap LEVEL message
 * with TIME (UTC, ISO 8601) under RECAP_LOG_TIME=1 and RANK when a launcher set one (RANK,
 * OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK).
 */
typedef enum recap_log_level {
    RECAP_LOG_WARN = 1,
    RECAP_LOG_INFO = 2,
    RECAP_LOG_DEBUG = 3,
    /* A warning written also when RECAP_LOG is not set (RECAP_LOG=off or 0 silences it): for
     * the few mistakes a user must hear of without asking. */
    RECAP_LOG_WARN_UNLESS_OFF = 4
} recap_log_level_t;

/* Writes `message` as one line of recap's log at `level`: RECAP_OK, writing nothing, when
 * RECAP_LOG leaves that level out. A message is always one line: its control characters are
 * written escaped (newline as \n, carriage return \r, tab \t, any other as \xNN), so no caller
 * can add lines of its own; a line longer than 1 KiB is cut. RECAP_ERR_INVALID_ARG for a level
 * that is not one of the four or a NULL message. */
RECAP_API recap_status_t recap_log_write(recap_log_level_t level, const char *message);

/* ---------------------------------------------------------------- CUDA environment */

/* Loads the CUDA driver if it is not loaded yet. RECAP_ERR_NO_DRIVER when there is none. */
RECAP_API recap_status_t recap_driver_version(int *version_p);
RECAP_API recap_status_t recap_device_count(int *count_p);
/* Name, compute capability and total memory of a device. */
RECAP_API recap_status_t recap_device_info(int device, char *name, size_t name_len, int *cc_major_p,
                                 int *cc_minor_p, size_t *total_mem_p);

/* A CUDA stream (a CUstream or cudaStream_t; NULL is the legacy default stream). */
typedef void *recap_stream_t;

/* Device memory through the driver, in the device's primary context: for hosts without an
 * allocator of their own (the plain-C host operations), tools and tests. Copies are synchronous
 * and complete when they return: the bytes are in place for any work launched afterwards, on
 * recap's streams (non-blocking) too; a copy to the device from pageable memory is not left
 * running behind the call as a plain cuMemcpyHtoD may be. They start after the legacy stream's
 * earlier work, not after earlier work on non-blocking streams: synchronize the stream that
 * produced or still reads the memory first. */
RECAP_API recap_status_t recap_device_alloc(int device, size_t bytes, void **ptr_p);
RECAP_API recap_status_t recap_device_free(int device, void *ptr);
RECAP_API recap_status_t recap_memcpy_to_device(int device, void *dst, const void *src, size_t bytes);
RECAP_API recap_status_t recap_memcpy_to_host(int device, void *dst, const void *src, size_t bytes);

/* Stream-ordered host work, for hosts whose buffers are raw device memory and whose steps run in
 * CUDA graphs: inside a capture each call becomes a graph node (a copy or a host node), replayed
 * with every launch. The host side of an asynchronous copy must be pinned memory
 * (recap_host_alloc), and a host function must not call CUDA (a CUDA rule for host nodes).
 * RECAP_ERR_UNSUPPORTED when the driver lacks the entry point. */
RECAP_API recap_status_t recap_host_alloc(int device, size_t bytes, void **ptr_p);
RECAP_API recap_status_t recap_host_free(int device, void *ptr);
RECAP_API recap_status_t recap_memcpy_to_device_async(int device, void *dst, const void *src,
                                                      size_t bytes, recap_stream_t stream);
RECAP_API recap_status_t recap_memcpy_to_host_async(int device, void *dst, const void *src,
                                                    size_t bytes, recap_stream_t stream);
RECAP_API recap_status_t recap_stream_host_func(int device, recap_stream_t stream,
                                                void (*fn)(void *data), void *data);

/* ---------------------------------------------------------------- generators */

typedef struct recap_generator *recap_generator_h;

#define RECAP_DEVICE_HOST (-1)
/* Generator state bytes: seed then offset, both little-endian uint64 (torch.cuda.get_rng_state). */
#define RECAP_STATE_BYTES 16

/* Creates a generator for a CUDA device (0..count-1) or the host (RECAP_DEVICE_HOST), seeded
 * with 67280421310721 (PyTorch's default seed) at offset 0. */
RECAP_API recap_status_t recap_generator_create(int device, recap_generator_h *gen_p);
/* RECAP_ERR_STATE, destroying nothing, while a tracker drives the generator (as its generator
 * or host generator): destroy the tracker first. */
RECAP_API recap_status_t recap_generator_destroy(recap_generator_h gen);
RECAP_API recap_status_t recap_generator_device(recap_generator_h gen, int *device_p);
/* Seeds the generator and resets its offset to 0. */
RECAP_API recap_status_t recap_generator_manual_seed(recap_generator_h gen, uint64_t seed);
RECAP_API recap_status_t recap_generator_seed(recap_generator_h gen, uint64_t *seed_p);
RECAP_API recap_status_t recap_generator_offset(recap_generator_h gen, uint64_t *offset_p);
/* While a capture a device generator takes part in runs (it drew there, or was set there), its
 * value is the capture's, for every thread (frameworks run backward passes on worker threads):
 * get_state, set_state and snapshots read and write the offset relative to that capture. */
RECAP_API recap_status_t recap_generator_get_state(recap_generator_h gen, uint8_t state[RECAP_STATE_BYTES]);
/* RECAP_ERR_MISALIGNED when the offset is not a multiple of 4; the generator is unchanged.
 * Inside a running capture (see get_state), a value whose offset lies below the launches' base
 * (a state saved before eager draws the capture does not hold) or with another seed fails that
 * capture at its end (recap_capture_ended says why): no launch could draw it again. */
RECAP_API recap_status_t recap_generator_set_state(recap_generator_h gen,
                                         const uint8_t state[RECAP_STATE_BYTES]);
/* Reserves n values per thread for a kernel about to run on `stream` (NULL for host
 * generators): fills *args with the arguments to draw with (curand_init(seed, thread, offset)
 * layout; pass them to recap_philox_unpack in the kernel) and advances the offset by
 * round_up(n, 4). When `stream` is capturing, the arguments point at the generator's device
 * slot and the offset relative to the capture advances instead. RECAP_ERR_NOT_REGISTERED when
 * the stream captures but recap was not told of the capture or the generator was not primed;
 * RECAP_ERR_WRONG_DEVICE for a stream of another device than the generator's. An eager reserve
 * (a stream not capturing) while another stream captures draws at the generator's eager offset,
 * which no launch of that graph draws; but once the generator drew or was set inside that
 * running capture, its value is the capture's (see get_state) and an eager draw could not draw
 * from it: RECAP_ERR_STATE until the capture ends (draw on the capturing stream, or from
 * another generator). */
RECAP_API recap_status_t recap_generator_reserve(recap_generator_h gen, recap_stream_t stream,
                                                 uint64_t n, recap_philox_args_t *args_p);

/*
 * Bulk fills. The words equal cuRAND's curandGenerate (PHILOX4_32_10, default ordering) with the
 * generator's seed and generator offset 65536 * offset; floats equal curandGenerateUniform and
 * doubles curandGenerateUniformDouble. The offset advances by 4 * ceil(n / 262144) for n words
 * or floats and by 8 * ceil(n / 262144) for n doubles (each takes two words).
 * Host generators fill host memory (stream ignored, must be NULL); device generators fill device
 * memory of their device, asynchronously on `stream` (RECAP_ERR_WRONG_DEVICE for a stream of
 * another device). n = 0 is an error, and so is an n whose bytes exceed 2^57 (no address space
 * holds them).
 */
RECAP_API recap_status_t recap_generator_fill_u32(recap_generator_h gen, recap_stream_t stream,
                                        uint32_t *buf, size_t n);
RECAP_API recap_status_t recap_generator_fill_uniform(recap_generator_h gen, recap_stream_t stream,
                                            float *buf, size_t n);
RECAP_API recap_status_t recap_generator_fill_uniform_double(recap_generator_h gen, recap_stream_t stream,
                                                   double *buf, size_t n);

/* ---------------------------------------------------------------- framework generators */

/*
 * A framework's own generator as a recap generator (ABI 1.2). Training jobs draw through their
 * framework's generator (PyTorch's dropout, randn, fused attention all take their Philox seed
 * and offset from torch's CUDA generator), so the tracker must switch *that* generator inside a
 * fork. A framework describes its generator with this table and gets a recap_generator_h that the
 * tracker (recap_tracker_params_t.generator or .host_generator), per-rank seeding and snapshots
 * accept wherever they accept recap's own generators: forks then install the named state in the
 * framework's generator, seeding seeds it, snapshots read and write it.
 *
 * Two forms, as in PyTorch:
 * - the value form (required): the generator's current state as 16 bytes (RECAP_STATE_BYTES:
 *   seed then offset, little-endian; torch.cuda.get_rng_state's layout). set_state must refuse an
 *   offset that is not a multiple of 4 (RECAP_ERR_MISALIGNED), as recap does.
 * - the graph-safe form (all of state_clone .. state_retain, or none; needed by
 *   RECAP_TRACKER_GRAPH_SAFE trackers): state objects the generator can have installed as its
 *   current state, so a draw through the generator advances the installed object (PyTorch's
 *   graphsafe_get_state / graphsafe_set_state). Every object state_create and state_clone hand
 *   to recap, and every state_retain recap makes, is one reference that recap gives back
 *   exactly once with state_release. state_current lends the installed object without a
 *   reference (recap retains it when it keeps it); it should return the same `obj` pointer for
 *   the object last installed, another pointer being taken for another state object.
 *   state_install takes no reference from recap (the framework keeps what it needs). A fork and
 *   its unfork cost two state_current and two state_install calls.
 *
 * Every operation gets `framework` (the pointer given at creation) and reports failure with a
 * status other than RECAP_OK, which recap returns to its caller after undoing what it had
 * changed (a fork, seeding or snapshot restore is all or nothing). Operations run in the thread
 * of the recap call, while recap holds the tracker's and the generator's locks: they must not
 * call recap's tracker, snapshot or generator functions (such calls fail with RECAP_ERR_STATE).
 *
 * recap's fills (recap_generator_fill_*) also draw from a framework generator, by value: they read
 * the current state, advance it and write it back; on a device generator outside a capture only
 * (RECAP_ERR_UNSUPPORTED while the stream captures: inside a capture the framework's own kernels
 * draw). recap_generator_reserve is RECAP_ERR_UNSUPPORTED on a framework generator.
 */
#define RECAP_FRAMEWORK_OPS_VERSION 1

typedef struct recap_framework_ops {
    unsigned version;  /* RECAP_FRAMEWORK_OPS_VERSION */
    const char *name;  /* shown by recap-probe and in logs, e.g. "torch.cuda:0"; copied */
    /* Value form (required). */
    recap_status_t (*get_state)(void *framework, uint8_t state[RECAP_STATE_BYTES]);
    recap_status_t (*set_state)(void *framework, const uint8_t state[RECAP_STATE_BYTES]);
    /* Graph-safe form. state_create is optional: without it recap clones the current state
     * object and writes (seed, 0) into the clone, as Megatron does. */
    recap_status_t (*state_create)(void *framework, uint64_t seed, void **obj_p);
    recap_status_t (*state_clone)(void *framework, void *obj, void **clone_p);
    recap_status_t (*state_install)(void *framework, void *obj);
    recap_status_t (*state_current)(void *framework, void **obj_p);
    recap_status_t (*state_get)(void *framework, void *obj, uint8_t state[RECAP_STATE_BYTES]);
    recap_status_t (*state_set)(void *framework, void *obj,
                                const uint8_t state[RECAP_STATE_BYTES]);
    void (*state_release)(void *framework, void *obj);
    recap_status_t (*state_retain)(void *framework, void *obj);
    /* Optional: whether a draw from a state object nobody registered with a capture is rejected
     * by the framework inside a capture (1) or not (0): what Megatron's
     * cudagraph_needs_generator_registration asks of torch. */
    recap_status_t (*needs_registration)(void *framework, int *needs_p);
} recap_framework_ops_t;

/* Creates a generator backed by the framework's: `ops` (copied) and `framework` must stay valid
 * until recap_generator_destroy. `device` is the framework generator's device (a CUDA ordinal or
 * RECAP_DEVICE_HOST); recap does not check it against the driver (the framework owns it).
 * RECAP_ERR_INVALID_ARG naming the missing operation for an incomplete table. */
RECAP_API recap_status_t recap_generator_create_framework(const recap_framework_ops_t *ops,
                                                          void *framework, int device,
                                                          recap_generator_h *gen_p);
/* 1 for a framework generator, 0 for one of recap's own. */
RECAP_API recap_status_t recap_generator_is_framework(recap_generator_h gen, int *is_framework_p);
/* Whether drawing from this generator's unregistered states inside a capture is rejected:
 * for a framework generator the framework answers (RECAP_ERR_UNSUPPORTED when its table has no
 * needs_registration); for recap's own generators it is recap_capture_needs_registration. */
RECAP_API recap_status_t recap_generator_needs_registration(recap_generator_h gen, int *needs_p);

/* The framework generators alive in this process (for recap-probe and reports). */
typedef struct recap_framework_info {
    char name[64];
    int device;
    int graph_safe; /* the table has the graph-safe form */
    int trackers;   /* trackers driving it now */
} recap_framework_info_t;
/* Writes up to `cap` entries and sets *count_p to how many exist. */
RECAP_API recap_status_t recap_framework_generators(recap_framework_info_t *info, size_t cap,
                                                    size_t *count_p);

/* ---------------------------------------------------------------- graph-safe RNG: captures */

/*
 * Inside a CUDA-graph capture, device generators hand out pointer-based Philox arguments (a
 * device slot holding seed and base offset, plus an offset relative to the capture), and each
 * launch of the resulting graph gets a fresh base: every replay draws new numbers, replays never
 * overlap eager draws, and K launches draw exactly what K eager runs of the same work would.
 *
 * recap learns of captures through events. Its hooks (LD_PRELOAD, CUPTI, CUDA injection) report
 * them for unmodified hosts; a host may also report its own (the recap_capture_* and
 * recap_graph_* calls below, in the order shown), or let recap drive the driver
 * (recap_stream_begin_capture ... recap_graph_launch).
 *
 * Launches of graphs drawing from one generator may come on different streams: recap orders
 * each after the last launch that drew from that generator on another stream (an event wait;
 * the first time, and with hosts that do not report recap_graph_launched, a device wait), so
 * they stay exact. The device wait (cuCtxSynchronize) fails, and invalidates, any capture running
 * in the context at that moment: a generator's first switch of stream should not happen while
 * another thread captures. A launch's offsets are taken when it is issued; cudaGraphUpload moves none.
 *
 * Graph composition (ABI 1.5). Every captured graph that draws ends in recap's advance node, and
 * the driver copies it wherever the graph goes. At instantiate, and at exec update, recap walks
 * the graph (child graph nodes at any depth) and gives the exec what all its parts draw, so:
 *  - exact: a captured graph embedded with cudaGraphAddChildGraphNode / cuGraphAddChildGraphNode
 *    (a child in a child, one child in several parents or twice in one, the parent cloned),
 *    cudaGraphExecUpdate / cuGraphExecUpdate from a graph with other draws (more, fewer, none),
 *    cudaGraphExecChildGraphNodeSetParams, graphs built node by node that copy a captured
 *    graph's kernel nodes together with its advance node, upload before the first launch,
 *    launches on several streams;
 *  - refused (RECAP_ERR_UNSUPPORTED from recap_graph_instantiated / recap_graph_exec_updated /
 *    recap_graph_exec_child_updated, a "recap:" warning through the hooks, whose CUDA call goes
 *    on): two parts of a graph drawing from one generator with no order between them (they
 *    would read the same offsets), including two captures appended to one graph
 *    (cudaStreamBeginCaptureToGraph) that draw from one generator, whose kernels recap cannot
 *    tell apart (capture the second into its own graph and add it as a child graph node after
 *    the first); recap's kernel nodes copied without their advance node; a
 *    conditional node (IF/WHILE/SWITCH) whose body draws (offsets are reserved on the host at
 *    launch, and the host cannot know how often a body runs, so K launches could not equal K
 *    eager runs); an exec instantiated with cudaGraphInstantiateFlagDeviceLaunch that draws
 *    (device-side launches are invisible to the host); a graph reported as a conditional body
 *    inside itself (what it draws has no bound). A refused exec still advances its
 *    generators by one run of what it draws at each host launch.
 *  - not detected: a host's own kernels that take recap_philox_args_t and are copied into a
 *    hand-built graph without recap's advance node (recap sees only its own kernels' parameters:
 *    copy whole captured graphs as child graph nodes instead); kernel nodes changed in an exec
 *    with cudaGraphExecKernelNodeSetParams or disabled with cudaGraphNodeSetEnabled; conditional
 *    bodies that no hook reported and the host did not report (recap_graph_conditional_added).
 * The driver API to list a graph's nodes (CUDA 11+) is needed; without it an exec draws what
 * its graph's capture drew. The walk has no limit of depth, nodes or bodies, and costs what a
 * walk of the graph's nodes and edges costs (once more per generator that two parts share);
 * when memory runs out it fails with RECAP_ERR_NO_MEMORY rather than guess.
 */
typedef void *recap_graph_t;      /* a CUgraph / cudaGraph_t */
typedef void *recap_graph_exec_t; /* a CUgraphExec / cudaGraphExec_t */
typedef void *recap_graph_node_t; /* a CUgraphNode / cudaGraphNode_t */
typedef enum recap_capture_mode {  /* the values of CUstreamCaptureMode */
    RECAP_CAPTURE_GLOBAL = 0,
    RECAP_CAPTURE_THREAD_LOCAL = 1,
    RECAP_CAPTURE_RELAXED = 2
} recap_capture_mode_t;

/* Before the host begins a capture on `stream`: primes every device generator state of the
 * stream's device (device slots allocated now, outside the capture). */
RECAP_API recap_status_t recap_capture_will_begin(recap_stream_t stream, recap_capture_mode_t mode);
/* After the capture began: binds it to the calling thread (draws on this thread, and draws on
 * `stream`, are captured). */
RECAP_API recap_status_t recap_capture_began(recap_stream_t stream);
/* Before the host ends the capture: captures the node that advances the generators' device
 * copies at the end of each launch. */
RECAP_API recap_status_t recap_capture_will_end(recap_stream_t stream);
/* After the capture ended with `graph` (NULL if it failed): attaches what the capture drew.
 * RECAP_ERR_UNSUPPORTED when something inside the capture made a correct replay impossible
 * (the message says what), e.g. a value-mode tracker fork changing the seed. */
RECAP_API recap_status_t recap_capture_ended(recap_stream_t stream, recap_graph_t graph);
RECAP_API recap_status_t recap_graph_instantiated(recap_graph_t graph, recap_graph_exec_t exec);
RECAP_API recap_status_t recap_graph_cloned(recap_graph_t original, recap_graph_t clone);
/* After cudaGraphExecUpdate / cuGraphExecUpdate succeeded: exec now draws what `graph` draws.
 * (ABI 1.5) */
RECAP_API recap_status_t recap_graph_exec_updated(recap_graph_exec_t exec, recap_graph_t graph);
/* After cudaGraphExecChildGraphNodeSetParams succeeded: child graph node `node` of exec now runs
 * `child`. RECAP_ERR_UNSUPPORTED when that makes two unordered parts draw from one generator.
 * (ABI 1.5) */
RECAP_API recap_status_t recap_graph_exec_child_updated(recap_graph_exec_t exec,
                                                        recap_graph_node_t node,
                                                        recap_graph_t child);
/* After a conditional node was added to `graph`: its body graphs (the driver cannot list them),
 * so instantiate can refuse a body that draws. RECAP_ERR_INVALID_ARG for more bodies than a
 * conditional node can have (its count is an unsigned int). (ABI 1.5) */
RECAP_API recap_status_t recap_graph_conditional_added(recap_graph_t graph, recap_graph_node_t node,
                                                       const recap_graph_t *bodies,
                                                       size_t nbodies);
RECAP_API recap_status_t recap_graph_destroyed(recap_graph_t graph);
RECAP_API recap_status_t recap_graph_exec_destroyed(recap_graph_exec_t exec);
/* Before each launch of `exec` on `stream`: advances its generators; in steady state it issues
 * no device work. */
RECAP_API recap_status_t recap_graph_will_launch(recap_graph_exec_t exec, recap_stream_t stream);
/* When the launch announced by recap_graph_will_launch did not happen. */
RECAP_API recap_status_t recap_graph_launch_failed(recap_graph_exec_t exec);
/* After a launch announced by recap_graph_will_launch was issued (ABI 1.5): where graphs drawing
 * from one generator launch on several streams, records the event the next launch on another
 * stream waits for. Does nothing otherwise (one thread-local load). A host that does not call it
 * still gets exact launches: recap then waits for the device at each change of stream. */
RECAP_API recap_status_t recap_graph_launched(recap_graph_exec_t exec, recap_stream_t stream);
/* For hosts without hooks, as the first thing inside a capture on `stream`: primes the device's
 * generator states (allocating under the relaxed capture mode) and reports the capture as begun.
 * Does nothing when the stream is not capturing. */
RECAP_API recap_status_t recap_capture_prime(recap_stream_t stream);
/* Whether this process needs explicit registration: captures a draw on a generator nobody
 * registered, on a private stream, and reports whether it was rejected (1: no hook is active,
 * report captures or call recap_capture_prime; 0: recap's hooks register automatically).
 * Needs a CUDA device; the result is cached. */
RECAP_API recap_status_t recap_capture_needs_registration(int *needs_p);

/* What the capture module has seen in this process (for recap-probe --run, tests and logs). */
typedef struct recap_capture_stats {
    uint64_t captures;        /* captures reported as begun */
    uint64_t graphs_with_rng; /* captures that ended with a graph drawing random numbers */
    uint64_t launches;        /* launches of graphs that draw random numbers */
    uint64_t slot_writes;     /* launches that had to rewrite stale device slots (device work) */
    uint64_t states_primed;   /* generator states given a device slot */
    uint64_t live_records;    /* graphs + execs recap holds RNG records for */
} recap_capture_stats_t;
RECAP_API recap_status_t recap_capture_stats(recap_capture_stats_t *stats_p);

/* recap drives the driver and reports the events itself (for C hosts, tools and tests). */
RECAP_API recap_status_t recap_stream_create(int device, recap_stream_t *stream_p);
RECAP_API recap_status_t recap_stream_destroy(recap_stream_t stream);
RECAP_API recap_status_t recap_stream_synchronize(recap_stream_t stream);
RECAP_API recap_status_t recap_stream_begin_capture(recap_stream_t stream, recap_capture_mode_t mode);
RECAP_API recap_status_t recap_stream_end_capture(recap_stream_t stream, recap_graph_t *graph_p);
/* Fails (RECAP_ERR_NO_MEMORY, the exec destroyed) when recap cannot record the exec's RNG
 * bookkeeping: its launches would not advance the generators. */
RECAP_API recap_status_t recap_graph_instantiate(recap_graph_t graph, recap_graph_exec_t *exec_p);
RECAP_API recap_status_t recap_graph_clone(recap_graph_t graph, recap_graph_t *clone_p);
RECAP_API recap_status_t recap_graph_launch(recap_graph_exec_t exec, recap_stream_t stream);
RECAP_API recap_status_t recap_graph_destroy(recap_graph_t graph);
RECAP_API recap_status_t recap_graph_exec_destroy(recap_graph_exec_t exec);

/* ---------------------------------------------------------------- interception front ends */

/*
 * How recap learns of the host's captures without the host's help: LD_PRELOAD=librecap-preload.so
 * (interposed runtime and driver graph entry points, plus dlsym/cuGetProcAddress so statically
 * linked cudart is seen too), a CUPTI callback subscriber installed by a host that dlopens recap,
 * or CUDA_INJECTION64_PATH=librecap.so. Exactly one reports events. RECAP_HOOKS=auto (default),
 * preload, cupti or off chooses; RECAP_LOG=warn|info|debug logs to stderr (or RECAP_LOG_FILE;
 * README lists every variable). RECAP_REPORT=FILE
 * writes what recap saw (one JSON line: version, time, host, pid, rank, front end, captures,
 * graphs, launches, states primed) at exit, appended to FILE so processes sharing it keep each
 * other's lines; "%p" in FILE is the pid, one file per process, "%h" the host name.
 */
typedef enum recap_hooks {
    RECAP_HOOKS_NONE = 0,
    RECAP_HOOKS_PRELOAD = 1,
    RECAP_HOOKS_CUPTI = 2,
    RECAP_HOOKS_INJECTION = 3
} recap_hooks_t;

/* The front end reporting this process's captures (RECAP_HOOKS_NONE: explicit mode). */
RECAP_API recap_status_t recap_hooks_active(recap_hooks_t *hooks_p);
/* Subscribes to CUPTI with only the callback ids recap needs. RECAP_OK and nothing done when
 * another recap front end is already active; RECAP_ERR_BUSY when another subscriber (a profiler)
 * holds CUPTI (the message names it when CUPTI does: recap_cupti_holder); RECAP_ERR_UNSUPPORTED when CUPTI cannot be loaded. On error recap keeps working
 * in explicit mode (hosts report captures or call recap_capture_prime). */
RECAP_API recap_status_t recap_hooks_install_cupti(void);
RECAP_API recap_status_t recap_hooks_uninstall_cupti(void);
/* Whether CUPTI could be subscribed now: 1 free, 0 held (by another subscriber or by recap). */
RECAP_API recap_status_t recap_cupti_is_free(int *free_p);
/* Who held CUPTI when it last refused recap (install or is_free), as CUPTI names it: CUDA 13's
 * CUPTI has cuptiSubscribe_v2, through which recap subscribes as "recap" and learns the holder
 * (a profiler's subscriber name). "" when CUPTI has not refused recap since recap last got it,
 * or did not say (an older CUPTI). 64 bytes hold any name. (ABI 1.3) */
RECAP_API recap_status_t recap_cupti_holder(char *name, size_t name_len);
/* A short name for a front end ("preload", "cupti", "injection", "none"). */
RECAP_API const char *recap_hooks_name(recap_hooks_t hooks);

/* ---------------------------------------------------------------- capture subscribers */

/*
 * Capture subscribers (ABI 1.2): the host's callbacks for the capture events recap sees, from
 * whichever front end reports them (LD_PRELOAD, CUPTI, injection) or from the host's own
 * recap_capture_* / recap_graph_* calls. This is how a framework adapter registers and primes
 * its generator's states for a graph recap saw being captured, including captures made by
 * libraries it did not write.
 *
 * A callback runs in the thread making the CUDA call, at the point the event names: WILL_BEGIN
 * before the capture begins on the stream (outside it, so allocating is safe), ENDED after it
 * ended (graph NULL when it failed), INSTANTIATED, WILL_LAUNCH before each launch of any graph
 * (not only those drawing random numbers), DESTROYED / EXEC_DESTROYED once the handle is gone.
 * Callbacks of one event run in subscription order, each once. A callback that fails (returns
 * anything but RECAP_OK) is counted and logged (RECAP_LOG=warn) and the host's call goes on.
 * A callback may use generators, trackers and snapshots and may call CUDA, but must not begin,
 * end or launch a capture or graph on the event's stream nor report capture events itself:
 * recap's recap_capture_* / recap_graph_* / recap_stream_*_capture calls made from inside a
 * callback fail with RECAP_ERR_STATE, and events that a callback's own CUDA calls cause reach
 * recap's bookkeeping but not the subscribers again. (Un)subscribing from inside a callback
 * fails with RECAP_ERR_STATE. With no subscriber an event costs one load.
 */
typedef enum recap_capture_event {
    RECAP_EVENT_CAPTURE_WILL_BEGIN = 0, /* stream, mode */
    RECAP_EVENT_CAPTURE_ENDED = 1,      /* stream, graph */
    RECAP_EVENT_GRAPH_INSTANTIATED = 2, /* graph, exec */
    RECAP_EVENT_GRAPH_WILL_LAUNCH = 3,  /* exec, stream */
    RECAP_EVENT_GRAPH_DESTROYED = 4,    /* graph */
    RECAP_EVENT_GRAPH_EXEC_DESTROYED = 5 /* exec */
} recap_capture_event_t;
#define RECAP_EVENT_MASK(event) (1u << (event))
#define RECAP_EVENT_MASK_ALL 0x3fu

typedef struct recap_capture_event_info {
    recap_capture_event_t event;
    recap_hooks_t source;      /* the front end that saw it; RECAP_HOOKS_NONE: the host's call */
    recap_stream_t stream;     /* WILL_BEGIN, ENDED, WILL_LAUNCH */
    recap_capture_mode_t mode; /* WILL_BEGIN */
    recap_graph_t graph;       /* ENDED, INSTANTIATED, DESTROYED */
    recap_graph_exec_t exec;   /* INSTANTIATED, WILL_LAUNCH, EXEC_DESTROYED */
} recap_capture_event_info_t;

typedef recap_status_t (*recap_capture_subscriber_func_t)(const recap_capture_event_info_t *info,
                                                          void *arg);
typedef struct recap_subscription *recap_subscription_h;

/* Subscribes `fn` to the events in `events_mask` (RECAP_EVENT_MASK bits). At most 16 at once
 * (RECAP_ERR_BUSY beyond). */
RECAP_API recap_status_t recap_capture_subscribe(uint32_t events_mask,
                                                 recap_capture_subscriber_func_t fn, void *arg,
                                                 recap_subscription_h *sub_p);
/* Waits for the subscription's callbacks running in other threads to return; none runs after
 * it returns, so `arg` may be freed then. */
RECAP_API recap_status_t recap_capture_unsubscribe(recap_subscription_h sub);
/* Events delivered to the subscription and how many of them its callback failed. */
RECAP_API recap_status_t recap_capture_subscription_stats(recap_subscription_h sub,
                                                          uint64_t *delivered_p,
                                                          uint64_t *failed_p);
/* Subscriptions alive in this process. */
RECAP_API recap_status_t recap_capture_subscribers(size_t *count_p);

/* ---------------------------------------------------------------- RNG state tracker */

/*
 * Megatron-Core's CudaRNGStatesTracker. Thread safety: each tracker has its own lock, so trackers
 * used from different threads never contend, and calls on one tracker from several threads are
 * serialized. Forks on one tracker must still end in reverse order across all its threads: an
 * unfork whose token is not the innermost open fork is refused (RECAP_ERR_STATE) and changes
 * nothing; the caller may retry once the forks opened after it have ended. States objects and
 * snapshots are plain values without a lock of their own: use each from one thread at a time.
 */

typedef struct recap_tracker *recap_tracker_h;
typedef struct recap_states *recap_states_h;
typedef struct recap_snapshot *recap_snapshot_h;
/* Returned by fork, given back to unfork: identifies one fork so nesting is checked. */
typedef uint64_t recap_fork_token_t;

#define RECAP_RNG_DEFAULT "default-rng"
#define RECAP_RNG_MODEL_PARALLEL "model-parallel-rng"
#define RECAP_RNG_EXPERT_PARALLEL "expert-parallel-rng"
#define RECAP_RNG_DATA_PARALLEL "data-parallel-rng"
#define RECAP_RNG_GTP_REMAT "gtp-remat-rng"
#define RECAP_RNG_EGTP_REMAT "egtp-remat-rng"
/* Longest state name, in bytes, without the terminating NUL. */
#define RECAP_NAME_MAX 127

enum {
    /* Named states are generator-state objects that stay valid inside a capture. */
    RECAP_TRACKER_GRAPH_SAFE = 1u << 0,
    /* add and set_states do nothing (the tracker stays uninitialized); fork of any name is a
     * pass-through that installs nothing but still returns a token checked by unfork. */
    RECAP_TRACKER_INFERENCE = 1u << 1
};

typedef struct recap_tracker_params {
    uint32_t flags;                   /* RECAP_TRACKER_* */
    /* The generator the tracker drives (the framework's default generator). NULL: the tracker
     * creates and owns one for `device`. */
    recap_generator_h generator;
    int device;                       /* used when generator is NULL; RECAP_DEVICE_HOST allowed */
    /* Optional host (CPU) generator included in whole-state snapshots. */
    recap_generator_h host_generator;
} recap_tracker_params_t;

RECAP_API recap_status_t recap_tracker_create(const recap_tracker_params_t *params, recap_tracker_h *tracker_p);
/* RECAP_ERR_STATE while forks are open (the tracker's generator would keep a named state), while
 * recompute regions or checkpoints made with it live (they restore its states when they
 * rebuild), and for the default tracker (replace it with recap_default_tracker_initialize and
 * force_reset, which refuses the same way).
 * An owned generator (params.generator NULL) is destroyed with the tracker. */
RECAP_API recap_status_t recap_tracker_destroy(recap_tracker_h tracker);
/* Empties the states and used seeds, marks the tracker uninitialized, current = default.
 * RECAP_ERR_STATE while forks are open. */
RECAP_API recap_status_t recap_tracker_reset(recap_tracker_h tracker);
RECAP_API recap_status_t recap_tracker_is_initialized(recap_tracker_h tracker, int *initialized_p);
RECAP_API recap_status_t recap_tracker_is_graph_safe(recap_tracker_h tracker, int *graph_safe_p);
/* Adds a state equal to a generator freshly seeded with `seed` (offset 0) and marks the tracker
 * initialized; does not disturb the current generator. Names are 1..RECAP_NAME_MAX bytes and not
 * RECAP_RNG_DEFAULT. Errors: RECAP_ERR_DUPLICATE_SEED (checked first), RECAP_ERR_EXISTS; a failed
 * add records nothing (Megatron would keep the seed of an add that failed on its name). */
RECAP_API recap_status_t recap_tracker_add(recap_tracker_h tracker, const char *name, uint64_t seed);
/* Installs the named state in the tracker's generator until the matching unfork; an outer
 * fork's progress is kept, and nested forks (A, B, A again) draw exactly what the same forks
 * one after the other would. RECAP_ERR_NOT_FOUND for a name never added. Value mode copies
 * 16-byte values; graph-safe mode installs the state object itself.
 * Trackers may share a generator (params.generator) one after the other, not interleaved: while
 * one tracker has a fork open on the generator, another tracker's fork returns RECAP_ERR_STATE
 * and changes nothing (its unfork would put the wrong state back). */
RECAP_API recap_status_t recap_tracker_fork(recap_tracker_h tracker, const char *name,
                                  recap_fork_token_t *token_p);
/* Ends the innermost fork: the advanced state goes back under its name and the outer state is
 * reinstalled. RECAP_ERR_STATE (nothing changed) when `token` is not the innermost open fork of
 * this tracker, or no fork is open. */
RECAP_API recap_status_t recap_tracker_unfork(recap_tracker_h tracker, recap_fork_token_t token);
/* The generator the tracker drives (the one forks install states into). Not owned by caller. */
RECAP_API recap_status_t recap_tracker_generator(recap_tracker_h tracker, recap_generator_h *gen_p);
/* Name of the current state (RECAP_RNG_DEFAULT outside forks, and always for an inference
 * tracker); valid until the next fork/unfork. */
RECAP_API recap_status_t recap_tracker_current_name(recap_tracker_h tracker, const char **name_p);
/* Copy of the whole name -> state map, by value, in insertion order. */
RECAP_API recap_status_t recap_tracker_get_states(recap_tracker_h tracker, recap_states_h *states_p);
/* Replaces the map with a copy of `states`; marks the tracker initialized; leaves the used seeds
 * as they are (as Megatron does). Graph-safe trackers keep the state object of every name that
 * stays, writing the new value into it, so graphs referring to it stay valid. RECAP_ERR_STATE
 * while forks are open. */
RECAP_API recap_status_t recap_tracker_set_states(recap_tracker_h tracker, recap_states_h states);

RECAP_API recap_status_t recap_states_copy(recap_states_h states, recap_states_h *copy_p);
/* An empty states object, and setting a name's value in one (added at the end when new): a map
 * built by the host for recap_tracker_set_states (a framework's set_states of its own values).
 * RECAP_ERR_MISALIGNED for an offset not a multiple of 4; names as recap_tracker_add's. */
RECAP_API recap_status_t recap_states_create(recap_states_h *states_p);
RECAP_API recap_status_t recap_states_put(recap_states_h states, const char *name,
                                          const uint8_t state[RECAP_STATE_BYTES]);
RECAP_API recap_status_t recap_states_free(recap_states_h states);
RECAP_API recap_status_t recap_states_count(recap_states_h states, size_t *count_p);
/* The i-th name in insertion order; valid while `states` lives. */
RECAP_API recap_status_t recap_states_name(recap_states_h states, size_t index, const char **name_p);
/* RECAP_ERR_NOT_FOUND for a name not in `states`. */
RECAP_API recap_status_t recap_states_lookup(recap_states_h states, const char *name,
                                   uint8_t state[RECAP_STATE_BYTES]);

/* Converts a state's value form (16 bytes) to its graph-safe form (a generator object on the
 * tracker's device with that state; the caller destroys it) and back. The current generator is
 * not disturbed and the converted state continues the same sequence. */
RECAP_API recap_status_t recap_state_to_graph_safe(recap_tracker_h tracker,
                                         const uint8_t state[RECAP_STATE_BYTES],
                                         recap_generator_h *gen_p);
RECAP_API recap_status_t recap_state_from_graph_safe(recap_generator_h gen, uint8_t state[RECAP_STATE_BYTES]);

/* The framework's state object behind a named state of a graph-safe tracker on a framework
 * generator (what the framework registers with its graphs: torch's register_generator_state),
 * lent: valid while the state stays in the tracker. RECAP_ERR_NOT_FOUND for an unknown name,
 * RECAP_ERR_INVALID_ARG for another kind of tracker. */
RECAP_API recap_status_t recap_tracker_state_object(recap_tracker_h tracker, const char *name,
                                                    void **obj_p);

/* Process-wide default tracker. initialize creates it (or, with force_reset, replaces it: the
 * old one is destroyed and its handle becomes invalid; RECAP_ERR_STATE, keeping it, while it has
 * forks open). Initialize again with the same params returns the existing tracker; with
 * different params RECAP_ERR_OPTIONS_DIFFER, keeping the existing one (Megatron silently keeps
 * it). get returns RECAP_ERR_STATE before initialize. */
RECAP_API recap_status_t recap_default_tracker_initialize(const recap_tracker_params_t *params,
                                                int force_reset, recap_tracker_h *tracker_p);
RECAP_API recap_status_t recap_default_tracker_get(recap_tracker_h *tracker_p);

/* ---------------------------------------------------------------- exact-capture scope */

/*
 * Graphs on = graphs off (ABI 1.4). Frameworks warm a step up eagerly before capturing it
 * (torch.cuda.make_graphed_callables runs it 3 times; Megatron's create_cudagraphs more), and the
 * warm-up and the capture advance every generator, so the first replay draws what the 4th eager
 * step would: a graphed run differs from the eager one from step 1. Entering this scope takes a
 * snapshot of every tracker (its generator and every named state, value or graph-safe) and of
 * every framework generator alive; leaving restores them all, so warm-ups and captures inside the
 * scope leave the generators where they were and the first replay after it draws exactly what
 * the first eager step would have (graph launches take the generators' offsets at launch time).
 *
 * Scopes nest (each restores what it saw at its entry; leave them in reverse order). A scope is
 * process-wide: it restores every tracker, also ones another thread used meanwhile, so enter it
 * while no other thread draws. Objects created inside a scope are left as they are; ones destroyed
 * inside it are skipped. recap's own generators outside trackers are not included. Enter and leave
 * outside captures of the calling thread (RECAP_ERR_STATE). RECAP_EXACT_CAPTURE=0 turns every
 * scope into one that restores nothing (today's behaviour). leave restores what it can when one
 * restore fails and returns the first failure; the scope is freed either way.
 */
typedef struct recap_exact_scope *recap_exact_scope_h;
RECAP_API recap_status_t recap_exact_capture_enter(recap_exact_scope_h *scope_p);
RECAP_API recap_status_t recap_exact_capture_leave(recap_exact_scope_h scope);

/* ---------------------------------------------------------------- per-rank seeding */

typedef struct recap_parallel_ranks {
    int tp_rank, tp_size;                 /* tensor parallel */
    int ep_rank, ep_size;                 /* expert parallel */
    int etp_rank, etp_size;               /* expert tensor parallel */
    int gtp_remat_rank, gtp_remat_size;   /* GTP rematerialization (state added when size > 1) */
    int egtp_remat_rank, egtp_remat_size; /* expert GTP remat (state added when size > 1) */
} recap_parallel_ranks_t;

/* Megatron's model_parallel_cuda_manual_seed: resets the tracker, seeds its generator with
 * `seed` and adds, in this order, data-parallel-rng = seed, model-parallel-rng = seed + 2718 +
 * tp_rank, expert-parallel-rng = seed + 1024 + 100 * ep_rank + etp_rank, and when
 * gtp_remat_size > 1 gtp-remat-rng = model seed + 65536 * (1 + gtp_remat_rank), when
 * egtp_remat_size > 1 egtp-remat-rng = expert seed + 32768 + 65536 * (1 + egtp_remat_rank).
 * seed must be > 0, sizes >= 1 and 0 <= rank < size, and the derived seeds distinct; otherwise
 * RECAP_ERR_INVALID_ARG and the tracker is untouched. RECAP_ERR_STATE while forks are open.
 * Graph-safe trackers keep the state objects of the names (see set_states). */
RECAP_API recap_status_t recap_tracker_seed_parallel(recap_tracker_h tracker, int64_t seed,
                                           const recap_parallel_ranks_t *ranks);

/* ---------------------------------------------------------------- whole-state snapshots */

/* A snapshot holds values: the host generator (params.host_generator, if any), the tracker's
 * generator, every named state and the initialized flag; not the current name or open forks.
 * Taking and restoring copy values: no allocation once the snapshot's arrays are large enough,
 * no device work. */
RECAP_API recap_status_t recap_snapshot_create(recap_snapshot_h *snap_p);
RECAP_API recap_status_t recap_snapshot_destroy(recap_snapshot_h snap);
/* Copies the tracker's whole RNG state into snap (no allocation once snap is large enough). */
RECAP_API recap_status_t recap_snapshot_take(recap_tracker_h tracker, recap_snapshot_h snap);
/* Restores exactly what take saw. All or nothing: on error the live state is untouched. When
 * the tracker has the snapshot's names in the same order, values are written in place (inside
 * forks too; graph-safe trackers write into their existing state objects). The generator's value
 * is the progress of the state it drew at take (the default outside forks, else the forked one),
 * and that state is current again after the restore, as the map and the generator are apart in
 * Megatron's module: restored inside fork(x) when taken outside forks, the generator draws the
 * snapshot's default value, a nested fork(x) x's restored value, and the fork's unfork stores
 * what the generator drew into x. A graph-safe tracker's generator holds the forked state's
 * object, so there a restore inside a fork of a snapshot taken outside it (or in another fork) is
 * RECAP_ERR_STATE; outside forks any snapshot restores. Otherwise the map is
 * replaced wholesale (keeping the objects of names that stay), which is RECAP_ERR_STATE while
 * forks are open. RECAP_ERR_STATE for a snapshot never taken or deserialized;
 * RECAP_ERR_INVALID_ARG when exactly one of snapshot and tracker has a host generator. */
RECAP_API recap_status_t recap_snapshot_restore(recap_tracker_h tracker, recap_snapshot_h snap);
/* Versioned little-endian byte form for training checkpoints ("RCAP", format version, flags,
 * counts, the states, an FNV-1a-64 checksum; src/tracker/serialize.c has the layout). With buf
 * NULL or too small, *len_p receives the size needed and RECAP_ERR_INVALID_ARG is returned when
 * buf is too small. */
RECAP_API recap_status_t recap_snapshot_serialize(recap_snapshot_h snap, void *buf, size_t cap,
                                        size_t *len_p);
/* Parses and validates a whole blob into snap; RECAP_ERR_CORRUPT for damaged or truncated data
 * (bad magic, length, checksum, names, offsets not multiples of 4; checked before the version,
 * so a damaged version field is corrupt too), RECAP_ERR_VERSION for an intact blob of another
 * format version, and snap is left unchanged on any error. Restore it to apply it. */
RECAP_API recap_status_t recap_snapshot_deserialize(const void *buf, size_t len, recap_snapshot_h snap);

/* ---------------------------------------------------------------- recompute regions */

/*
 * Activation recomputation (Megatron-Core's checkpoint, CheckpointWithoutOutput and its
 * manager) through a C ABI. The engine's "tensors" are buffers it owns, seen by recap as opaque
 * handles (recap_buffer_t); recap never reads their contents: everything it needs from the engine
 * (storage, recording mode, gradients' triggers, saved buffers, the recompute context) goes
 * through a table of engine operations. What a region re-runs is a recorded call: a function
 * pointer, its signature and its argument values, copied at record time. Buffer arguments are
 * marked by position in the signature: RECAP_TYPE_BUFFER for inputs (stashed through the engine's
 * saved-buffer operations, read back once at rebuild), RECAP_TYPE_BUFFER_OUT for outputs the
 * function writes (released and rebuilt).
 *
 * Random numbers: a region snapshots its tracker's whole RNG state (recap_snapshot_take) before
 * the first run and restores it for the recompute, so the recompute draws exactly what the first
 * run drew; the state current before the recompute is restored afterwards. Inside a capture on a
 * graph-safe tracker the snapshots are capture-relative, so the recompute redraws the forward's
 * numbers on every replay. Release and rebuild inside a capture call the engine's storage
 * operations there, so its allocator must be capture-safe: memory a captured kernel writes must
 * outlive the graph (PyTorch's graph pools do this; the plain engine does with
 * RECAP_PLAIN_KEEP_FREED) and allocating there must be allowed (for the plain engine's device
 * buffers: a capture in relaxed mode).
 *
 * Thread safety: a region, checkpoint or manager is used from one thread at a time; signatures
 * are immutable once created and may be shared between threads.
 */

typedef void *recap_buffer_t;          /* an engine's buffer (its handle, never dereferenced) */
typedef void (*recap_func_t)(void);    /* any function, cast; its signature says how to call it */
typedef struct recap_signature *recap_signature_h;
typedef struct recap_region *recap_region_h;
typedef struct recap_manager *recap_manager_h;
typedef struct recap_checkpoint *recap_checkpoint_h;

/* Type codes of a recorded call's arguments and return value. */
typedef enum recap_type {
    RECAP_TYPE_VOID = 0,      /* return type only */
    RECAP_TYPE_INT32 = 1,
    RECAP_TYPE_INT64 = 2,
    RECAP_TYPE_UINT32 = 3,
    RECAP_TYPE_UINT64 = 4,
    RECAP_TYPE_FLOAT = 5,
    RECAP_TYPE_DOUBLE = 6,
    RECAP_TYPE_POINTER = 7,   /* kept as a value: what it points to is not saved */
    RECAP_TYPE_BUFFER = 8,    /* input buffer; the function receives the engine's buffer_arg */
    RECAP_TYPE_BUFFER_OUT = 9 /* output buffer the function writes; likewise */
} recap_type_t;

/* Most arguments a recorded call may have. */
#define RECAP_MAX_ARGS 32

/* An argument or return value; buffers go in `buf`. */
typedef union recap_value {
    int32_t i32;
    int64_t i64;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    void *ptr;
    recap_buffer_t buf;
} recap_value_t;

/* Which run of a region's function the recompute context is entered for. */
typedef enum recap_pass {
    RECAP_PASS_FIRST = 0,    /* the forward run */
    RECAP_PASS_RECOMPUTE = 1 /* the rebuild or backward run */
} recap_pass_t;

/* A trigger: recap's callback the engine calls when a buffer's gradient is being computed. */
typedef recap_status_t (*recap_trigger_func_t)(void *arg);

/*
 * What recap needs from the engine. `engine` (the params' user pointer, `host`) is passed to every
 * operation. Operations report failure with a status (anything but RECAP_OK); recap returns it.
 * The table must outlive every region, checkpoint and manager using it.
 */
typedef struct recap_engine_ops {
    /* What the function receives for a buffer argument (its data pointer, say); fails for a
     * buffer without storage. NULL: the handle itself. */
    recap_status_t (*buffer_arg)(void *engine, recap_buffer_t buf, void **arg_p);
    /* Whether the buffer needs a gradient. NULL: every buffer does. */
    int (*needs_grad)(void *engine, recap_buffer_t buf);
    /* A new buffer like `like` (same size, device, kind), with storage of its own; `like` may
     * be without storage. Required. */
    recap_status_t (*alloc_like)(void *engine, recap_buffer_t like, recap_buffer_t *buf_p);
    /* Frees a buffer recap obtained from alloc_like, load or the distribution ops. Required. */
    recap_status_t (*free_buffer)(void *engine, recap_buffer_t buf);
    /* Frees the buffer's storage; the handle (and views of it) stay valid, without storage.
     * Required for regions without output. */
    recap_status_t (*free_storage)(void *engine, recap_buffer_t buf);
    /* Makes dst (and its views) use src's storage, without copying. recap frees src right after
     * with free_buffer, which must leave the storage dst now uses alone. Required for regions
     * without output. */
    recap_status_t (*share_storage)(void *engine, recap_buffer_t dst, recap_buffer_t src);
    /* Whether two buffers use the same storage. NULL: the same handle. */
    int (*same_storage)(void *engine, recap_buffer_t a, recap_buffer_t b);
    /* Switches recording (autograd) on or off for the calling thread, giving back the previous
     * setting. NULL: the engine does not record. */
    recap_status_t (*set_recording)(void *engine, int enable, int *previous_p);
    /* Arranges for fn(arg) to be called when buf's gradient is being computed; *handle_p
     * identifies it for remove_trigger. Required to release with a trigger buffer. */
    recap_status_t (*add_trigger)(void *engine, recap_buffer_t buf, recap_trigger_func_t fn,
                                  void *arg, void **handle_p);
    recap_status_t (*remove_trigger)(void *engine, void *handle);
    /* The engine's saved-buffer mechanism (its hooks, e.g. offloading, see what recap keeps):
     * save keeps buf's contents reachable (the caller may free the handle meanwhile), load gives
     * back a buffer with them, valid until drop. All three or none; none: recap keeps the
     * handles themselves. */
    recap_status_t (*save)(void *engine, recap_buffer_t buf, void **saved_p);
    recap_status_t (*load)(void *engine, void *saved, recap_buffer_t *buf_p);
    recap_status_t (*drop)(void *engine, void *saved);
    /* Optional recompute context (e.g. FP8 scaling state), entered around every run of a
     * region's function with the pass it is: both or none. */
    recap_status_t (*context_enter)(void *engine, recap_pass_t pass, void **ctx_p);
    recap_status_t (*context_exit)(void *engine, void *ctx);
    /* Optional, for checkpoints with RECAP_CHECKPOINT_DISTRIBUTE: a new buffer holding this
     * rank's slice of buf across the tensor-parallel group, and a new buffer holding every
     * rank's slices of `slice` gathered back into the whole (the engine knows the shape). */
    recap_status_t (*distribute)(void *engine, recap_buffer_t buf, recap_buffer_t *slice_p);
    recap_status_t (*all_gather)(void *engine, recap_buffer_t slice, recap_buffer_t *full_p);
} recap_engine_ops_t;

enum {
    /* Release keeps outputs that share storage with an input (retain_input_tensors). */
    RECAP_REGION_RETAIN_INPUTS = 1u << 0,
    /* Runs without entering the engine's recompute context (it is entered by default). */
    RECAP_REGION_NO_CONTEXT = 1u << 1,
    /* Checkpoints: keep only this rank's slice of the first input buffer, all-gathered again
     * before the recompute (distribute_saved_activations). */
    RECAP_CHECKPOINT_DISTRIBUTE = 1u << 2
};

typedef struct recap_region_params {
    const recap_engine_ops_t *ops;
    void *host;               /* the engine: passed to every engine operation (the field keeps
                               * the name it had before ABI 1.5, so initializers still compile) */
    /* The tracker whose whole RNG state (recap_snapshot_take) is restored for the recompute;
     * NULL: random numbers are not managed. */
    recap_tracker_h tracker;
    /* Regions without output: the manager the region registers with at creation (or NULL).
     * Must be NULL for checkpoints. */
    recap_manager_h manager;
    uint32_t flags;           /* RECAP_REGION_*, RECAP_CHECKPOINT_* */
} recap_region_params_t;

/* A call signature: return type and argument types, prepared once for libffi and shareable by
 * any number of regions (each holds a reference; destroy drops the caller's). Rejected with
 * RECAP_ERR_INVALID_ARG: unknown type codes, VOID or a buffer as an argument, a buffer as the
 * return type, more than RECAP_MAX_ARGS arguments. */
RECAP_API recap_status_t recap_signature_create(recap_type_t ret, const recap_type_t *args,
                                                size_t nargs, recap_signature_h *sig_p);
RECAP_API recap_status_t recap_signature_destroy(recap_signature_h sig);

/*
 * A region without output (CheckpointWithoutOutput). Its lifecycle only moves forward, one step
 * at a time: NEW -> RECORDED -> RELEASED -> REBUILT -> DONE; any other call is RECAP_ERR_STATE
 * with a message, and changes nothing. Destroy is allowed in every state.
 *
 * When no input buffer needs a gradient the region is a plain call: record runs the function
 * once (in the recompute context, as a first pass) and keeps nothing; release and rebuild do
 * nothing and succeed.
 */
typedef enum recap_region_state {
    RECAP_REGION_NEW = 0,
    RECAP_REGION_RECORDED = 1,
    RECAP_REGION_RELEASED = 2,
    RECAP_REGION_REBUILT = 3,
    RECAP_REGION_DONE = 4
} recap_region_state_t;

RECAP_API recap_status_t recap_region_create(const recap_region_params_t *params,
                                             recap_region_h *region_p);
/* Frees what the region holds in any state: a region released and never rebuilt drops its
 * stashed inputs here; removes its trigger and leaves its manager. While a lifecycle call runs the
 * region's function or an engine operation for it (record's needs_grad and save, release's
 * add_trigger and free_storage, rebuild, finish's remove_trigger), or its manager releases or
 * rebuilds, the lifecycle calls on that region (destroy, record, release, rebuild, finish, its
 * manager's add, release, rebuild and destroy) return RECAP_ERR_STATE and change nothing. So do
 * region and checkpoint creation and destruction from inside a framework generator's operation
 * (they join or leave the tracker, whose lock recap holds there). */
RECAP_API recap_status_t recap_region_destroy(recap_region_h region);
/* NEW -> RECORDED: snapshots the RNG state, runs fn(args) once without recording (the engine's
 * set_recording) with recap_is_checkpointing true, then stashes the input buffers through the
 * engine's save. The argument values are copied; nargs must equal the signature's count and fn
 * must not be NULL (RECAP_ERR_INVALID_ARG, nothing run). The output buffers' handles are kept,
 * not saved: they must stay valid while the region lives (release frees their storage, rebuild
 * gives them new storage). */
RECAP_API recap_status_t recap_region_record(recap_region_h region, recap_signature_h sig,
                                             recap_func_t fn, const recap_value_t *args,
                                             size_t nargs);
/* RECORDED -> RELEASED: frees the storage of the output buffers (their handles stay valid);
 * with RECAP_REGION_RETAIN_INPUTS outputs sharing storage with an input are kept. With a
 * trigger buffer that needs a gradient, arms a trigger on it that rebuilds the region (NULL: no
 * trigger; rebuild explicitly). Regions of a manager are released through it. */
RECAP_API recap_status_t recap_region_release(recap_region_h region, recap_buffer_t trigger);
/* RELEASED -> REBUILT: reads the stashed inputs back (once), restores the RNG snapshot,
 * re-runs the function with recording on into new buffers, makes each released output share the
 * new storage (no copy), and restores the RNG state current before. The trigger calls it; a
 * trigger firing in any later state does nothing. */
RECAP_API recap_status_t recap_region_rebuild(recap_region_h region);
/* REBUILT -> DONE: the engine has back-propagated through the outputs; removes the trigger. */
RECAP_API recap_status_t recap_region_finish(recap_region_h region);
RECAP_API recap_status_t recap_region_state(recap_region_h region, recap_region_state_t *state_p);
/* Whether the region is a plain call (no input needed a gradient); RECAP_ERR_STATE before
 * record. */
RECAP_API recap_status_t recap_region_is_plain(recap_region_h region, int *plain_p);
/* The value the function returned in its latest run (zero for VOID). */
RECAP_API recap_status_t recap_region_return_value(recap_region_h region, recap_value_t *value_p);

/*
 * A manager (CheckpointWithoutOutputManager) coordinates regions whose outputs feed each other:
 * one call releases all of them and arms one trigger that rebuilds them in the order they were
 * added (forward order). Its regions use its ops and host. After a rebuild the manager is empty
 * and collects the next regions.
 */
RECAP_API recap_status_t recap_manager_create(const recap_engine_ops_t *ops, void *engine,
                                              recap_manager_h *mgr_p);
/* Regions still registered are let go (they stay valid). RECAP_ERR_STATE, nothing changed, from
 * inside the manager's own release or rebuild, or while one of its regions runs a lifecycle call
 * (from a region's function or an engine operation, say); likewise its add, release and
 * rebuild. */
RECAP_API recap_status_t recap_manager_destroy(recap_manager_h mgr);
/* Registers a region (regions created with params.manager are registered already). Rejected:
 * NULL (RECAP_ERR_INVALID_ARG), a region of this manager (RECAP_ERR_EXISTS) or another one, or
 * of another host (RECAP_ERR_INVALID_ARG), a region already released or a manager awaiting its
 * rebuild (RECAP_ERR_STATE). */
RECAP_API recap_status_t recap_manager_add(recap_manager_h mgr, recap_region_h region);
RECAP_API recap_status_t recap_manager_count(recap_manager_h mgr, size_t *count_p);
/* Releases every region (all must be RECORDED, else RECAP_ERR_STATE and nothing is released)
 * and, with a trigger buffer that needs a gradient, arms one trigger that calls
 * recap_manager_rebuild. */
RECAP_API recap_status_t recap_manager_release(recap_manager_h mgr, recap_buffer_t trigger);
/* Rebuilds every region in forward order (RECAP_ERR_STATE unless released); on an error the
 * regions rebuilt so far stay rebuilt and a second call carries on with the rest. */
RECAP_API recap_status_t recap_manager_rebuild(recap_manager_h mgr);

/*
 * Full recompute (checkpoint): snapshots the RNG state, runs fn(args) without recording and
 * keeps the input buffers (through the engine's save); the outputs the function wrote are the
 * caller's as usual. At backward the engine calls recap_checkpoint_backward when the outputs'
 * gradient arrives: recap restores the snapshot, re-runs with recording into new output buffers
 * and hands them back to back-propagate through, then restores the RNG state current before.
 * With RECAP_CHECKPOINT_DISTRIBUTE only this rank's slice of the first input buffer is kept
 * (the engine's distribute) and all-gathered before the recompute. When no input needs a
 * gradient the run is a plain call and backward is RECAP_ERR_STATE.
 */
RECAP_API recap_status_t recap_checkpoint_run(const recap_region_params_t *params,
                                              recap_signature_h sig, recap_func_t fn,
                                              const recap_value_t *args, size_t nargs,
                                              recap_checkpoint_h *ckpt_p);
/* Once: outputs[i] receives the recomputed i-th output buffer (in argument order; n must be
 * the number of RECAP_TYPE_BUFFER_OUT arguments), a buffer from alloc_like that the engine now
 * owns. The output handles given to run must still be valid (alloc_like takes them as templates;
 * their storage may be gone). A second call is RECAP_ERR_STATE. */
RECAP_API recap_status_t recap_checkpoint_backward(recap_checkpoint_h ckpt,
                                                   recap_buffer_t *outputs, size_t n);
RECAP_API recap_status_t recap_checkpoint_return_value(recap_checkpoint_h ckpt,
                                                       recap_value_t *value_p);
/* Drops the stashed inputs if backward never ran. RECAP_ERR_STATE, nothing changed, from inside
 * its own backward (its function or an engine operation), as a second backward is. */
RECAP_API recap_status_t recap_checkpoint_destroy(recap_checkpoint_h ckpt);

/* 1 on the calling thread while a region's or checkpoint's function runs or is recomputed
 * (nested regions included), else 0. */
RECAP_API recap_status_t recap_is_checkpointing(int *checkpointing_p);

/* Names before ABI 1.5, which called the engine "the host" (deprecated; existing programs
 * compile, and the library still exports the old functions for existing binaries). */
typedef recap_engine_ops_t recap_host_ops_t;
#define recap_host_ops recap_engine_ops

/* The add-ons, each beside the core it builds on: recap-probe's checks, the plain engine
 * (regions over raw memory), and checkpoint inputs distributed over NCCL. */
#include "recap/probe.h"
#include "recap/plain.h"
#include "recap/nccl.h"

#ifdef __cplusplus
}
#endif

#endif /* RECAP_H */
