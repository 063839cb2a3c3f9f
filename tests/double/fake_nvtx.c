/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake NVTX tool for CI, loaded the way Nsight Systems is: NVTX_INJECTION64_PATH names it and
 * NVTX3's first call runs its InitializeInjectionNvtx2, which fills the core table with the
 * entry points below. It records domains, range pushes and pops and marks as text lines
 * ("push recap: recap prime", "pop recap") that the test reads with fake_nvtx_log.
 */
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "recap.h" /* RECAP_API, the one export macro */
#define MAX_DOMAINS 16
#define LOG_BYTES (1 << 20)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char domains[MAX_DOMAINS][64]; /* a domain's handle is its slot's address */
static int ndomains;
static char log_text[LOG_BYTES];
static size_t log_len;

RECAP_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);
RECAP_API size_t fake_nvtx_log(char *buf, size_t len);
RECAP_API void fake_nvtx_clear(void);

static const char *domain_name(nvtxDomainHandle_t d)
{
    return d != NULL ? (const char *)d : "(default)";
}

static void record(const char *what, nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    const char *msg = a != NULL && a->messageType == NVTX_MESSAGE_TYPE_ASCII ? a->message.ascii
                                                                              : NULL;
    int n;

    pthread_mutex_lock(&lock);
    n = snprintf(log_text + log_len, sizeof(log_text) - log_len, "%s %s%s%s\n", what,
                 domain_name(d), msg ? ": " : "", msg ? msg : "");
    if (n > 0 && log_len + (size_t)n < sizeof(log_text))
        log_len += (size_t)n;
    pthread_mutex_unlock(&lock);
}

static nvtxDomainHandle_t NVTX_API domain_create(const char *name)
{
    nvtxDomainHandle_t d = NULL;

    pthread_mutex_lock(&lock);
    if (ndomains < MAX_DOMAINS) {
        snprintf(domains[ndomains], sizeof(domains[0]), "%s", name);
        d = (nvtxDomainHandle_t)domains[ndomains++];
    }
    pthread_mutex_unlock(&lock);
    return d;
}

static int NVTX_API range_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    record("push", d, a);
    return 0;
}

static int NVTX_API range_pop(nvtxDomainHandle_t d)
{
    record("pop", d, NULL);
    return 0;
}

static void NVTX_API mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    record("mark", d, a);
}

RECAP_API int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const NvtxExportTableCallbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable table = NULL;
    unsigned int size = 0;

    if (cb == NULL || !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) ||
        size <= NVTX_CBID_CORE2_DomainCreateA)
        return 0;
    *table[NVTX_CBID_CORE2_DomainCreateA] = (NvtxFunctionPointer)domain_create;
    *table[NVTX_CBID_CORE2_DomainRangePushEx] = (NvtxFunctionPointer)range_push;
    *table[NVTX_CBID_CORE2_DomainRangePop] = (NvtxFunctionPointer)range_pop;
    *table[NVTX_CBID_CORE2_DomainMarkEx] = (NvtxFunctionPointer)mark;
    return 1;
}

RECAP_API size_t fake_nvtx_log(char *buf, size_t len)
{
    size_t n;

    pthread_mutex_lock(&lock);
    n = log_len < len - 1 ? log_len : len - 1;
    memcpy(buf, log_text, n);
    buf[n] = '\0';
    pthread_mutex_unlock(&lock);
    return n;
}

RECAP_API void fake_nvtx_clear(void)
{
    pthread_mutex_lock(&lock);
    log_len = 0;
    pthread_mutex_unlock(&lock);
}
