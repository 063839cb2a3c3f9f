/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsym for the CUDA names librecap exports, answered as the process would answer without
 * librecap. glibc resolves RTLD_DEFAULT and RTLD_NEXT for the calling object; asked through the
 * interposer, the caller would be librecap, so the caller's view is rebuilt here from lookups
 * glibc makes under its own lock (dlsym, dlopen with RTLD_NOLOAD, dladdr) and from the public
 * fields of objects that cannot go away meanwhile: the caller's own (it is running) and those a
 * RTLD_NOLOAD handle holds. Nothing walks the loader's list of objects, which another thread's
 * dlclose may free under it, and nothing loads or initializes a library.
 *
 *   RTLD_DEFAULT  the global scope without librecap (glibc's global lookup, and the next one
 *                 after librecap when that was librecap's), then the caller's own group (a
 *                 library loaded RTLD_LOCAL sees its dependencies).
 *   RTLD_NEXT     from the program: the global scope after librecap (librecap comes right after
 *                 the program). From a library: its dependencies breadth first, each object for
 *                 its own definition (never the caller's, never librecap's), then the global
 *                 scope after librecap. Objects loaded RTLD_LOCAL by others are never searched.
 *   a handle      glibc's answer, unless that is librecap's definition because the handle's
 *                 group contains librecap: then the same search without librecap.
 *
 * Known difference from glibc: a library in the global scope after librecap (LD_PRELOAD=recap:X,
 * or a library the program links) asking RTLD_NEXT may get a definition from an object before it
 * in the global scope, where glibc skips those; it never gets its own.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <stddef.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/dl.h"
#include "hooks/lookup.h"

/* ---- librecap's own symbol table ---- */

RECAP_NO_SANITIZE_EARLY static struct link_map *object_of(const void *p)
{
    struct link_map *map = NULL;
    Dl_info info;

    if (p == NULL || dladdr1(p, &info, (void **)&map, RTLD_DL_LINKMAP) == 0)
        return NULL;
    return map;
}

RECAP_NO_SANITIZE_EARLY static struct link_map *self_map(void)
{
    static struct link_map *self;
    struct link_map *m = __atomic_load_n(&self, __ATOMIC_ACQUIRE);

    if (m == NULL) {
        m = object_of((const void *)self_map);
        __atomic_store_n(&self, m, __ATOMIC_RELEASE);
    }
    return m;
}

/* A pointer from a dynamic entry: glibc relocates most in place, a read-only section (the vDSO)
 * keeps them relative to the load address. */
RECAP_NO_SANITIZE_EARLY static const void *dyn_ptr(const struct link_map *m, ElfW(Addr) v)
{
    return (const void *)(v < m->l_addr ? v + m->l_addr : v);
}

typedef struct {
    const ElfW(Sym) *symtab;
    const char *strtab;
    const uint32_t *gnu_hash, *sysv_hash;
    const ElfW(Half) *versym;
} dyninfo_t;

RECAP_NO_SANITIZE_EARLY static void dyn_info(const struct link_map *m, dyninfo_t *di)
{
    const ElfW(Dyn) *d;

    memset(di, 0, sizeof(*di));
    for (d = m->l_ld; d != NULL && d->d_tag != DT_NULL; d++)
        switch (d->d_tag) {
        case DT_SYMTAB: di->symtab = dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_STRTAB: di->strtab = dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_GNU_HASH: di->gnu_hash = dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_HASH: di->sysv_hash = dyn_ptr(m, d->d_un.d_ptr); break;
        case DT_VERSYM: di->versym = dyn_ptr(m, d->d_un.d_ptr); break;
        default: break;
        }
}

/* Symbol i as glibc's unversioned lookup would take it: defined, global or weak, and the
 * default version. */
RECAP_NO_SANITIZE_EARLY static void *sym_match(const struct link_map *m, const dyninfo_t *di,
                                               uint32_t i, const char *name)
{
    const ElfW(Sym) *s = &di->symtab[i];
    int bind = ELF64_ST_BIND(s->st_info);

    if (s->st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK))
        return NULL;
    if (di->versym != NULL && ((di->versym[i] & 0x8000) != 0 || di->versym[i] == 0))
        return NULL;
    if (strcmp(di->strtab + s->st_name, name) != 0)
        return NULL;
    return (void *)(m->l_addr + s->st_value);
}

