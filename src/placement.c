/* SPDX-License-Identifier: MIT */
/*
 * placement.c - placement: cores and NUMA node(s).
 *
 * Chooses, once at open, the PUs the workers run on and the NUMA
 * node(s) the cache and ring live on: from cpuset, numa_node,
 * pci_bus_id, or every PU the process may use, in that order. Physical
 * cores come before hyper-threads; the first reserve_cores cores are
 * left to the trainer. hwloc supplies the topology (this machine, or an
 * XML/synthetic one for planning and tests); without it
 * (COORDL_NO_HWLOC) each PU is a core and there is no NUMA placement.
 *
 * Owns:  L->place: the PUs the workers run on, the reserved ones, the
 *        arenas' node, and whether pinning and binding worked
 * Lock:  written at open (and by arena at open), read-only after
 * Calls: status (lower layers only: src/modules.txt; tools/check-layers.py
 *        checks this line).
 */
#include "platform.h"
#include "placement_state.h"
#include "placement.h"
#include "status.h"
#include "handle.h"

/* Strict "0-7,16-23" parser into a membership array. */
static int cdl__parse_pu_list(const char *text, unsigned char *in) {
    const char *p = text;
    int any = 0;
    memset(in, 0, CDL_MAX_PUS);
    while (*p) {
        if (*p < '0' || *p > '9') return 0;
        long a = strtol(p, (char **)&p, 10), b = a;
        if (*p == '-') {
            p++;
            if (*p < '0' || *p > '9') return 0;
            b = strtol(p, (char **)&p, 10);
        }
        if (a < 0 || b < a || b >= CDL_MAX_PUS) return 0;
        for (long i = a; i <= b; i++) in[i] = 1;
        any = 1;
        if (*p == ',') {
            p++;
            if (!*p) return 0;
        } else if (*p) {
            return 0;
        }
    }
    return any;
}

/* "0,2,4-6" from a list of PUs (any order), into buf. */
CDL_PRIVATE void cdl__format_pu_list(const int *pus, int n, char *buf, size_t cap) {
    unsigned char in[CDL_MAX_PUS];
    memset(in, 0, sizeof in);
    for (int i = 0; i < n; i++)
        if (pus[i] >= 0 && pus[i] < CDL_MAX_PUS) in[pus[i]] = 1;
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < CDL_MAX_PUS && len + 24 < cap; i++) {
        if (!in[i]) continue;
        int j = i;
        while (j + 1 < CDL_MAX_PUS && in[j + 1]) j++;
        int w = j > i ? snprintf(buf + len, cap - len, "%s%d-%d", len ? "," : "", i, j)
                      : snprintf(buf + len, cap - len, "%s%d", len ? "," : "", i);
        if (w > 0) len += (size_t)w;
        i = j;
    }
}

/* Builds the ordered worker list from cores given as PU groups: `core_of`
 * lists PUs core by core, `core_start[k]..core_start[k+1]` being core k. */
static coordl_status cdl__place_from_cores(coordl *L, cdl__placement *P, const int *pus,
                                           const int *core_start, int ncores) {
    /* Several MPI ranks on one node with the default placement: each takes
     * its own contiguous slice of the cores instead of all piling onto the
     * first ones (measured: 4 ranks on one PU ran at half the speed). */
    if (L->peers.node_ranks > 1 && !L->cfg.cpuset && L->cfg.numa_node < 0 && !L->cfg.pci_bus_id) {
        int lo = (int)((int64_t)ncores * L->peers.node_rank / L->peers.node_ranks);
        int hi = (int)((int64_t)ncores * (L->peers.node_rank + 1) / L->peers.node_ranks);
        if (hi <= lo) { lo = L->peers.node_rank % ncores; hi = lo + 1; }
        core_start += lo;
        ncores = hi - lo;
    }
    const int reserve = L->cfg.reserve_cores;
    if (reserve >= ncores)
        return cdl__open_fail(COORDL_ERR_INVALID, "reserve_cores: %d leaves no core for the workers "
                              "(the chosen set has %d core%s)", reserve, ncores, ncores == 1 ? "" : "s");
    int total = core_start[ncores];
    P->worker_pus = cdl__malloc(L, (size_t)total * sizeof(int));
    P->reserved_pus = cdl__malloc(L, (size_t)total * sizeof(int) + sizeof(int));
    if (!P->worker_pus || !P->reserved_pus) return cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    for (int k = 0; k < reserve; k++)
        for (int i = core_start[k]; i < core_start[k + 1]; i++) P->reserved_pus[P->nreserved++] = pus[i];
    /* round r takes the r-th PU of every remaining core */
    for (int r = 0;; r++) {
        int added = 0;
        for (int k = reserve; k < ncores; k++)
            if (core_start[k] + r < core_start[k + 1]) {
                P->worker_pus[P->nworker_pus++] = pus[core_start[k] + r];
                added = 1;
            }
        if (!added) break;
    }
    P->ncores = ncores - reserve;
    return COORDL_OK;
}

