/* The buffer assigner of the memory model, in C (hloscope.memory.assignment._py_assign is the specification:
 * this makes the same choices in the same order; tests/memory/test_buffer_assign.py holds the two equal over
 * every fixture and corpus module, and over random buffer sets).
 *
 * assign_run(buffers, operand_buffers, copies_of, tiled, times, alignment)
 *     -> (allocations, temp_buffers, temp_bytes, peak_time)
 *
 * buffers: the Liveness's list of Buffer (buffers[i].id == i); operand_buffers: buffer id -> tuple of buffer
 * ids; copies_of: buffer id -> collection of buffer ids; tiled: whether tuple index tables stay out of the temp
 * set; times: len(Liveness.sequence); alignment: the rounding of each temp buffer (1 on tiled modules).
 * allocations: one tuple (kind, size_bytes, buffer ids, live_out, readonly) per allocation, in the order they
 * were made. Raises ValueError for a buffer whose id is not its index or whose live range lies outside the
 * schedule, OverflowError for sizes or times beyond 64 bits (the caller then takes the Python assigner).
 *
 * Built as an optional extension (setup.py): without it the Python assigner runs (~2 us a buffer: 44 ms of the
 * memory footprint of the corpus's llama module, 22,000 buffers). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../_slot_fields.h"

enum { KIND_OTHER = 0, KIND_CONSTANT = 1, KIND_PARAMETER = 2 };
enum { ALLOC_PARAMETER = 0, ALLOC_CONSTANT = 1, ALLOC_TUPLE = 2, ALLOC_OUTPUT = 3 };
static const char *ALLOC_KINDS[] = {"parameter", "constant", "tuple", "output"};

static PyObject *s_constant, *s_parameter;

/* Room for more items in *items, an array of *cap items of item_size bytes: its capacity doubled (first_cap
 * items at first); 0, or -1 with MemoryError (*items as it was). */
static int grow(void **items, Py_ssize_t *cap, Py_ssize_t first_cap, size_t item_size) {
    Py_ssize_t more = *cap ? 2 * *cap : first_cap;
    void *v = PyMem_Realloc(*items, (size_t)more * item_size);
    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *items = v;
    *cap = more;
    return 0;
}

/* A growable array of Py_ssize_t. */
typedef struct {
    Py_ssize_t *v;
    Py_ssize_t n, cap;
} Vec;

static int vec_push(Vec *a, Py_ssize_t x) {
    if (a->n == a->cap && grow((void **)&a->v, &a->cap, 4, sizeof(Py_ssize_t)) < 0) {
        return -1;
    }
    a->v[a->n++] = x;
    return 0;
}

static int vec_insert(Vec *a, Py_ssize_t at, Py_ssize_t x) {
    if (vec_push(a, x) < 0) {
        return -1;
    }
    memmove(a->v + at + 1, a->v + at, (size_t)(a->n - 1 - at) * sizeof(Py_ssize_t));
    a->v[at] = x;
    return 0;
}

/* Per buffer, what the assigner reads. */
typedef struct {
    int64_t size, start, end, post_order;
    char kind, live_out, aliased, tuple_table;
    Py_ssize_t share_at, share_n; /* its share candidates: share_ids[share_at : share_at + share_n] */
} Buf;

/* One allocation; its buffers' ranges sorted by (start, end), as buffer ids (no two of them overlap but at a
 * shared end point, so their ends are sorted too). */
typedef struct {
    int kind;
    int64_t size;
    char live_out, readonly;
    Vec ids;    /* in the order assigned */
    Vec ranges; /* buffer ids sorted by (start, end) */
} Alloc;

typedef struct {
    Buf *b;
    Py_ssize_t nb;
    Py_ssize_t *share_ids;
    Alloc *allocs;
    Py_ssize_t nalloc, alloc_cap;
    Py_ssize_t *allocation_of; /* buffer id -> allocation index, -1 when none */
    /* reusable allocations by their first buffer: positions sorted by that buffer's start, and by its end */
    Vec anchor_index, anchor_first, by_start, by_end;
    Py_ssize_t *op_at, *op_n, *op_ids;     /* operand_buffers as CSR (op_at[i] < 0: none) */
    Py_ssize_t *copy_at, *copy_n, *copy_ids; /* copies_of as CSR */
} State;

