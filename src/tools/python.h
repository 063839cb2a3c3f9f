/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Python and PyTorch a job started here would get, as `python -m torch.utils.collect_env`
 * shows them: python3 from PATH is asked, with a time limit (importing torch takes seconds).
 */
#ifndef RECAP_TOOLS_PYTHON_H
#define RECAP_TOOLS_PYTHON_H

typedef struct probe_python {
    int ran;              /* python3 answered (0: not found, failed or timed out) */
    char why[128];        /* when it did not: what happened */
    char version[64];     /* "3.11.2" */
    char torch[64];       /* "" when torch does not import */
    char torch_cuda[64];  /* torch.version.cuda ("" for a CPU build) */
    char recap_torch[16]; /* recap.torch's path: "extension", "python", "absent"; "" untold */
    char recap_torch_why[512];    /* why not the extension (or why recap.torch is absent) */
    char recap_registration[512]; /* why automatic registration cannot work ("" when it can) */
} probe_python_t;

/* Seconds to wait for python3: $RECAP_PROBE_PYTHON_TIMEOUT, default 10; 0 does not run it. */
int python_timeout(void);
void python_probe(probe_python_t *p, int timeout_s);

#endif
