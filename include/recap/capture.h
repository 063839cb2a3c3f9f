/* SPDX-License-Identifier: Apache-2.0 */
/* recap's public API, part: graph-safe RNG across CUDA graph captures: capture events, launches, the interception front ends, capture subscribers.
 * <recap.h> includes this file after the status, log and CUDA environment it builds on. */
#ifndef RECAP_CAPTURE_H
#define RECAP_CAPTURE_H

#ifndef RECAP_H
#error "include <recap.h>, which includes <recap/capture.h>"
#endif

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

#endif /* RECAP_CAPTURE_H */