/* The fields of a Buffer the assigner reads (FIELD_NAMES: the names, set at import), read from its slots when
 * the buffers are hloscope.memory.liveness.Buffer (../_slot_fields.h: 48 M instructions less of the memory
 * footprint of the corpus's mixtral module, 29,418 buffers of 10 fields). */
enum { F_ID, F_SIZE_BYTES, F_START, F_END, F_POST_ORDER, F_LIVE_OUT, F_ALIASED_PARAMETER, F_IS_TUPLE_TABLE, F_KIND,
       F_SHARE_CANDIDATES, N_FIELDS };
static PyObject *FIELD_NAMES[N_FIELDS];

/* Field k of obj (slot_field: at[k] when type is not NULL); a new reference or NULL. */
#define FIELD(obj, k) slot_field((obj), type, at[(k)], FIELD_NAMES[(k)])

/* Consume v (a new reference or NULL with an error) as a 64-bit int / a truth value into *out; 0 or -1. */
static int take_int64(PyObject *v, int64_t *out) {
    long long x;
    if (v == NULL) {
        return -1;
    }
    x = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = (int64_t)x;
    return 0;
}

static int take_flag(PyObject *v, char *out) {
    int t;
    if (v == NULL) {
        return -1;
    }
    t = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (t < 0) {
        return -1;
    }
    *out = (char)t;
    return 0;
}

/* The ids of an iterable of ints appended to ids; their count in *count. */
static int read_ids(PyObject *iterable, Vec *ids, Py_ssize_t *count) {
    PyObject *seq = PySequence_Fast(iterable, "expected a collection of buffer ids");
    Py_ssize_t i, n;
    if (seq == NULL) {
        return -1;
    }
    n = PySequence_Fast_GET_SIZE(seq);
    for (i = 0; i < n; i++) {
        Py_ssize_t x = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if ((x == -1 && PyErr_Occurred()) || vec_push(ids, x) < 0) {
            Py_DECREF(seq);
            return -1;
        }
    }
    Py_DECREF(seq);
    *count = n;
    return 0;
}

