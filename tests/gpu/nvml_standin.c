/* A stand-in for libnvidia-ml.so.1 with scripted values, for tests only.
 *
 * The real nvidia-ml-py (pynvml) loads it in place of the driver's library, so pynvml's own
 * ctypes structures, versions and return codes are exercised. It implements the C functions
 * llmtop's GPU sampler calls; every other symbol is absent, which pynvml reports as
 * NVML_ERROR_FUNCTION_NOT_FOUND, as an older driver would.
 *
 * The script is a text file named by NVML_STANDIN_SCRIPT, read by nvmlInitWithFlags and by
 * standin_load(path). One statement per line, '#' starts a comment:
 *   device I name TEXT...            device I uuid TEXT
 *   device I util GPU MEM            device I memory TOTAL FREE USED      device I power MW
 *   device I pcie TX_KBS RX_KBS
 *   device I gpm 0|1                 device I metric ID VALUE [RET]       (whole GPU)
 *   device I proc PID USED_BYTES     device I procutil PID SM TIMESTAMP_US
 *   device I nvlinks COUNT           device I nvlink LINK TX_KIB RX_KIB
 *   device I violation POLICY NS     device I fail FUNCTION|* RET
 *   device I mig 0|1                 device I gi SLOT GI_ID NAME...
 *   device I gimetric GI_ID ID VALUE [RET]
 * Counts for tests: standin_live_samples() (GPM samples allocated and not freed),
 * standin_calls(name) (calls of one function since the last load).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXDEV 8
#define MAXM 32
#define MAXP 16
#define MAXL 18
#define MAXGI 7
#define MAXF 32

typedef int nvmlReturn_t;
enum { OK = 0, UNINIT = 1, INVALID = 2, NOT_SUPPORTED = 3, NOT_FOUND = 6, INSUFFICIENT = 7,
       LOST = 15, UNKNOWN = 999 };

typedef struct { unsigned id; double value; int ret; int gi; } metric_t;
typedef struct { unsigned pid; unsigned long long used; } proc_t;
typedef struct { unsigned pid; unsigned sm, mem; unsigned long long ts; } putil_t;
typedef struct { char fn[64]; int ret; } fail_t;
typedef struct { int present; unsigned gi_id; char name[96]; } gi_t;

typedef struct dev_s {
    int index, mig_parent, mig_slot; /* mig_parent >= 0: a MIG device handle */
    char name[96], uuid[96];
    unsigned util_gpu, util_mem, power_mw, pcie_tx, pcie_rx;
    unsigned long long mem_total, mem_free, mem_used;
    int gpm, mig, nlinks;
    metric_t metrics[MAXM]; int nmetrics;
    proc_t procs[MAXP]; int nprocs;
    putil_t putil[MAXP]; int nputil;
    unsigned long long link_tx[MAXL], link_rx[MAXL];
    unsigned long long viol[12]; int has_viol[12];
    fail_t fails[MAXF]; int nfails;
    gi_t gis[MAXGI];
} dev_t_;

typedef struct { int magic, dev, gi; unsigned long long seq; } sample_t;

static dev_t_ devs[MAXDEV];
static dev_t_ migs[MAXDEV][MAXGI];
static int ndev, inited;
static long live_samples;
static unsigned long long seq;
static struct { char fn[64]; long n; } calls[64];
static int ncalls;

static void count(const char *fn) {
    for (int i = 0; i < ncalls; i++)
        if (!strcmp(calls[i].fn, fn)) { calls[i].n++; return; }
    if (ncalls < 64) { snprintf(calls[ncalls].fn, 64, "%s", fn); calls[ncalls++].n = 1; }
}

long standin_calls(const char *fn) {
    for (int i = 0; i < ncalls; i++)
        if (!strcmp(calls[i].fn, fn)) return calls[i].n;
    return 0;
}

long standin_live_samples(void) { return live_samples; }

static char *rest(char *s) { /* the rest of a line after the current token, trimmed */
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = 0;
    return s;
}

