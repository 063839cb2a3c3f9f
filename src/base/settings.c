/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/settings.h"

extern char **environ;

/* The index of each value is what the reader uses: keep the orders. */
static const char *const hooks[] = {"auto", "preload", "cupti", "off", NULL};    /* hooks.h */
static const char *const log_levels[] = {"off", "warn", "info", "debug", "0", NULL}; /* log.c */
static const char *const flag[] = {"0", "1", NULL};
static const char *const on_off[] = {"1", "0", NULL};
static const char *const verify[] = {"raise", "warn", "off", "0", NULL}; /* recap/_verify.py */
static const char *const kernels[] = {"triton", "cupy", NULL};             /* recap/_dropout.py */
static const char *const sanitizers[] = {"thread", "address", NULL};       /* python/setup.py */

/* Each row says in a line what the variable does: scripts/settings-list makes README.md's list of
 * settings from this table (its group comments, names, choices and lines), and make check fails
 * when the README's copy differs. */
typedef struct {
    const char *name; /* a name, or a family's prefix ending in '_' */
    const char *const *choices; /* NULL: any value */
    const char *what; /* one line for the README (markdown) */
} setting_t;

static const setting_t table[] = {
    /* the library */
    {"RECAP_HOOKS", hooks,
     "which front end may report captures (default auto: LD_PRELOAD's when `LD_PRELOAD` names "
     "`librecap-preload.so`, CUPTI's when installed; preload: also when `librecap-preload.so` "
     "came in otherwise, linked or dlopened; off: none)"},
    {"RECAP_LOG", log_levels,
     "recap's log, on stderr (silent by default, never stdout): lines as `NCCL_DEBUG`'s, "
     "`HOST:PID:TID [RANK] recap LEVEL message`"},
    {"RECAP_LOG_FILE", NULL,
     "FILE: the log goes there instead of stderr, appended; `%h` is the host name, `%p` the "
     "process id"},
    {"RECAP_LOG_TIME", flag, "1: each log line starts with the UTC time"},
    {"RECAP_REPORT", NULL,
     "FILE: at exit each process writes one JSON line of what recap saw there (`%p`: the process "
     "id, `%h`: the host name)"},
    {"RECAP_CUPTI_PATH", NULL, "FILE: the libcupti to load when none is loaded"},
    {"RECAP_CUDA_DRIVER", NULL,
     "FILE: the driver library to load instead of `libcuda.so.1` (tests: the CUDA test double)"},
    {"RECAP_NCCL_LIB", NULL,
     "FILE: the NCCL to load instead of the process's `libnccl.so.2` for distributed "
     "checkpoint inputs (tests: the fake NCCL)"},
    {"RECAP_EXACT_CAPTURE", on_off,
     "0: exact-capture scopes do nothing (graph warm-ups advance the generators)"},
    {"RECAP_LOCK_FENCE", flag,
     "1: threads entering recap's locks fence themselves instead of relying on `membarrier` "
     "(automatic under ThreadSanitizer)"},
    /* recap-probe */
    {"RECAP_PROBE_PYTHON_TIMEOUT", NULL,
     "seconds recap-probe waits for `python3` to report its and torch's versions (10; 0: do not "
     "ask)"},
    {"RECAP_PROBE_FAIL", NULL, "tests: recap-probe's checks to fail on purpose, comma-separated"},
    /* the Python package (python/recap) and its build */
    {"RECAP_LIB", NULL,
     "FILE: the librecap the package loads when none is preloaded (before the wheel's copy)"},
    {"RECAP_MEGATRON", NULL,
     "0: `recap-run` does not install `recap.megatron` (`recap-run --no-megatron` sets it)"},
    {"RECAP_TORCH_REPLAY", NULL, "0: torch replays its own graphs, never recap"},
    {"RECAP_TORCH_EXT", NULL,
     "0: `recap.torch` runs its Python operations instead of its torch extension `recap._C`"},
    {"RECAP_VERIFY_GRAPHS", verify,
     "what a graph that differs from its eager step does in recap's `make_graphed_callables` "
     "(default raise; warn; off or 0: not checked)"},
    {"RECAP_SITE", NULL,
     "set by `recap-run`: the folder its Python processes load recap's start-up hook from"},
    {"RECAP_TORCH_KERNEL", kernels,
     "the kernel `recap.torch.dropout` launches (default triton when Triton imports, else cupy)"},
    {"RECAP_INCLUDE", NULL,
     "DIR: the folder holding `recap/philox.h` for `recap.torch.dropout`'s kernels (default: the "
     "wheel's copy, then the source tree's)"},
    {"RECAP_PYTHON_OPS", NULL,
     "1 at install: build the package without its torch extension (Python operations only)"},
    {"RECAP_BUNDLE_LIB", NULL,
     "FILE at install: the librecap the wheel bundles (default the build tree's "
     "`src/.libs/librecap.so.1`)"},
    {"RECAP_EXT_TESTS", flag,
     "1 at install: compile `recap._C`'s test entries (`_test_*`) in, for the package's own "
     "tests (never in a shipped wheel); 1 when the tests run: those entries must be there"},
    {"RECAP_EXT_SANITIZE", sanitizers,
     "at install: build `recap._C` with that sanitizer (`scripts/ci-torch-threads`; never "
     "shipped)"},
    /* tests, CI and the GPU suite */
    {"RECAP_REQUIRE_TORCH", NULL,
     "1: the Python tests fail instead of skipping when torch is missing"},
    {"RECAP_TEST_", NULL,
     "the C and Python suites' settings (`RECAP_TEST_SEED`: the seed a failing run printed)"},
    {"RECAP_DOUBLE_", NULL, "the CUDA test double's settings (`tests/double/double.h`)"},
    {"RECAP_FUZZ_", NULL,
     "the fuzzing runs' settings (`RECAP_FUZZ_SECONDS`, `RECAP_FUZZ_JOBS`, `RECAP_FUZZ_TRACE`)"},
    {"RECAP_GPU_", NULL,
     "`scripts/gpu-check`'s settings (`RECAP_GPU_STEPS=REGEX`: only the steps whose names "
     "match)"},
    {"RECAP_CUDA_DOUBLE", NULL, "FILE: the CUDA test double the Python tests load"},
    {"RECAP_GRAPHS_DETERMINISTIC", NULL,
     "0: the GPU suite's graphed-vs-eager runs leave cuBLAS's workspace unfixed"},
    {"RECAP_REQUIRE_CMAKE", NULL,
     "1: `make installcheck` fails instead of skipping its CMake consumer when cmake is missing"},
    {"RECAP_SANITIZE_DIR", NULL,
     "DIR: where `scripts/ci-sanitize` and `scripts/ci-torch-threads` build (default "
     "`/tmp/recap-sanitize`)"},
    {"RECAP_TORCH_NEWEST", NULL,
     "the torch release `scripts/ci-dist` and `scripts/ci-torch-newest` install (default the "
     "newest recap supports)"},
    {"RECAP_TORCH_NEWEST_VENV", NULL,
     "DIR: the virtual environment `scripts/ci-torch-newest` makes"},
    {"RECAP_THREADS_VALUE_OPS", on_off,
     "0: the Python thread tests leave out the value operations (under ThreadSanitizer)"},
    {"RECAP_ABI", NULL,
     "set by `make check` for `tests/package/abi.sh`: the ABI version configure set"},
    {"RECAP_PROBE_TOOL", NULL, "the recap-probe the probe suite runs (default the build tree's)"},
    {"RECAP_COMPOSE_EDGES_", NULL, "set by the graph-composition suite for its child processes"},
    {"RECAP_REENTRY_PAIR", NULL,
     "`cb,action,graph_safe,nth`: the re-entry suite runs that pair alone first, to debug it"},
};

