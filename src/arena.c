/* SPDX-License-Identifier: MIT */
/*
 * arena.c - arenas: offset-addressed mmap regions.
 *
 * The cache slab and the batch ring are mmap'd regions addressed by
 * offsets, never by pointers stored inside them, so the same code can
 * later serve a POSIX shm object shared by sibling processes. Locking
 * (mlock) is tried per cache_pin; failure falls back to pageable memory
 * and is logged once.
 *
 * Owns:  nothing of its own: it maps, binds, pins and unmaps the arenas the
 *        cache (L->cache.arena) and the ring (L->ring.arena) own
 * Lock:  called at open, by coordl_set with the stream paused, and at close
 * Calls: status, placement (lower layers only: src/modules.txt;
 *        tools/check-layers.py checks this line).
 */
#include "platform.h"
#include "arena_state.h"
#include "arena.h"
#include "status.h"
#include "placement.h"
#include "handle.h"

/* Asks for transparent huge pages on a big anonymous mapping. Where THP is
 * "madvise" only (Debian's default), a mapping without this faults in 4 KiB
 * pages: on this project's VM a first touch costs ~15 us a page, so 64 MiB
 * costs ~0.25 s of CPU against ~5 ms in 2 MiB pages (measured). */
CDL_PRIVATE void cdl__arena_advise_huge(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    if (bytes >= (2u << 20)) (void)madvise(p, bytes, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}

/* Maps an arena, binds it to the chosen node(s) before any page is
 * touched, then page-locks it per cache_pin. `populate`: fault every page
 * in now (the ring: it is written at once, and a first touch costs ~15 us
 * a page on a VM); otherwise pages are locked as they fault in (the cache
 * fills over the first epoch, so locking it all up front would make open
 * pay for pages that may never be used). */
CDL_PRIVATE coordl_status cdl__arena_map(coordl *L, cdl__arena *a, size_t bytes,
                                    int populate, const char *what, const char *lower) {
    memset(a, 0, sizeof *a);
    if (bytes == 0) return COORDL_OK;
    bytes = cdl__round_up(bytes, cdl__page_size());
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return cdl__open_fail(COORDL_ERR_NOMEM, "cannot map %zu bytes for the %s: %s; lower %s",
                              bytes, what, strerror(errno), lower);
    a->base = p;
    a->bytes = bytes;
    cdl__arena_advise_huge(p, bytes); /* fewer page faults and TLB misses */
    if (!cdl__placement_bind_memory(L, p, bytes)) L->place.memory_bound_all = 0;
    if (L->cfg.cache_pin != COORDL_PIN_OFF) {
        int locked;
#ifdef MLOCK_ONFAULT
        locked = populate ? mlock(p, bytes) == 0 : mlock2(p, bytes, MLOCK_ONFAULT) == 0;
#else
        locked = mlock(p, bytes) == 0;
#endif
        if (locked) {
            a->locked = 1;
            L->stats.st.pinned_bytes += bytes;
        } else if (L->cfg.cache_pin == COORDL_PIN_REQUIRED) {
            int e = errno;
            munmap(p, bytes);
            a->base = NULL;
            return cdl__open_fail(COORDL_ERR_NOMEM,
                                  "cache_pin = COORDL_PIN_REQUIRED but the %s (%zu bytes) "
                                  "cannot be page-locked: %s (raise RLIMIT_MEMLOCK or grant "
                                  "CAP_IPC_LOCK, lower %s, or set cache_pin = COORDL_PIN_TRY)",
                                  what, bytes, strerror(e), lower);
        } else if (!L->place.pin_failed) {
            L->place.pin_failed = 1;
            snprintf(L->place.pin_error, sizeof L->place.pin_error, "%s", strerror(errno));
        }
    }
    if (populate && !a->locked) memset(p, 0, bytes); /* mlock already faulted it in */
    if (L->cfg.pin) {
        if (L->cfg.pin(L->cfg.pin_user, p, bytes, 1) == 0)
            a->pin_registered = 1;
        else
            cdl__log(L, COORDL_LOG_WARN, "pin callback failed for the %s", what);
    }
    return COORDL_OK;
}

/* Unregisters (pin callback) and unmaps an arena. A borrowed arena (part
 * of a group's mapping) is only unregistered: the mapping goes as one. */
CDL_PRIVATE void cdl__arena_unmap(coordl *L, cdl__arena *a) {
    if (!a->base) return;
    if (a->pin_registered && L->cfg.pin) L->cfg.pin(L->cfg.pin_user, a->base, a->bytes, 0);
    a->pin_registered = 0;
    if (a->borrowed) {
        a->base = NULL;
        return;
    }
    if (a->locked) {
        munlock(a->base, a->bytes);
        L->stats.st.pinned_bytes -= a->bytes;
    }
    munmap(a->base, a->bytes);
    a->base = NULL;
}

/* Registers a part of a group's mapping as an arena with the pin
 * callback, once; cdl__arena_unmap unregisters it before the unmap. */
CDL_PRIVATE void cdl__arena_borrow(coordl *L, cdl__arena *a, void *base, size_t bytes, const char *what) {
    memset(a, 0, sizeof *a);
    a->base = base;
    a->bytes = bytes;
    a->borrowed = 1;
    if (L->cfg.pin && bytes) {
        if (L->cfg.pin(L->cfg.pin_user, base, bytes, 1) == 0)
            a->pin_registered = 1;
        else
            cdl__log(L, COORDL_LOG_WARN, "pin callback failed for the %s", what);
    }
}