int standin_load(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    memset(devs, 0, sizeof devs);
    memset(migs, 0, sizeof migs);
    ndev = 0; ncalls = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        int i, off = 0;
        char key[32];
        if (sscanf(line, " device %d %31s %n", &i, key, &off) < 2 || i < 0 || i >= MAXDEV) continue;
        dev_t_ *d = &devs[i];
        char *a = line + off;
        if (i + 1 > ndev) ndev = i + 1;
        d->index = i; d->mig_parent = -1;
        if (!strcmp(key, "name")) snprintf(d->name, sizeof d->name, "%s", rest(a));
        else if (!strcmp(key, "uuid")) snprintf(d->uuid, sizeof d->uuid, "%s", rest(a));
        else if (!strcmp(key, "util")) sscanf(a, "%u %u", &d->util_gpu, &d->util_mem);
        else if (!strcmp(key, "memory")) sscanf(a, "%llu %llu %llu", &d->mem_total, &d->mem_free, &d->mem_used);
        else if (!strcmp(key, "power")) sscanf(a, "%u", &d->power_mw);
        else if (!strcmp(key, "pcie")) sscanf(a, "%u %u", &d->pcie_tx, &d->pcie_rx);
        else if (!strcmp(key, "gpm")) sscanf(a, "%d", &d->gpm);
        else if (!strcmp(key, "mig")) sscanf(a, "%d", &d->mig);
        else if (!strcmp(key, "nvlinks")) sscanf(a, "%d", &d->nlinks);
        else if ((!strcmp(key, "metric") || !strcmp(key, "gimetric")) && d->nmetrics < MAXM) {
            metric_t *m = &d->metrics[d->nmetrics];
            m->gi = -1; m->ret = OK;
            int n = !strcmp(key, "metric") ? sscanf(a, "%u %lf %d", &m->id, &m->value, &m->ret)
                                           : sscanf(a, "%d %u %lf %d", &m->gi, &m->id, &m->value, &m->ret);
            if (n >= 2) d->nmetrics++;
        } else if (!strcmp(key, "proc") && d->nprocs < MAXP) {
            proc_t *p = &d->procs[d->nprocs];
            if (sscanf(a, "%u %llu", &p->pid, &p->used) == 2) d->nprocs++;
        } else if (!strcmp(key, "procutil") && d->nputil < MAXP) {
            putil_t *p = &d->putil[d->nputil];
            if (sscanf(a, "%u %u %llu", &p->pid, &p->sm, &p->ts) == 3) d->nputil++;
        } else if (!strcmp(key, "nvlink")) {
            int l; unsigned long long tx, rx;
            if (sscanf(a, "%d %llu %llu", &l, &tx, &rx) == 3 && l >= 0 && l < MAXL) {
                d->link_tx[l] = tx; d->link_rx[l] = rx;
            }
        } else if (!strcmp(key, "violation")) {
            int p; unsigned long long ns;
            if (sscanf(a, "%d %llu", &p, &ns) == 2 && p >= 0 && p < 12) { d->viol[p] = ns; d->has_viol[p] = 1; }
        } else if (!strcmp(key, "fail") && d->nfails < MAXF) {
            fail_t *x = &d->fails[d->nfails];
            if (sscanf(a, "%63s %d", x->fn, &x->ret) == 2) d->nfails++;
        } else if (!strcmp(key, "gi")) {
            int slot, n = 0; unsigned id;
            if (sscanf(a, "%d %u %n", &slot, &id, &n) >= 2 && slot >= 0 && slot < MAXGI) {
                gi_t *g = &d->gis[slot];
                g->present = 1; g->gi_id = id;
                snprintf(g->name, sizeof g->name, "%s", rest(a + n));
            }
        }
    }
    fclose(f);
    for (int i = 0; i < ndev; i++)
        for (int s = 0; s < MAXGI; s++) {
            dev_t_ *m = &migs[i][s];
            m->index = i; m->mig_parent = i; m->mig_slot = s;
            snprintf(m->name, sizeof m->name, "%s", devs[i].gis[s].name);
            snprintf(m->uuid, sizeof m->uuid, "MIG-%d-%d", i, s);
        }
    return ndev;
}

/* the return code scripted for this device and function, else OK */
static int failing(const dev_t_ *d, const char *fn) {
    count(fn);
    if (!inited) return UNINIT;
    if (!d) return INVALID;
    const dev_t_ *p = d->mig_parent >= 0 ? &devs[d->mig_parent] : d;
    for (int i = 0; i < p->nfails; i++)
        if (!strcmp(p->fails[i].fn, fn) || !strcmp(p->fails[i].fn, "*")) return p->fails[i].ret;
    return OK;
}
#define CHECK(d, fn) do { int r_ = failing((d), (fn)); if (r_) return r_; } while (0)

nvmlReturn_t nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    const char *path = getenv("NVML_STANDIN_SCRIPT");
    if (!path || standin_load(path) < 0) return UNKNOWN;
    inited = 1;
    return OK;
}
nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlShutdown(void) { count("nvmlShutdown"); inited = 0; return OK; }

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case OK: return "Success";
    case UNINIT: return "Uninitialized";
    case INVALID: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case NOT_FOUND: return "Not Found";
    case INSUFFICIENT: return "Insufficient Size";
    case 13: return "Function Not Found";
    case LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) {
    count("nvmlDeviceGetCount_v2");
    if (!inited) return UNINIT;
    *n = (unsigned)ndev;
    return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, dev_t_ **h) {
    if (i >= (unsigned)ndev) return INVALID;
    CHECK(&devs[i], "nvmlDeviceGetHandleByIndex_v2");
    *h = &devs[i];
    return OK;
}