/* The row of `name` (`nlen` bytes of it). */
static const setting_t *row(const char *name, size_t nlen)
{
    size_t i, k;

    for (i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        k = strlen(table[i].name);
        if (table[i].name[k - 1] == '_' ? nlen > k && strncmp(name, table[i].name, k) == 0
                                        : nlen == k && strncmp(name, table[i].name, k) == 0)
            return &table[i];
    }
    return NULL;
}

const char *const *recap__setting_choices(const char *name)
{
    const setting_t *r = row(name, strlen(name));

    return r != NULL ? r->choices : NULL;
}

recap__setting_check_t recap__setting_check(const char *entry, char *why, size_t len)
{
    const char *eq = strchr(entry, '=');
    const setting_t *r = row(entry, eq != NULL ? (size_t)(eq - entry) : strlen(entry));
    size_t i, n;

    if (r == NULL) {
        if (why != NULL && len > 0)
            snprintf(why, len, "unknown setting");
        return RECAP__SETTING_UNKNOWN;
    }
    if (r->choices == NULL || eq == NULL || eq[1] == '\0')
        return RECAP__SETTING_OK;
    for (i = 0; r->choices[i] != NULL; i++)
        if (strcasecmp(eq + 1, r->choices[i]) == 0)
            return RECAP__SETTING_OK;
    if (why != NULL && len > 0) {
        n = (size_t)snprintf(why, len, "not understood:");
        for (i = 0; r->choices[i] != NULL && n < len; i++)
            n += (size_t)snprintf(why + n, len - n, "%s%s", i ? "|" : " ", r->choices[i]);
    }
    return RECAP__SETTING_INVALID;
}

size_t recap__settings_flagged(char *buf, size_t len)
{
    size_t i, k, n = 0, left_out = 0;
    const char *c;

    if (len > 0)
        buf[0] = '\0';
    for (i = 0; environ != NULL && environ[i] != NULL; i++) {
        if (strncmp(environ[i], "RECAP_", 6) != 0 ||
            recap__setting_check(environ[i], NULL, 0) == RECAP__SETTING_OK)
            continue;
        k = strcspn(environ[i], "=");
        /* whole names only: a cut one would name a variable that is not there */
        if (n + (n > 0) + k + 1 > len) {
            left_out++;
            continue;
        }
        if (n > 0)
            buf[n++] = ' ';
        for (c = environ[i]; c < environ[i] + k; c++)
            buf[n++] = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                               (*c >= '0' && *c <= '9') || *c == '_' ? *c : '?';
        buf[n] = '\0';
    }
    return left_out;
}