RECAP_NO_SANITIZE_EARLY static void *gnu_lookup(const struct link_map *m, const dyninfo_t *di,
                                                const char *name)
{
    const uint32_t *h = di->gnu_hash, nbuckets = h[0], symoffset = h[1], nbloom = h[2];
    const unsigned shift = h[3], bits = sizeof(ElfW(Addr)) * 8;
    const ElfW(Addr) *bloom = (const ElfW(Addr) *)(h + 4);
    const uint32_t *buckets = (const uint32_t *)(bloom + nbloom), *chain = buckets + nbuckets;
    uint32_t hash = 5381, i;
    const unsigned char *c;
    ElfW(Addr) word;

    for (c = (const unsigned char *)name; *c != '\0'; c++)
        hash = hash * 33 + *c;
    if (nbuckets == 0 || nbloom == 0)
        return NULL;
    word = bloom[(hash / bits) % nbloom];
    if (((word >> (hash % bits)) & (word >> ((hash >> shift) % bits)) & 1) == 0)
        return NULL;
    for (i = buckets[hash % nbuckets]; i >= symoffset && i != 0; i++) {
        uint32_t h2 = chain[i - symoffset];
        void *p;

        if ((hash | 1) == (h2 | 1) && (p = sym_match(m, di, i, name)) != NULL)
            return p;
        if (h2 & 1)
            break;
    }
    return NULL;
}

RECAP_NO_SANITIZE_EARLY static void *sysv_lookup(const struct link_map *m, const dyninfo_t *di,
                                                 const char *name)
{
    const uint32_t nbuckets = di->sysv_hash[0], *buckets = di->sysv_hash + 2,
                   *chain = buckets + nbuckets;
    uint32_t hash = 0, g, i;
    const unsigned char *c;
    void *p;

    for (c = (const unsigned char *)name; *c != '\0'; c++) {
        hash = (hash << 4) + *c;
        g = hash & 0xf0000000u;
        if (g != 0)
            hash ^= g >> 24;
        hash &= ~g;
    }
    if (nbuckets == 0)
        return NULL;
    for (i = buckets[hash % nbuckets]; i != STN_UNDEF; i = chain[i])
        if ((p = sym_match(m, di, i, name)) != NULL)
            return p;
    return NULL;
}

RECAP_NO_SANITIZE_EARLY void *recap__lookup_own(const char *name)
{
    struct link_map *self = self_map();
    dyninfo_t di;

    if (self == NULL)
        return NULL;
    dyn_info(self, &di);
    if (di.symtab == NULL || di.strtab == NULL)
        return NULL;
    if (di.gnu_hash != NULL)
        return gnu_lookup(self, &di, name);
    if (di.sysv_hash != NULL)
        return sysv_lookup(self, &di, name);
    return NULL;
}

/* ---- a group of objects, breadth first through DT_NEEDED ---- */

#define GROUP_MAX 256

typedef struct {
    void *handle[GROUP_MAX];
    struct link_map *map[GROUP_MAX];
    int n;
} group_t;

static struct link_map *map_of_handle(void *h)
{
    struct link_map *m = NULL;

    return dlinfo(h, RTLD_DI_LINKMAP, &m) == 0 ? m : NULL;
}

/* Keeps h (a reference of our own) unless its object is already listed. */
static void group_add(group_t *g, void *h)
{
    struct link_map *m = map_of_handle(h);
    int i;

    for (i = 0; m != NULL && i < g->n; i++)
        if (g->map[i] == m)
            m = NULL;
    if (m == NULL || g->n == GROUP_MAX) {
        recap__dlclose(h);
        return;
    }
    g->handle[g->n] = h;
    g->map[g->n++] = m;
}