static coordl_status cdl__allowed_pus(unsigned char *allowed) {
    cpu_set_t set;
    memset(allowed, 0, CDL_MAX_PUS);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "cannot read this process's CPU affinity: %s", strerror(errno));
    for (int i = 0; i < CDL_MAX_PUS && i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) allowed[i] = 1;
    return COORDL_OK;
}

static coordl_status cdl__check_cpuset(const coordl *L, const unsigned char *allowed, unsigned char *chosen) {
    if (!cdl__parse_pu_list(L->cfg.cpuset, chosen))
        return cdl__open_fail(COORDL_ERR_INVALID, "cpuset: \"%s\" is not a list like \"0-7,16-23\"", L->cfg.cpuset);
    for (int i = 0; i < CDL_MAX_PUS; i++)
        if (chosen[i] && !allowed[i])
            return cdl__open_fail(COORDL_ERR_INVALID, "cpuset: PU %d in \"%s\" is not among the PUs this "
                                  "process may use", i, L->cfg.cpuset);
    return COORDL_OK;
}

#ifdef COORDL_NO_HWLOC
CDL_PRIVATE coordl_status cdl__placement_choose(coordl *L, cdl__placement *P) {
    memset(P, 0, sizeof *P);
    P->node = -1;
    if (L->cfg.numa_node >= 0 || L->cfg.pci_bus_id || L->cfg.topology)
        return cdl__open_fail(COORDL_ERR_UNSUPPORTED, "%s: needs hwloc; this build has COORDL_NO_HWLOC",
                              L->cfg.numa_node >= 0 ? "numa_node" : L->cfg.pci_bus_id ? "pci_bus_id" : "topology");
    unsigned char allowed[CDL_MAX_PUS], chosen[CDL_MAX_PUS];
    coordl_status rc = cdl__allowed_pus(allowed);
    if (rc != COORDL_OK) return rc;
    if (L->cfg.cpuset) {
        rc = cdl__check_cpuset(L, allowed, chosen);
        if (rc != COORDL_OK) return rc;
    } else {
        memcpy(chosen, allowed, sizeof chosen);
    }
    int pus[CDL_MAX_PUS], starts[CDL_MAX_PUS + 1], n = 0;
    for (int i = 0; i < CDL_MAX_PUS; i++)
        if (chosen[i]) { starts[n] = n; pus[n++] = i; }
    starts[n] = n;
    return cdl__place_from_cores(L, P, pus, starts, n);
}
CDL_PRIVATE void cdl__placement_free(coordl *L, cdl__placement *P) {
    cdl__free(L, P->worker_pus);
    cdl__free(L, P->reserved_pus);
}
#else
/* Loads the topology: this machine's, or the configured XML/synthetic one
 * (then nothing is bound: P->simulate). */