/* buffer id -> ids, from a dict, as CSR arrays indexed by buffer id. */
static int read_map(PyObject *map, Py_ssize_t nb, Py_ssize_t **at, Py_ssize_t **count, Vec *ids) {
    PyObject *key, *value;
    Py_ssize_t pos = 0, i;
    *at = PyMem_Malloc((size_t)(nb ? nb : 1) * sizeof(Py_ssize_t));
    *count = PyMem_Malloc((size_t)(nb ? nb : 1) * sizeof(Py_ssize_t));
    if (*at == NULL || *count == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < nb; i++) {
        (*at)[i] = -1;
        (*count)[i] = 0;
    }
    while (PyDict_Next(map, &pos, &key, &value)) {
        Py_ssize_t id = PyLong_AsSsize_t(key), start = ids->n, n;
        if (id == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (id < 0 || id >= nb) {
            continue; /* (no buffer asks for it: the Python assigner never reads it) */
        }
        if (read_ids(value, ids, &n) < 0) {
            return -1;
        }
        (*at)[id] = start;
        (*count)[id] = n;
    }
    return 0;
}

static int shares(const State *s, const Buf *b, Py_ssize_t id) {
    Py_ssize_t k;
    for (k = 0; k < b->share_n; k++) {
        if (s->share_ids[b->share_at + k] == id) {
            return 1;
        }
    }
    return 0;
}

/* _interferes(a, b): a already in an allocation, b the buffer trying it. */
static int interferes(const State *s, Py_ssize_t ia, Py_ssize_t ib) {
    const Buf *a = &s->b[ia], *b = &s->b[ib];
    if (a->start > b->end || b->start > a->end) {
        return 0;
    }
    if (a->end == b->start) {
        return !shares(s, b, ia);
    }
    if (b->end == a->start) {
        return !shares(s, a, ib);
    }
    return 1;
}

/* A new allocation of the buffer ib alone (Allocation(kind, b.size_bytes, [b.id], ...)); its index. */
static Py_ssize_t new_alloc(State *s, Py_ssize_t ib, int kind, char live_out, char readonly) {
    Alloc *a;
    if (s->nalloc == s->alloc_cap && grow((void **)&s->allocs, &s->alloc_cap, 16, sizeof(Alloc)) < 0) {
        return -1;
    }
    a = &s->allocs[s->nalloc];
    memset(a, 0, sizeof(Alloc));
    a->kind = kind;
    a->size = s->b[ib].size;
    a->live_out = live_out;
    a->readonly = readonly;
    if (vec_push(&a->ids, ib) < 0) {
        return -1;
    }
    s->allocation_of[ib] = s->nalloc;
    return s->nalloc++;
}

/* add_range: the buffer ib's range into allocation index's, at bisect_right of (start, end). */
static int add_range(State *s, Py_ssize_t index, Py_ssize_t ib) {
    Alloc *a = &s->allocs[index];
    const Buf *b = &s->b[ib];
    Py_ssize_t lo = 0, hi = a->ranges.n;
    while (lo < hi) { /* first range with (start, end) > (b.start, b.end) */
        Py_ssize_t mid = (lo + hi) / 2;
        const Buf *m = &s->b[a->ranges.v[mid]];
        if (m->start < b->start || (m->start == b->start && m->end <= b->end)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return vec_insert(&a->ranges, lo, ib);
}

/* try_assign: whether ib joined allocation index (it has then). */
static int try_assign(State *s, Py_ssize_t index, Py_ssize_t ib) {
    Alloc *a = &s->allocs[index];
    const Buf *b = &s->b[ib];
    Py_ssize_t lo, hi, k;
    if (a->readonly || a->kind == ALLOC_TUPLE || b->size > a->size) {
        return 0;
    }
    if (b->live_out && a->size != b->size) {
        return 0;
    }
    if (s->copy_at[ib] >= 0 && s->copy_n[ib] > 0) {
        const Py_ssize_t *copied = s->copy_ids + s->copy_at[ib];
        Py_ssize_t j, c;
        for (j = 0; j < a->ids.n; j++) {
            for (c = 0; c < s->copy_n[ib]; c++) {
                if (a->ids.v[j] == copied[c]) {
                    return 0;
                }
            }
        }
    }
    lo = 0;
    hi = a->ranges.n;
    while (lo < hi) { /* bisect_left(ends, b.start) */
        Py_ssize_t mid = (lo + hi) / 2;
        if (s->b[a->ranges.v[mid]].end < b->start) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (k = lo; k < a->ranges.n && s->b[a->ranges.v[k]].start <= b->end; k++) {
        if (interferes(s, a->ranges.v[k], ib)) {
            return 0;
        }
    }
    a->live_out |= b->live_out;
    s->allocation_of[ib] = index;
    return vec_push(&a->ids, ib) < 0 || add_range(s, index, ib) < 0 ? -1 : 1;
}

/* How many anchors of `sorted` (positions sorted by their first buffer's start, or with by_end its end) have
 * that key below `key` -- or at most `key` with `inclusive`: a bisection (Python's bisect on the (key, position)
 * tuples). */
static Py_ssize_t anchors_below(const State *s, const Vec *sorted, int by_end, int64_t key, int inclusive) {
    Py_ssize_t lo = 0, hi = sorted->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        const Buf *first = &s->b[s->anchor_first.v[sorted->v[mid]]];
        int64_t k = by_end ? first->end : first->start;
        if (k < key || (inclusive && k == key)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* _Anchors.add: allocation index, by its first buffer ib (after the anchors of equal key: their positions are
 * smaller). */
static int add_anchor(State *s, Py_ssize_t index, Py_ssize_t ib) {
    Py_ssize_t position = s->anchor_index.n;
    const Buf *b = &s->b[ib];
    if (vec_push(&s->anchor_index, index) < 0 || vec_push(&s->anchor_first, ib) < 0 ||
        vec_insert(&s->by_start, anchors_below(s, &s->by_start, 0, b->start, 1), position) < 0) {
        return -1;
    }
    return vec_insert(&s->by_end, anchors_below(s, &s->by_end, 1, b->end, 1), position);
}

static int descending(const void *x, const void *y) {
    Py_ssize_t a = *(const Py_ssize_t *)x, b = *(const Py_ssize_t *)y;
    return (a < b) - (a > b);
}

/* A buffer's sort key; keys[i] is buffer i's, so its position in the array is the buffer id. */
typedef struct {
    int64_t neg_size, post_order;
    char not_live_out;
} Key;

/* Whether key a sorts before key b (both in one array): larger size first, live-out first, then post order, then
 * buffer id (the position in the array). */
static inline int key_before(const Key *a, const Key *b) {
    if (a->neg_size != b->neg_size) {
        return a->neg_size < b->neg_size;
    }
    if (a->not_live_out != b->not_live_out) {
        return a->not_live_out < b->not_live_out;
    }
    if (a->post_order != b->post_order) {
        return a->post_order < b->post_order;
    }
    return a < b;
}

/* The positions 0..n-1 of ``keys`` in key order, into ``order`` (``tmp``: n more), by a bottom-up merge sort that
 * moves positions and compares inline: qsort of the 32-byte keys moved each by memcpy and compared through a
 * function pointer (~25 M instructions of mixtral's 29,000 buffers). No two keys are equal (the position breaks
 * ties), so any correct sort gives the one order. */
static void sort_keys(const Key *keys, Py_ssize_t n, Py_ssize_t *order, Py_ssize_t *tmp) {
    Py_ssize_t width, i, *from = order, *to = tmp;
    for (i = 0; i < n; i++) {
        order[i] = i;
    }
    for (width = 1; width < n; width *= 2) {
        for (i = 0; i < n; i += 2 * width) {
            Py_ssize_t lo = i, mid = i + width < n ? i + width : n, hi = i + 2 * width < n ? i + 2 * width : n;
            Py_ssize_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) {
                to[k++] = key_before(&keys[from[b]], &keys[from[a]]) ? from[b++] : from[a++];
            }
            while (a < mid) {
                to[k++] = from[a++];
            }
            while (b < hi) {
                to[k++] = from[b++];
            }
        }
        {
            Py_ssize_t *swap = from;
            from = to;
            to = swap;
        }
    }
    if (from != order) {
        memcpy(order, from, (size_t)n * sizeof(Py_ssize_t));
    }
}

/* _peak: the peak live bytes of the temps, each rounded up to alignment but the topmost, and its time. */
static int peak(State *s, const Vec *temps, Py_ssize_t times, int64_t alignment, int64_t *out_bytes,
                Py_ssize_t *out_time) {
    Py_ssize_t n = times + 1, i, t, best_time = 0;
    int64_t *delta, live = 0, best = 0, slack = 0;
    char *chosen, *taken;
    int rc = -1;
    if (temps->n == 0) {
        *out_bytes = 0;
        *out_time = -1;
        return 0;
    }
    delta = PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    chosen = PyMem_Calloc((size_t)(s->nb ? s->nb : 1), 1);
    taken = PyMem_Calloc((size_t)(s->nb ? s->nb : 1), 1);
    if (delta == NULL || chosen == NULL || taken == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < temps->n; i++) {
        const Buf *b = &s->b[temps->v[i]];
        if (b->start < 0 || b->start >= n || b->end < -1 || b->end >= n) {
            PyErr_Format(PyExc_ValueError, "assign_run: temp buffer %zd has the live range [%lld, %lld], outside "
                         "the schedule's %zd times", temps->v[i], (long long)b->start, (long long)b->end, times);
            goto done;
        }
        chosen[temps->v[i]] = 1;
    }
    for (i = 0; i < temps->n; i++) {
        const Buf *b = &s->b[temps->v[i]];
        int64_t size = (b->size + alignment - 1) / alignment * alignment;
        Py_ssize_t k;
        delta[b->start] += size;
        delta[b->end + 1] -= size;
        for (k = 0; k < b->share_n; k++) {
            Py_ssize_t cand = s->share_ids[b->share_at + k];
            if (cand >= 0 && cand < s->nb && chosen[cand] && !taken[cand]) {
                int64_t shared = b->size < s->b[cand].size ? b->size : s->b[cand].size;
                taken[cand] = 1;
                delta[b->start] -= shared;
                delta[b->start + 1] += shared;
                break;
            }
        }
    }
    for (t = 0; t < n; t++) {
        live += delta[t];
        if (live > best) {
            best = live;
            best_time = t;
        }
    }
    for (i = 0; i < temps->n; i++) {
        const Buf *b = &s->b[temps->v[i]];
        if (b->start <= best_time && best_time <= b->end) {
            int64_t extra = (b->size + alignment - 1) / alignment * alignment - b->size;
            if (extra > slack) {
                slack = extra;
            }
        }
    }
    *out_bytes = best - slack;
    *out_time = best_time;
    rc = 0;
done:
    PyMem_Free(delta);
    PyMem_Free(chosen);
    PyMem_Free(taken);
    return rc;
}

static int read_buffers(State *s, PyObject *buffers, Vec *share_ids) {
    Py_ssize_t i, at[N_FIELDS] = {0};
    PyTypeObject *type = s->nb ? Py_TYPE(PyList_GET_ITEM(buffers, 0)) : NULL;
    if (type != NULL && !slot_offsets(type, FIELD_NAMES, N_FIELDS, at)) {
        type = NULL;
    }
    for (i = 0; i < s->nb; i++) {
        PyObject *obj = PyList_GET_ITEM(buffers, i), *kind, *cands;
        Buf *b = &s->b[i];
        int64_t id;
        if (take_int64(FIELD(obj, F_ID), &id) < 0 ||
            take_int64(FIELD(obj, F_SIZE_BYTES), &b->size) < 0 ||
            take_int64(FIELD(obj, F_START), &b->start) < 0 ||
            take_int64(FIELD(obj, F_END), &b->end) < 0 ||
            take_int64(FIELD(obj, F_POST_ORDER), &b->post_order) < 0 ||
            take_flag(FIELD(obj, F_LIVE_OUT), &b->live_out) < 0 ||
            take_flag(FIELD(obj, F_ALIASED_PARAMETER), &b->aliased) < 0 ||
            take_flag(FIELD(obj, F_IS_TUPLE_TABLE), &b->tuple_table) < 0) {
            return -1;
        }
        if (id != i) {
            PyErr_Format(PyExc_ValueError, "assign_run: buffers[%zd].id is %lld", i, (long long)id);
            return -1;
        }
        if (b->size < 0 || b->size > ((int64_t)1 << 52)) {
            PyErr_Format(PyExc_OverflowError, "assign_run: buffer %zd has size %lld", i, (long long)b->size);
            return -1;
        }
        kind = FIELD(obj, F_KIND);
        if (kind == NULL) {
            return -1;
        }
        b->kind = KIND_OTHER; /* (two str compare without error) */
        if (PyUnicode_Check(kind) && PyUnicode_Compare(kind, s_constant) == 0) {
            b->kind = KIND_CONSTANT;
        } else if (PyUnicode_Check(kind) && PyUnicode_Compare(kind, s_parameter) == 0) {
            b->kind = KIND_PARAMETER;
        }
        Py_DECREF(kind);
        cands = FIELD(obj, F_SHARE_CANDIDATES);
        if (cands == NULL) {
            return -1;
        }
        b->share_at = share_ids->n;
        if (read_ids(cands, share_ids, &b->share_n) < 0) {
            Py_DECREF(cands);
            return -1;
        }
        Py_DECREF(cands);
    }
    return 0;
}

/* The buffer ids of ids as a new list of ints, or NULL. */
static PyObject *id_list(const Vec *ids) {
    PyObject *out = PyList_New(ids->n);
    Py_ssize_t i;
    for (i = 0; out != NULL && i < ids->n; i++) {
        PyObject *x = PyLong_FromSsize_t(ids->v[i]);
        if (x == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i, x);
    }
    return out;
}

static PyObject *result_of(State *s, const Vec *temps, int64_t temp_bytes, Py_ssize_t peak_time) {
    PyObject *allocs = PyList_New(s->nalloc), *temp_list;
    Py_ssize_t i;
    if (allocs == NULL) {
        return NULL;
    }
    for (i = 0; i < s->nalloc; i++) {
        Alloc *a = &s->allocs[i];
        PyObject *ids = id_list(&a->ids), *item;
        item = ids == NULL ? NULL : Py_BuildValue("(sLNOO)", ALLOC_KINDS[a->kind], (long long)a->size, ids,
                                                  a->live_out ? Py_True : Py_False, a->readonly ? Py_True : Py_False);
        if (item == NULL) { /* ("N" took ids, also on failure) */
            Py_DECREF(allocs);
            return NULL;
        }
        PyList_SET_ITEM(allocs, i, item);
    }
    temp_list = id_list(temps);
    if (temp_list == NULL) {
        Py_DECREF(allocs);
        return NULL;
    }
    return Py_BuildValue("(NNLn)", allocs, temp_list, (long long)temp_bytes, peak_time);
}

static int assign(State *s, Vec *temps, int tiled) {
    size_t count = (size_t)(s->nb ? s->nb : 1);
    Key *keys = PyMem_Malloc(count * sizeof(Key));
    Py_ssize_t *order = PyMem_Malloc(2 * count * sizeof(Py_ssize_t));
    Vec found = {0};
    char *seen = NULL;
    Py_ssize_t i, r = -1;
    if (keys == NULL || order == NULL) {
        PyMem_Free(keys);
        PyMem_Free(order);
        PyErr_NoMemory();
        return -1;
    }
    for (i = 0; i < s->nb; i++) {
        keys[i].neg_size = -s->b[i].size;
        keys[i].not_live_out = !s->b[i].live_out;
        keys[i].post_order = s->b[i].post_order;
    }
    sort_keys(keys, s->nb, order, order + count);
    for (i = 0; i < s->nb; i++) {
        Py_ssize_t ib = order[i], index, k;
        const Buf *b = &s->b[ib];
        int done = 0;
        if (b->kind == KIND_CONSTANT) {
            if (new_alloc(s, ib, ALLOC_CONSTANT, 0, 1) < 0) {
                goto out;
            }
            continue;
        }
        if (b->kind == KIND_PARAMETER) {
            if ((index = new_alloc(s, ib, ALLOC_PARAMETER, b->live_out, !b->aliased)) < 0 ||
                (b->aliased && (add_range(s, index, ib) < 0 || add_anchor(s, index, ib) < 0))) {
                goto out;
            }
            continue;
        }
        if (b->tuple_table && !b->live_out) {
            if (!tiled && vec_push(temps, ib) < 0) {
                goto out;
            }
            continue;
        }
        if (b->tuple_table) {
            if (new_alloc(s, ib, ALLOC_TUPLE, b->live_out, 0) < 0) {
                goto out;
            }
            continue;
        }
        if (b->size == 0) {
            continue;
        }
        if (s->op_at[ib] >= 0) {
            for (k = 0; k < s->op_n[ib] && !done; k++) {
                Py_ssize_t operand = s->op_ids[s->op_at[ib] + k], got;
                if (operand < 0 || operand >= s->nb || s->allocation_of[operand] < 0) {
                    continue;
                }
                if ((got = try_assign(s, s->allocation_of[operand], ib)) < 0) {
                    goto out;
                }
                done = (int)got;
            }
        }
        if (!done && s->anchor_index.n) {
            /* _Anchors.candidates: positions of anchors starting at or after b's end, or ending at or before
             * its start; tried last added first */
            Py_ssize_t late = anchors_below(s, &s->by_start, 0, b->end, 0);
            Py_ssize_t early = anchors_below(s, &s->by_end, 1, b->start, 1);
            if (late < s->by_start.n || early) {
                if (seen == NULL && (seen = PyMem_Calloc((size_t)s->nb + 1, 1)) == NULL) {
                    PyErr_NoMemory();
                    goto out;
                }
                found.n = 0;
                for (k = late; k < s->by_start.n; k++) {
                    if (vec_push(&found, s->by_start.v[k]) < 0) {
                        goto out;
                    }
                    seen[s->by_start.v[k]] = 1;
                }
                for (k = 0; k < early; k++) {
                    if (!seen[s->by_end.v[k]] && vec_push(&found, s->by_end.v[k]) < 0) {
                        goto out;
                    }
                }
                for (k = late; k < s->by_start.n; k++) {
                    seen[s->by_start.v[k]] = 0;
                }
                qsort(found.v, (size_t)found.n, sizeof(Py_ssize_t), descending);
                for (k = 0; k < found.n && !done; k++) {
                    Py_ssize_t got = try_assign(s, s->anchor_index.v[found.v[k]], ib);
                    if (got < 0) {
                        goto out;
                    }
                    done = (int)got;
                }
            }
        }
        if (done) {
            continue;
        }
        if (!b->live_out) {
            if (vec_push(temps, ib) < 0) {
                goto out;
            }
            continue;
        }
        if ((index = new_alloc(s, ib, ALLOC_OUTPUT, 1, 0)) < 0 || add_range(s, index, ib) < 0 ||
            add_anchor(s, index, ib) < 0) {
            goto out;
        }
    }
    r = 0;
out:
    PyMem_Free(keys);
    PyMem_Free(order);
    PyMem_Free(found.v);
    PyMem_Free(seen);
    return (int)r;
}

static PyObject *assign_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *buffers, *operand_buffers, *copies_of, *result = NULL;
    State s;
    Vec share_ids = {0}, op_ids = {0}, copy_ids = {0}, temps = {0};
    Py_ssize_t times, i;
    long long alignment;
    int tiled;
    int64_t temp_bytes = 0;
    Py_ssize_t peak_time = -1;
    (void)self;
    memset(&s, 0, sizeof(s));
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "assign_run(buffers, operand_buffers, copies_of, tiled, times, alignment)");
        return NULL;
    }
    buffers = args[0];
    operand_buffers = args[1];
    copies_of = args[2];
    if (!PyList_CheckExact(buffers) || !PyDict_Check(operand_buffers) || !PyDict_Check(copies_of)) {
        PyErr_SetString(PyExc_TypeError, "assign_run: buffers must be a list, operand_buffers and copies_of dicts");
        return NULL;
    }
    tiled = PyObject_IsTrue(args[3]);
    times = PyLong_AsSsize_t(args[4]);
    alignment = PyLong_AsLongLong(args[5]);
    if (tiled < 0 || (times == -1 && PyErr_Occurred()) || (alignment == -1 && PyErr_Occurred())) {
        return NULL;
    }
    if (times < 0 || alignment < 1) {
        PyErr_SetString(PyExc_ValueError, "assign_run: times must be >= 0 and alignment >= 1");
        return NULL;
    }
    s.nb = PyList_GET_SIZE(buffers);
    s.b = PyMem_Calloc((size_t)(s.nb ? s.nb : 1), sizeof(Buf));
    s.allocation_of = PyMem_Malloc((size_t)(s.nb ? s.nb : 1) * sizeof(Py_ssize_t));
    if (s.b == NULL || s.allocation_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (i = 0; i < s.nb; i++) {
        s.allocation_of[i] = -1;
    }
    if (read_buffers(&s, buffers, &share_ids) < 0) {
        goto done;
    }
    s.share_ids = share_ids.v;
    if (read_map(operand_buffers, s.nb, &s.op_at, &s.op_n, &op_ids) < 0 ||
        read_map(copies_of, s.nb, &s.copy_at, &s.copy_n, &copy_ids) < 0) {
        goto done;
    }
    s.op_ids = op_ids.v;
    s.copy_ids = copy_ids.v;
    if (assign(&s, &temps, tiled) < 0 || peak(&s, &temps, times, (int64_t)alignment, &temp_bytes, &peak_time) < 0) {
        goto done;
    }
    result = result_of(&s, &temps, temp_bytes, peak_time);
done:
    for (i = 0; i < s.nalloc; i++) {
        PyMem_Free(s.allocs[i].ids.v);
        PyMem_Free(s.allocs[i].ranges.v);
    }
    PyMem_Free(s.allocs);
    PyMem_Free(s.b);
    PyMem_Free(s.allocation_of);
    PyMem_Free(s.op_at);
    PyMem_Free(s.op_n);
    PyMem_Free(s.copy_at);
    PyMem_Free(s.copy_n);
    PyMem_Free(s.anchor_index.v);
    PyMem_Free(s.anchor_first.v);
    PyMem_Free(s.by_start.v);
    PyMem_Free(s.by_end.v);
    PyMem_Free(share_ids.v);
    PyMem_Free(op_ids.v);
    PyMem_Free(copy_ids.v);
    PyMem_Free(temps.v);
    return result;
}

static PyMethodDef methods[] = {
    {"assign_run", (PyCFunction)(void (*)(void))assign_run, METH_FASTCALL,
     "assign_run(buffers, operand_buffers, copies_of, tiled, times, alignment) -> (allocations, temp_buffers, "
     "temp_bytes, peak_time): see hloscope.memory.assignment.assign_buffers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_buffer_assign",
    "The memory model's buffer assigner, in C (hloscope.memory.assignment._py_assign is the specification).", -1,
    methods, NULL, NULL, NULL, NULL,
};

static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__buffer_assign(void) {
    static const char *const names[N_FIELDS] = {"id", "size_bytes", "start", "end", "post_order", "live_out",
                                                "aliased_parameter", "is_tuple_table", "kind", "share_candidates"};
    int k;
    for (k = 0; k < N_FIELDS; k++) {
        if (intern(&FIELD_NAMES[k], names[k]) < 0) {
            return NULL;
        }
    }
    if (intern(&s_constant, "constant") < 0 || intern(&s_parameter, "parameter") < 0) {
        return NULL;
    }
    return PyModule_Create(&module);
}