/* The objects m needs, as loaded: a RTLD_NOLOAD open by the name it asks for. */
static void group_add_needed(group_t *g, const struct link_map *m)
{
    const ElfW(Dyn) *d;
    dyninfo_t di;
    void *h;

    dyn_info(m, &di);
    if (di.strtab == NULL)
        return;
    for (d = m->l_ld; d != NULL && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_NEEDED &&
            (h = recap__dlopen(di.strtab + d->d_un.d_val, RTLD_LAZY | RTLD_NOLOAD)) != NULL)
            group_add(g, h);
}

static void group_free(group_t *g)
{
    while (g->n > 0)
        recap__dlclose(g->handle[--g->n]);
}

/* The object's own definition (not one of its dependencies'). */
static void *own_definition(void *h, struct link_map *m, const char *name)
{
    void *p = recap__dlsym(h, name);

    return p != NULL && object_of(p) == m ? p : NULL;
}

/* The first definition in start's group, breadth first, skipping librecap, and start itself
 * unless with_start. */
static void *group_search(struct link_map *start, int with_start, const char *name)
{
    struct link_map *self = self_map();
    group_t g;
    void *h, *p = NULL;
    int i;

    g.n = 0;
    h = recap__dlopen(start->l_name[0] != '\0' ? start->l_name : NULL, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL)
        return NULL;
    group_add(&g, h);
    for (i = 0; i < g.n && p == NULL; i++) {
        if (g.map[i] != self && (i > 0 || with_start))
            p = own_definition(g.handle[i], g.map[i], name);
        if (p == NULL)
            group_add_needed(&g, g.map[i]);
    }
    group_free(&g);
    return p;
}

static struct link_map *main_map(void)
{
    static struct link_map *main_m;
    struct link_map *m = __atomic_load_n(&main_m, __ATOMIC_ACQUIRE);
    void *h;

    if (m == NULL && (h = recap__dlopen(NULL, RTLD_LAZY)) != NULL) {
        m = map_of_handle(h);
        recap__dlclose(h);
        __atomic_store_n(&main_m, m, __ATOMIC_RELEASE);
    }
    return m;
}

/* The global scope without librecap. */
static void *global_without_recap(const char *name)
{
    void *p = recap__dlsym(RTLD_DEFAULT, name);

    if (p != NULL && object_of(p) == self_map())
        p = recap__dlsym(RTLD_NEXT, name); /* librecap comes right after the program */
    return p;
}

void *recap__lookup_without_recap(void *handle, const char *name, const void *caller)
{
    struct link_map *self = self_map(), *c, *hm;
    void *p;

    if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) {
        /* glibc takes an address in no object for the program's. */
        c = object_of(caller);
        if (c == NULL)
            c = main_map();
        if (handle == RTLD_DEFAULT) {
            p = global_without_recap(name);
            if (p == NULL && c != NULL && c != main_map() && c != self)
                p = group_search(c, 1, name);
            return p;
        }
        if (c == NULL || c == main_map())
            return recap__dlsym(RTLD_NEXT, name);
        p = group_search(c, 0, name);
        if (p == NULL && (p = recap__dlsym(RTLD_NEXT, name)) != NULL && object_of(p) == c)
            p = NULL;
        return p;
    }
    p = recap__dlsym(handle, name);
    if (p == NULL || object_of(p) != self || (hm = map_of_handle(handle)) == self || hm == NULL)
        return p;
    if (hm == main_map())
        return recap__dlsym(RTLD_NEXT, name);
    return group_search(hm, 1, name);
}

void *recap__lookup_loaded_driver(const char *name)
{
    const char *path = getenv("RECAP_CUDA_DRIVER");
    void *h, *p;

    if (path == NULL || *path == '\0')
        path = "libcuda.so.1";
    h = recap__dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (h == NULL)
        return NULL;
    p = recap__dlsym(h, name);
    recap__dlclose(h);
    return p;
}

