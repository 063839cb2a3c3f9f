/* SPDX-License-Identifier: Apache-2.0 */
/* recap's public API, part: generators: recap's own and a framework's (its table of operations).
 * <recap.h> includes this file after the status, log and CUDA environment it builds on. */
#ifndef RECAP_GENERATOR_H
#define RECAP_GENERATOR_H

#ifndef RECAP_H
#error "include <recap.h>, which includes <recap/generator.h>"
#endif

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

#endif /* RECAP_GENERATOR_H */