nvmlReturn_t nvmlDeviceGetName(dev_t_ *d, char *buf, unsigned len) {
    CHECK(d, "nvmlDeviceGetName");
    snprintf(buf, len, "%s", d->name);
    return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(dev_t_ *d, char *buf, unsigned len) {
    CHECK(d, "nvmlDeviceGetUUID");
    snprintf(buf, len, "%s", d->uuid);
    return OK;
}

typedef struct { unsigned gpu, memory; } util_t;
nvmlReturn_t nvmlDeviceGetUtilizationRates(dev_t_ *d, util_t *u) {
    CHECK(d, "nvmlDeviceGetUtilizationRates");
    u->gpu = d->util_gpu; u->memory = d->util_mem;
    return OK;
}

typedef struct { unsigned long long total, free, used; } mem_t;
nvmlReturn_t nvmlDeviceGetMemoryInfo(dev_t_ *d, mem_t *m) {
    CHECK(d, "nvmlDeviceGetMemoryInfo");
    m->total = d->mem_total; m->free = d->mem_free; m->used = d->mem_used;
    return OK;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(dev_t_ *d, unsigned *mw) {
    CHECK(d, "nvmlDeviceGetPowerUsage");
    *mw = d->power_mw;
    return OK;
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(dev_t_ *d, unsigned counter, unsigned *kbs) {
    CHECK(d, "nvmlDeviceGetPcieThroughput");
    if (counter > 1) return INVALID;
    *kbs = counter == 0 ? d->pcie_tx : d->pcie_rx;
    return OK;
}

typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } pinfo_t;
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(dev_t_ *d, unsigned *n, pinfo_t *out) {
    CHECK(d, "nvmlDeviceGetComputeRunningProcesses_v3");
    if (d->mig_parent >= 0) { *n = 0; return OK; }
    if (d->nprocs == 0) { *n = 0; return OK; }
    if (!out || *n < (unsigned)d->nprocs) { *n = (unsigned)d->nprocs; return INSUFFICIENT; }
    for (int i = 0; i < d->nprocs; i++) {
        out[i].pid = d->procs[i].pid; out[i].used = d->procs[i].used;
        out[i].gi = 0xFFFFFFFF; out[i].ci = 0xFFFFFFFF;
    }
    *n = (unsigned)d->nprocs;
    return OK;
}

typedef struct { unsigned pid; unsigned long long ts; unsigned sm, mem, enc, dec; } psample_t;
nvmlReturn_t nvmlDeviceGetProcessUtilization(dev_t_ *d, psample_t *out, unsigned *n,
                                             unsigned long long last_seen) {
    CHECK(d, "nvmlDeviceGetProcessUtilization");
    if (d->mig_parent >= 0 || d->mig) return NOT_SUPPORTED;
    unsigned k = 0;
    for (int i = 0; i < d->nputil; i++) k += d->putil[i].ts > last_seen;
    if (k == 0) return NOT_FOUND;
    if (!out || *n < k) { *n = k; return INSUFFICIENT; }
    k = 0;
    for (int i = 0; i < d->nputil; i++) {
        if (d->putil[i].ts <= last_seen) continue;
        out[k].pid = d->putil[i].pid; out[k].ts = d->putil[i].ts;
        out[k].sm = d->putil[i].sm; out[k].mem = 0; out[k].enc = 0; out[k].dec = 0;
        k++;
    }
    *n = k;
    return OK;
}

typedef struct {
    unsigned fieldId, scopeId;
    long long timestamp, latencyUsec;
    unsigned valueType;
    int ret;
    union { double d; unsigned ui; unsigned long ul; unsigned long long ull; long long sll; int si; unsigned short us; } value;
} field_t;
nvmlReturn_t nvmlDeviceGetFieldValues(dev_t_ *d, int n, field_t *v) {
    CHECK(d, "nvmlDeviceGetFieldValues");
    for (int i = 0; i < n; i++) {
        field_t *f = &v[i];
        f->ret = OK; f->valueType = 3; f->timestamp = 0; f->latencyUsec = 0;
        if (f->fieldId == 91 && d->nlinks > 0) { f->valueType = 1; f->value.ui = (unsigned)d->nlinks; }
        else if ((f->fieldId == 138 || f->fieldId == 139) && f->scopeId < (unsigned)d->nlinks)
            f->value.ull = f->fieldId == 138 ? d->link_tx[f->scopeId] : d->link_rx[f->scopeId];
        else f->ret = NOT_SUPPORTED;
    }
    return OK;
}

typedef struct { unsigned long long reference, violation; } viol_t;
nvmlReturn_t nvmlDeviceGetViolationStatus(dev_t_ *d, unsigned policy, viol_t *v) {
    CHECK(d, "nvmlDeviceGetViolationStatus");
    if (policy >= 12 || !d->has_viol[policy]) return NOT_SUPPORTED;
    v->reference = 0; v->violation = d->viol[policy];
    return OK;
}

nvmlReturn_t nvmlDeviceGetMigMode(dev_t_ *d, unsigned *cur, unsigned *pending) {
    CHECK(d, "nvmlDeviceGetMigMode");
    *cur = *pending = (unsigned)d->mig;
    return OK;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(dev_t_ *d, unsigned *n) {
    CHECK(d, "nvmlDeviceGetMaxMigDeviceCount");
    *n = d->mig ? MAXGI : 0;
    return OK;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(dev_t_ *d, unsigned i, dev_t_ **h) {
    CHECK(d, "nvmlDeviceGetMigDeviceHandleByIndex");
    if (!d->mig || i >= MAXGI || !d->gis[i].present) return NOT_FOUND;
    *h = &migs[d->index][i];
    return OK;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(dev_t_ *d, unsigned *id) {
    CHECK(d, "nvmlDeviceGetGpuInstanceId");
    if (d->mig_parent < 0) return NOT_SUPPORTED;
    *id = devs[d->mig_parent].gis[d->mig_slot].gi_id;
    return OK;
}

/* ---- GPM ---- */
typedef struct { unsigned version, isSupportedDevice; } gpm_support_t;
nvmlReturn_t nvmlGpmQueryDeviceSupport(dev_t_ *d, gpm_support_t *s) {
    CHECK(d, "nvmlGpmQueryDeviceSupport");
    if (s->version != 1) return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    s->isSupportedDevice = (unsigned)d->gpm;
    return OK;
}

nvmlReturn_t nvmlGpmSampleAlloc(sample_t **out) {
    count("nvmlGpmSampleAlloc");
    if (!inited) return UNINIT;
    sample_t *s = calloc(1, sizeof *s);
    if (!s) return UNKNOWN;
    s->magic = 0x6770; s->dev = -1;
    live_samples++;
    *out = s;
    return OK;
}

nvmlReturn_t nvmlGpmSampleFree(sample_t *s) {
    count("nvmlGpmSampleFree");
    if (!s || s->magic != 0x6770) return INVALID;
    s->magic = 0;
    free(s);
    live_samples--;
    return OK;
}

static nvmlReturn_t take(dev_t_ *d, int gi, sample_t *s, const char *fn) {
    CHECK(d, fn);
    if (!s || s->magic != 0x6770) return INVALID;
    if (!d->gpm) return NOT_SUPPORTED;
    s->dev = d->index; s->gi = gi; s->seq = ++seq;
    return OK;
}
nvmlReturn_t nvmlGpmSampleGet(dev_t_ *d, sample_t *s) {
    if (d && d->mig) { count("nvmlGpmSampleGet"); return NOT_SUPPORTED; }
    return take(d, -1, s, "nvmlGpmSampleGet");
}
nvmlReturn_t nvmlGpmMigSampleGet(dev_t_ *d, unsigned gi, sample_t *s) {
    if (d) {
        int found = 0;
        for (int i = 0; i < MAXGI; i++) found |= d->gis[i].present && d->gis[i].gi_id == gi;
        if (!found) { count("nvmlGpmMigSampleGet"); return NOT_FOUND; }
    }
    return take(d, (int)gi, s, "nvmlGpmMigSampleGet");
}

typedef struct { char *shortName, *longName, *unit; } minfo_t;
typedef struct { unsigned metricId; int ret; double value; minfo_t info; } gmetric_t;
typedef struct { unsigned version, numMetrics; sample_t *s1, *s2; gmetric_t metrics[477]; } gget_t;
nvmlReturn_t nvmlGpmMetricsGet(gget_t *g) {
    count("nvmlGpmMetricsGet");
    if (!inited) return UNINIT;
    if (g->version != 1) return 25;
    if (!g->s1 || !g->s2 || g->s1->magic != 0x6770 || g->s2->magic != 0x6770) return INVALID;
    if (g->s1->dev != g->s2->dev || g->s1->gi != g->s2->gi || g->s2->seq <= g->s1->seq) return INVALID;
    if (g->numMetrics > 477) return INVALID;
    const dev_t_ *d = &devs[g->s1->dev];
    for (unsigned i = 0; i < g->numMetrics; i++) {
        gmetric_t *m = &g->metrics[i];
        m->ret = NOT_SUPPORTED; m->value = 0;
        m->info.shortName = m->info.longName = m->info.unit = NULL;
        for (int k = 0; k < d->nmetrics; k++)
            if (d->metrics[k].id == m->metricId && d->metrics[k].gi == g->s1->gi) {
                m->ret = d->metrics[k].ret; m->value = d->metrics[k].value;
            }
    }
    return OK;
}