static coordl_status cdl__place_load_topology(coordl *L, cdl__placement *P) {
    P->simulate = L->cfg.topology != NULL;
    if (hwloc_topology_init(&P->topo) != 0) {
        P->topo = NULL;
        return cdl__open_fail(COORDL_ERR_NOMEM, "hwloc: cannot initialise a topology");
    }
    if (L->cfg.pci_bus_id) hwloc_topology_set_io_types_filter(P->topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (L->cfg.topology) {
        const char *t = L->cfg.topology;
        int bad = strncmp(t, "synthetic:", 10) == 0 ? hwloc_topology_set_synthetic(P->topo, t + 10)
                                                    : hwloc_topology_set_xml(P->topo, t);
        if (bad) return cdl__open_fail(COORDL_ERR_INVALID, "topology: hwloc cannot read \"%s\"", t);
    }
    if (hwloc_topology_load(P->topo) != 0)
        return cdl__open_fail(COORDL_ERR_INVALID, "topology: hwloc cannot load %s",
                              L->cfg.topology ? L->cfg.topology : "this machine's topology");
    return COORDL_OK;
}

/* The PUs the placement may choose from: every PU of a simulated
 * topology, else those this process may run on. */
static coordl_status cdl__place_allowed(const cdl__placement *P, unsigned char *allowed) {
    if (!P->simulate) return cdl__allowed_pus(allowed);
    memset(allowed, 0, CDL_MAX_PUS);
    hwloc_const_cpuset_t all = hwloc_topology_get_topology_cpuset(P->topo);
    int i;
    hwloc_bitmap_foreach_begin(i, all) if (i < CDL_MAX_PUS) allowed[i] = 1;
    hwloc_bitmap_foreach_end();
    return COORDL_OK;
}

/* The chosen PUs (set) and memory nodes (P->nodeset), by precedence:
 * cpuset, numa_node, pci_bus_id, else every allowed PU; never outside the
 * allowed ones. */
static coordl_status cdl__place_choose_set(coordl *L, cdl__placement *P, const unsigned char *allowed,
                                           hwloc_bitmap_t set) {
    coordl_status rc = COORDL_OK;
    unsigned char chosen[CDL_MAX_PUS];
    if (L->cfg.cpuset) {
        rc = cdl__check_cpuset(L, allowed, chosen);
        for (int i = 0; rc == COORDL_OK && i < CDL_MAX_PUS; i++)
            if (chosen[i]) hwloc_bitmap_set(set, (unsigned)i);
        if (rc == COORDL_OK) hwloc_cpuset_to_nodeset(P->topo, set, P->nodeset);
    } else if (L->cfg.numa_node >= 0) {
        hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(P->topo, (unsigned)L->cfg.numa_node);
        if (!node)
            return cdl__open_fail(COORDL_ERR_INVALID, "numa_node: node %d does not exist (this topology has %d)",
                                  L->cfg.numa_node, hwloc_get_nbobjs_by_type(P->topo, HWLOC_OBJ_NUMANODE));
        hwloc_bitmap_copy(set, node->cpuset);
        hwloc_bitmap_only(P->nodeset, (unsigned)L->cfg.numa_node);
    } else if (L->cfg.pci_bus_id) {
        unsigned dom = 0, bus, dev, fn;
        char tail;
        const char *id = L->cfg.pci_bus_id;
        int ok = sscanf(id, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) == 4 ||
                 (dom = 0, sscanf(id, "%x:%x.%x%c", &bus, &dev, &fn, &tail) == 3);
        if (!ok)
            return cdl__open_fail(COORDL_ERR_INVALID, "pci_bus_id: \"%s\" is not a PCI address like \"0000:3b:00.0\"", id);
        hwloc_obj_t pci = hwloc_get_pcidev_by_busidstring(P->topo, id);
        if (!pci)
            return cdl__open_fail(COORDL_ERR_INVALID, "pci_bus_id: no PCI device %s in %s", id,
                                  L->cfg.topology ? L->cfg.topology : "this machine");
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(P->topo, pci);
        hwloc_bitmap_copy(set, anc->cpuset);
        hwloc_bitmap_copy(P->nodeset, anc->nodeset);
    } else {
        for (int i = 0; i < CDL_MAX_PUS; i++)
            if (allowed[i]) hwloc_bitmap_set(set, (unsigned)i);
        hwloc_cpuset_to_nodeset(P->topo, set, P->nodeset);
    }
    if (rc != COORDL_OK) return rc;
    for (int i = 0; i < CDL_MAX_PUS; i++)
        if (!allowed[i]) hwloc_bitmap_clr(set, (unsigned)i);
    if (hwloc_bitmap_iszero(set))
        return cdl__open_fail(COORDL_ERR_INVALID, "%s: the chosen PUs are not among those this process may use",
                              L->cfg.cpuset ? "cpuset" : L->cfg.numa_node >= 0 ? "numa_node" : "pci_bus_id");
    return COORDL_OK;
}

/* The set's PUs core by core in topology order (PUs not under a core
 * count as cores of their own), handed to cdl__place_from_cores. */
static coordl_status cdl__place_by_cores(coordl *L, cdl__placement *P, hwloc_const_bitmap_t set) {
    int *pus = cdl__malloc(L, CDL_MAX_PUS * sizeof(int));
    int *starts = cdl__malloc(L, (CDL_MAX_PUS + 1) * sizeof(int));
    coordl_status rc = pus && starts ? COORDL_OK : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    unsigned char seen[CDL_MAX_PUS];
    memset(seen, 0, sizeof seen);
    int n = 0, ncores = 0, i;
    for (hwloc_obj_t core = NULL; rc == COORDL_OK &&
         (core = hwloc_get_next_obj_by_type(P->topo, HWLOC_OBJ_CORE, core)) != NULL;) {
        const int first = n;
        hwloc_bitmap_foreach_begin(i, core->cpuset)
            if (i < CDL_MAX_PUS && hwloc_bitmap_isset(set, (unsigned)i) && !seen[i]) { pus[n++] = i; seen[i] = 1; }
        hwloc_bitmap_foreach_end();
        if (n > first) starts[ncores++] = first;
    }
    if (rc == COORDL_OK) {
        hwloc_bitmap_foreach_begin(i, set)
            if (i < CDL_MAX_PUS && !seen[i]) { starts[ncores++] = n; pus[n++] = i; seen[i] = 1; }
        hwloc_bitmap_foreach_end();
        starts[ncores] = n;
        rc = cdl__place_from_cores(L, P, pus, starts, ncores);
    }
    cdl__free(L, pus);
    cdl__free(L, starts);
    return rc;
}

CDL_PRIVATE coordl_status cdl__placement_choose(coordl *L, cdl__placement *P) {
    memset(P, 0, sizeof *P);
    P->node = -1;
    coordl_status rc = cdl__place_load_topology(L, P);
    unsigned char allowed[CDL_MAX_PUS];
    if (rc == COORDL_OK) rc = cdl__place_allowed(P, allowed);
    if (rc != COORDL_OK) return rc;
    P->nodeset = hwloc_bitmap_alloc();
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    rc = P->nodeset && set ? cdl__place_choose_set(L, P, allowed, set) : cdl__open_fail(COORDL_ERR_NOMEM, "out of memory");
    if (rc == COORDL_OK) rc = cdl__place_by_cores(L, P, set);
    if (rc == COORDL_OK) {
        P->nnodes = hwloc_bitmap_weight(P->nodeset);
        if (P->nnodes < 0) P->nnodes = 0;
        P->node = P->nnodes == 1 ? hwloc_bitmap_first(P->nodeset) : -1;
    }
    if (set) hwloc_bitmap_free(set);
    return rc;
}

CDL_PRIVATE void cdl__placement_free(coordl *L, cdl__placement *P) {
    cdl__free(L, P->worker_pus);
    cdl__free(L, P->reserved_pus);
    if (P->nodeset) hwloc_bitmap_free(P->nodeset);
    if (P->topo) hwloc_topology_destroy(P->topo);
    P->nodeset = NULL;
    P->topo = NULL;
}
#endif

/* Binds [p, p + bytes) to the chosen node(s) before it is touched. */
CDL_PRIVATE int cdl__placement_bind_memory(coordl *L, void *p, size_t bytes) {
#ifndef COORDL_NO_HWLOC
    cdl__placement *P = &L->place;
    if (!L->cfg.bind || P->simulate || !P->topo || P->nnodes < 1) return 0;
    hwloc_membind_policy_t pol = P->nnodes > 1 ? HWLOC_MEMBIND_INTERLEAVE : HWLOC_MEMBIND_BIND;
    return hwloc_set_area_membind(P->topo, p, bytes, P->nodeset, pol, HWLOC_MEMBIND_BYNODESET) == 0;
#else
    (void)L; (void)p; (void)bytes;
    return 0;
#endif
}