/* dl_iterate_phdr callback: the names of the loaded libcudart copies. Only copies them: the
 * loader's list lock is held here, and opening anything under it would invert the loader's lock
 * order against a concurrent dlclose. */
#define CUDARTS 8
typedef struct {
    char name[CUDARTS][512];
    int n;
} cudarts_t;

static int cudart_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    cudarts_t *c = data;

    (void)size;
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "libcudart") != NULL &&
        strlen(info->dlpi_name) < sizeof(c->name[0]) && c->n < CUDARTS)
        strcpy(c->name[c->n++], info->dlpi_name);
    return 0;
}

void *recap__lookup_runtime(const char *name)
{
    cudarts_t c;
    void *p = recap__dlsym(RTLD_NEXT, name), *h;
    int i;

    c.n = 0;
    if (p == NULL)
        dl_iterate_phdr(cudart_cb, &c);
    for (i = 0; i < c.n && p == NULL; i++)
        if ((h = recap__dlopen(c.name[i], RTLD_LAZY | RTLD_NOLOAD)) != NULL) {
            p = recap__dlsym(h, name);
            recap__dlclose(h);
        }
    return p;
}

void recap__lookup_set_dlerror(const char *name, void *answer)
{
    if (answer != NULL) {
        (void)dlerror(); /* a successful dlsym leaves no error pending */
        return;
    }
    /* Any failed lookup of the name leaves glibc's "undefined symbol" text. */
    if (recap__dlsym(RTLD_NEXT, name) != NULL)
        (void)dlvsym(RTLD_NEXT, name, "RECAP_UNDEFINED");
}

/* ---- the cache ---- */

static int generation_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    recap_lookup_gen_t *g = data;

    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
        g->adds = info->dlpi_adds;
        g->subs = info->dlpi_subs;
        g->valid = 1;
    }
    return 1;
}

recap_lookup_gen_t recap__lookup_generation(void)
{
    recap_lookup_gen_t g = {0, 0, 0};

    dl_iterate_phdr(generation_cb, &g);
    return g;
}

#define CACHE_SLOTS 128
#define CACHE_NAME 48

typedef struct {
    const void *handle, *caller;
    void *answer;
    unsigned long long adds, subs;
    char name[CACHE_NAME];
} slot_t;

static slot_t cache[CACHE_SLOTS];
/* A try-lock: a thread that finds it taken looks the name up itself, so a fork while another
 * thread held it costs the child its cache, never a hang. */
static int cache_busy;

static slot_t *slot_for(const void *handle, const void *caller, const char *name)
{
    uint64_t h = 1469598103934665603ull ^ (uintptr_t)handle ^ ((uintptr_t)caller << 7);
    const char *c;

    for (c = name; *c != '\0'; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    return &cache[(h ^ (h >> 29)) % CACHE_SLOTS];
}

int recap__lookup_cache_get(recap_lookup_gen_t gen, void *handle, const void *caller,
                            const char *name, void **answer_p)
{
    slot_t *s = slot_for(handle, caller, name);
    int hit;

    if (!gen.valid || __atomic_exchange_n(&cache_busy, 1, __ATOMIC_ACQUIRE))
        return 0;
    hit = s->handle == handle && s->caller == caller && s->adds == gen.adds &&
          s->subs == gen.subs && strcmp(s->name, name) == 0;
    if (hit)
        *answer_p = s->answer;
    __atomic_store_n(&cache_busy, 0, __ATOMIC_RELEASE);
    return hit;
}

void recap__lookup_cache_put(recap_lookup_gen_t gen, void *handle, const void *caller,
                             const char *name, void *answer)
{
    slot_t *s = slot_for(handle, caller, name);

    if (!gen.valid || strlen(name) >= CACHE_NAME ||
        __atomic_exchange_n(&cache_busy, 1, __ATOMIC_ACQUIRE))
        return;
    s->handle = handle;
    s->caller = caller;
    s->answer = answer;
    s->adds = gen.adds;
    s->subs = gen.subs;
    strcpy(s->name, name);
    __atomic_store_n(&cache_busy, 0, __ATOMIC_RELEASE);
}
