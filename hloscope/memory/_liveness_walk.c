/* The memory model's walk over a run of plain instructions (hloscope.memory.liveness._Walk.instruction is the
 * specification: this does what its last branch does, for the instructions that reach it; tests/memory/
 * test_liveness_walk.py holds the two equal over every fixture and corpus module).
 *
 * plain_run(walk, start, cname, names, opcodes, shapes, operand_lists, trees, needs_python, elementwise) -> int
 *
 * walk: the _Walk (its lists are appended to in place); start: the first instruction index to take; cname: the
 * computation's name; names, opcodes, shapes, operand_lists: the computation's columns; trees: instruction name
 * -> value tree of the instructions walked so far (filled in here); needs_python: opcodes the Python walk takes
 * (parameters, control flow, tuples, pass-through and possibly aliasing opcodes); elementwise: the opcodes whose
 * result may take over an operand's buffer.
 *
 * An instruction is plain when its opcode is not in needs_python and does not end in "-start" or "-done", its
 * result is not a tuple, and every operand it names that was walked is an array value (an int). For each plain
 * instruction from start on: one time in walk.sequence, one new value (kind "constant" for a constant, else
 * "temp"), share candidates for an elementwise opcode (operands of the same HBM size), operand last uses,
 * walk.operand_values and, for a copy, walk.copy_reads. Returns the index of the first instruction that is not
 * plain (len(names) when all were); walk.now is the time of the last one taken.
 *
 * Built as an optional extension (setup.py): without it the Python walk takes every instruction (~2 us each:
 * 46 ms of the memory footprint of the corpus's llama module). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "../_slot_fields.h"

#define MAX_OPERANDS 64

static PyObject *s_parent, *s_define_time, *s_last_use, *s_shapes, *s_table_len, *s_origin, *s_share,
    *s_operand_values, *s_copy_reads, *s_sequence, *s_now, *s_element_type, *s_hbm_size_bytes, *s_tuple,
    *s_constant, *s_temp, *s_copy, *s_start_suffix, *s_done_suffix, *s_zero, *s_minus_one, *s_live_out, *s_post_order,
    *s_host_size_bytes, *s_parameter, *s_output, *s_empty, *s_start, *s_end, *s_share_candidates;

static int list_of(PyObject *walk, PyObject *name, PyObject **out) {
    *out = PyObject_GetAttr(walk, name);
    if (*out == NULL) {
        return -1;
    }
    if (!PyList_CheckExact(*out)) {
        PyErr_Format(PyExc_TypeError, "plain_run: walk.%U must be a list", name);
        Py_CLEAR(*out);
        return -1;
    }
    return 0;
}

static int append_new(PyObject *list, PyObject *item) {
    int rc;
    if (item == NULL) {
        return -1;
    }
    rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

static PyObject *plain_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *walk, *cname, *names, *opcodes, *shapes, *lists, *trees, *needs_python, *elementwise;
    PyObject *parent = NULL, *define_time = NULL, *last_use = NULL, *value_shapes = NULL, *table_len = NULL,
             *origin = NULL, *share = NULL, *sequence = NULL, *operand_values = NULL, *copy_reads = NULL;
    PyObject *result = NULL, *now = NULL, *vid = NULL, *size = NULL; /* (vid, size: the current instruction's) */
    PyObject *ops[MAX_OPERANDS];
    Py_ssize_t start, n, i, k, count;
    /* The shapes' fields read (element_type, hbm_size_bytes), from their slots (../_slot_fields.h) when the shapes
     * are of shape_type: the type of the first, when it keeps them so (hloscope.hlo.Shape). */
    PyObject *shape_names[2] = {s_element_type, s_hbm_size_bytes};
    PyTypeObject *shape_type = NULL;
    Py_ssize_t shape_at[2] = {0, 0};
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "plain_run(walk, start, cname, names, opcodes, shapes, operand_lists, "
                                         "trees, needs_python, elementwise)");
        return NULL;
    }
    walk = args[0];
    start = PyLong_AsSsize_t(args[1]);
    cname = args[2];
    names = args[3];
    opcodes = args[4];
    shapes = args[5];
    lists = args[6];
    trees = args[7];
    needs_python = args[8];
    elementwise = args[9];
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyTuple_CheckExact(names) || !PyTuple_CheckExact(opcodes) || !PyTuple_CheckExact(shapes) ||
        !PyList_CheckExact(lists) || !PyDict_CheckExact(trees) || !PyAnySet_CheckExact(needs_python) ||
        !PyAnySet_CheckExact(elementwise)) {
        PyErr_SetString(PyExc_TypeError, "plain_run: names, opcodes and shapes must be tuples, operand_lists a "
                                         "list, trees a dict, needs_python and elementwise sets");
        return NULL;
    }
    n = PyTuple_GET_SIZE(names);
    if (PyTuple_GET_SIZE(opcodes) != n || PyTuple_GET_SIZE(shapes) != n || PyList_GET_SIZE(lists) != n) {
        PyErr_SetString(PyExc_ValueError, "plain_run: the columns differ in length");
        return NULL;
    }
    if (list_of(walk, s_parent, &parent) < 0 || list_of(walk, s_define_time, &define_time) < 0 ||
        list_of(walk, s_last_use, &last_use) < 0 || list_of(walk, s_shapes, &value_shapes) < 0 ||
        list_of(walk, s_table_len, &table_len) < 0 || list_of(walk, s_origin, &origin) < 0 ||
        list_of(walk, s_share, &share) < 0 || list_of(walk, s_sequence, &sequence) < 0) {
        goto done;
    }
    operand_values = PyObject_GetAttr(walk, s_operand_values);
    copy_reads = operand_values ? PyObject_GetAttr(walk, s_copy_reads) : NULL;
    if (copy_reads == NULL) {
        goto done;
    }
    if (!PyDict_CheckExact(operand_values) || !PyDict_CheckExact(copy_reads)) {
        PyErr_SetString(PyExc_TypeError, "plain_run: walk.operand_values and walk.copy_reads must be dicts");
        goto done;
    }
    if (n > 0 && slot_offsets(Py_TYPE(PyTuple_GET_ITEM(shapes, 0)), shape_names, 2, shape_at)) {
        shape_type = Py_TYPE(PyTuple_GET_ITEM(shapes, 0));
    }
    for (i = start < 0 ? 0 : start; i < n; i++) {
        PyObject *op = PyTuple_GET_ITEM(opcodes, i), *shape = PyTuple_GET_ITEM(shapes, i);
        PyObject *name = PyTuple_GET_ITEM(names, i), *operands = PyList_GET_ITEM(lists, i);
        PyObject *etype, *time, *entry, *values;
        Py_ssize_t time_i, m;
        int found, is_tuple, plain = 1;
        if (!PyUnicode_Check(op) || !PyTuple_CheckExact(operands)) {
            break;
        }
        found = PySet_Contains(needs_python, op);
        if (found != 0) {
            if (found < 0) {
                goto done;
            }
            break;
        }
        if (PyUnicode_Tailmatch(op, s_start_suffix, 0, PY_SSIZE_T_MAX, 1) > 0 ||
            PyUnicode_Tailmatch(op, s_done_suffix, 0, PY_SSIZE_T_MAX, 1) > 0) {
            break;
        }
        etype = slot_field(shape, shape_type, shape_at[0], s_element_type);
        if (etype == NULL) {
            goto done;
        }
        is_tuple = PyObject_RichCompareBool(etype, s_tuple, Py_EQ);
        Py_DECREF(etype);
        if (is_tuple != 0) {
            if (is_tuple < 0) {
                goto done;
            }
            break;
        }
        /* The operands walked so far, in order (a name twice is taken twice), all array values. */
        m = PyTuple_GET_SIZE(operands);
        count = 0;
        for (k = 0; k < m && plain; k++) {
            PyObject *tree = PyDict_GetItemWithError(trees, PyTuple_GET_ITEM(operands, k));
            if (tree == NULL) {
                if (PyErr_Occurred()) {
                    goto done;
                }
                continue;
            }
            if (!PyLong_CheckExact(tree) || count == MAX_OPERANDS) {
                plain = 0;
                break;
            }
            ops[count++] = tree;
        }
        if (!plain) {
            break;
        }
        /* One time in the flattened schedule. */
        time_i = PyList_GET_SIZE(sequence);
        if (append_new(sequence, PyTuple_Pack(2, cname, name)) < 0) {
            goto done;
        }
        time = PyLong_FromSsize_t(time_i);
        vid = time ? PyLong_FromSsize_t(PyList_GET_SIZE(parent)) : NULL;
        if (vid == NULL) {
            Py_XDECREF(time);
            goto done;
        }
        Py_XSETREF(now, time);
        /* _Walk._value(shape, cname, name, kind) */
        found = PyObject_RichCompareBool(op, s_constant, Py_EQ);
        entry = found < 0 ? NULL : PyTuple_Pack(3, cname, name, found ? s_constant : s_temp);
        if (entry == NULL || PyList_Append(parent, vid) < 0 || PyList_Append(define_time, time) < 0 ||
            PyList_Append(last_use, s_minus_one) < 0 || PyList_Append(value_shapes, shape) < 0 ||
            PyList_Append(table_len, s_zero) < 0 || PyList_Append(origin, entry) < 0) {
            Py_XDECREF(entry);
            goto done;
        }
        Py_DECREF(entry);
        /* _Walk._share_candidates: an operand of the same HBM size the result may take over in place. */
        found = PySet_Contains(elementwise, op);
        if (found < 0) {
            goto done;
        }
        if (found && count) {
            size = slot_field(shape, shape_type, shape_at[1], s_hbm_size_bytes);
            if (size == NULL) {
                goto done;
            }
            for (k = 0; k < count; k++) {
                Py_ssize_t t = PyLong_AsSsize_t(ops[k]);
                PyObject *other, *other_size;
                int same;
                if (t == -1 && PyErr_Occurred()) {
                    goto done;
                }
                other = PyList_GetItem(value_shapes, t);
                if (other == NULL) {
                    goto done;
                }
                if (other == Py_None) {
                    continue;
                }
                other_size = slot_field(other, shape_type, shape_at[1], s_hbm_size_bytes);
                same = other_size ? PyObject_RichCompareBool(other_size, size, Py_EQ) : -1;
                Py_XDECREF(other_size);
                if (same < 0 || (same && append_new(share, PyTuple_Pack(3, vid, ops[k], time)) < 0)) {
                    goto done;
                }
            }
            Py_CLEAR(size);
        }
        /* Operand last uses. */
        for (k = 0; k < count; k++) {
            Py_ssize_t t = PyLong_AsSsize_t(ops[k]);
            PyObject *last = (t == -1 && PyErr_Occurred()) ? NULL : PyList_GetItem(last_use, t);
            Py_ssize_t last_i;
            if (last == NULL) {
                goto done;
            }
            last_i = PyLong_AsSsize_t(last);
            if (last_i == -1 && PyErr_Occurred()) {
                goto done;
            }
            if (last_i < time_i) {
                Py_INCREF(time);
                if (PyList_SetItem(last_use, t, time) < 0) {
                    goto done;
                }
            }
        }
        values = PyTuple_New(count);
        if (values == NULL) {
            goto done;
        }
        for (k = 0; k < count; k++) {
            Py_INCREF(ops[k]);
            PyTuple_SET_ITEM(values, k, ops[k]);
        }
        found = PyDict_SetItem(operand_values, vid, values);
        if (found == 0 && PyUnicode_Compare(op, s_copy) == 0) {
            found = PyDict_SetItem(copy_reads, vid, values);  /* (every operand an array: its leaves are itself) */
        }
        Py_DECREF(values);
        if (found < 0 || PyErr_Occurred() || PyDict_SetItem(trees, name, vid) < 0) {
            goto done;
        }
        Py_CLEAR(vid);
    }
    if (now != NULL && PyObject_SetAttr(walk, s_now, now) < 0) {
        goto done;
    }
    result = PyLong_FromSsize_t(i);
done:
    Py_XDECREF(vid);
    Py_XDECREF(size);
    Py_XDECREF(now);
    Py_XDECREF(parent);
    Py_XDECREF(define_time);
    Py_XDECREF(last_use);
    Py_XDECREF(value_shapes);
    Py_XDECREF(table_len);
    Py_XDECREF(origin);
    Py_XDECREF(share);
    Py_XDECREF(sequence);
    Py_XDECREF(operand_values);
    Py_XDECREF(copy_reads);
    return result;
}


/* make_buffers(walk, end, tiled, merged, buffer_type, pointer_bytes, granule_bytes) -> (buffers, buffer_of):
 * hloscope.memory.liveness.py_make_buffers (the specification), its one-value buffers made here. The classes of
 * the union-find over walk.parent, in the order of each one's smallest value, are the buffers; a class of one
 * value v gets the buffer ``_single_buffer(walk, bid, v, end, tiled)`` makes, a larger class what
 * ``merged(walk, bid, values, end, tiled)`` returns (values ascending). A buffer is built straight into its slots
 * when buffer_type's __slots__ are BUFFER_SLOT_TEXTS, settable object slots each (hloscope.memory.liveness.Buffer,
 * whose __init__ stores its arguments as they are: what it would store), else by calling buffer_type with the
 * thirteen values. */
#define BUFFER_SLOTS 13
static const char *const BUFFER_SLOT_TEXTS[BUFFER_SLOTS] = {
    "id", "size_bytes", "host_bytes", "start", "end", "kind", "live_out", "aliased_parameter", "is_tuple_table",
    "defined_by", "shape", "share_candidates", "post_order"};
static PyObject *BUFFER_SLOT_NAMES[BUFFER_SLOTS]; /* (interned at import) */

/* The slot offsets of cls in ``offsets`` (1), or 0 (no error set) when cls is not built that way: no instance
 * dict or items, no __post_init__, exactly these slots (../_slot_fields.h ``slot_offsets``). */
static int buffer_slots(PyObject *cls, Py_ssize_t *offsets) {
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *declared, *post_init;
    Py_ssize_t k;
    if (!PyType_Check(cls) || type->tp_itemsize != 0 || type->tp_dictoffset != 0) {
        return 0;
    }
    post_init = PyObject_GetAttrString(cls, "__post_init__");
    if (post_init != NULL) {
        Py_DECREF(post_init);
        return 0;
    }
    PyErr_Clear();
    declared = PyObject_GetAttrString(cls, "__slots__");
    if (declared == NULL) {
        PyErr_Clear();
        return 0;
    }
    k = PySequence_Check(declared) ? PySequence_Size(declared) : -1;
    Py_DECREF(declared);
    if (k != BUFFER_SLOTS) {
        PyErr_Clear();
        return 0;
    }
    return slot_offsets(type, BUFFER_SLOT_NAMES, BUFFER_SLOTS, offsets);
}

/* A buffer holding ``values`` (BUFFER_SLOTS of them, borrowed): into the slots at ``offsets`` when given, else by
 * calling cls. A new reference, NULL on error. */
static PyObject *new_buffer(PyObject *cls, const Py_ssize_t *offsets, PyObject **values) {
    PyObject *obj;
    int k;
    if (offsets == NULL) {
        return PyObject_Vectorcall(cls, values, BUFFER_SLOTS, NULL);
    }
    obj = ((PyTypeObject *)cls)->tp_alloc((PyTypeObject *)cls, 0);
    if (obj == NULL) {
        return NULL;
    }
    for (k = 0; k < BUFFER_SLOTS; k++) {
        Py_INCREF(values[k]);
        *(PyObject **)((char *)obj + offsets[k]) = values[k];
    }
    return obj;
}

static PyObject *make_buffers(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *walk, *end, *tiled_obj, *merged, *cls;
    PyObject *parent_list = NULL, *define_time = NULL, *last_use = NULL, *shapes = NULL, *table_len = NULL,
             *origin = NULL, *live_out = NULL, *post_order = NULL, *buffers = NULL, *buffer_of = NULL, *result = NULL;
    PyObject **bids = NULL;
    Py_ssize_t n, v, ngroups = 0, *parent = NULL, *gid = NULL, *count = NULL, *first = NULL, *next;
    Py_ssize_t offsets[BUFFER_SLOTS], shape_at[2] = {0, 0};
    PyTypeObject *shape_type = NULL;
    long pointer_bytes, granule_bytes;
    char *is_live_out = NULL;
    int tiled, direct, shape_tried = 0;
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError,
                        "make_buffers(walk, end, tiled, merged, buffer_type, pointer_bytes, granule_bytes)");
        return NULL;
    }
    walk = args[0], end = args[1], tiled_obj = args[2], merged = args[3], cls = args[4];
    pointer_bytes = PyLong_AsLong(args[5]);
    granule_bytes = PyLong_AsLong(args[6]);
    if ((pointer_bytes == -1 || granule_bytes == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyLong_CheckExact(end) || (tiled = PyObject_IsTrue(tiled_obj)) < 0 || granule_bytes <= 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "make_buffers: end must be an int, granule_bytes positive");
        }
        return NULL;
    }
    direct = buffer_slots(cls, offsets);
    if (list_of(walk, s_parent, &parent_list) < 0 || list_of(walk, s_define_time, &define_time) < 0 ||
        list_of(walk, s_last_use, &last_use) < 0 || list_of(walk, s_shapes, &shapes) < 0 ||
        list_of(walk, s_table_len, &table_len) < 0 || list_of(walk, s_origin, &origin) < 0) {
        goto done;
    }
    live_out = PyObject_GetAttr(walk, s_live_out);
    post_order = live_out ? PyObject_GetAttr(walk, s_post_order) : NULL;
    if (post_order == NULL) {
        goto done;
    }
    if (!PyAnySet_Check(live_out) || !PyDict_Check(post_order)) {
        PyErr_SetString(PyExc_TypeError, "make_buffers: walk.live_out must be a set, walk.post_order a dict");
        goto done;
    }
    n = PyList_GET_SIZE(parent_list);
    if (PyList_GET_SIZE(define_time) != n || PyList_GET_SIZE(last_use) != n || PyList_GET_SIZE(shapes) != n ||
        PyList_GET_SIZE(table_len) != n || PyList_GET_SIZE(origin) != n) {
        PyErr_SetString(PyExc_ValueError, "make_buffers: the walk's value lists differ in length");
        goto done;
    }
    parent = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    gid = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    count = PyMem_Calloc((size_t)n + 1, sizeof(Py_ssize_t));
    is_live_out = PyMem_Calloc((size_t)n + 1, 1);
    bids = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
    buffers = PyList_New(0);
    buffer_of = PyList_New(n);
    if (parent == NULL || gid == NULL || count == NULL || is_live_out == NULL || bids == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (buffers == NULL || buffer_of == NULL) {
        goto done;
    }
    for (v = 0; v < n; v++) {
        Py_ssize_t p = PyLong_AsSsize_t(PyList_GET_ITEM(parent_list, v));
        if (p < 0 || p >= n) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "make_buffers: walk.parent holds a value id out of range");
            }
            goto done;
        }
        parent[v] = p;
        gid[v] = -1;
    }
    {
        PyObject *iter = PyObject_GetIter(live_out), *item;
        if (iter == NULL) {
            goto done;
        }
        while ((item = PyIter_Next(iter)) != NULL) { /* (a value id out of range, or not an int, is no value's) */
            Py_ssize_t x = PyLong_Check(item) ? PyLong_AsSsize_t(item) : -1;
            Py_DECREF(item);
            if (x == -1 && PyErr_Occurred()) {
                PyErr_Clear();
            }
            if (x >= 0 && x < n) {
                is_live_out[x] = 1;
            }
        }
        Py_DECREF(iter);
        if (PyErr_Occurred()) {
            goto done;
        }
    }
    /* The classes: a value's representative (path halving, as _Walk.find), numbered by first appearance. */
    for (v = 0; v < n; v++) {
        Py_ssize_t r = v;
        while (parent[r] != r) {
            parent[r] = parent[parent[r]];
            r = parent[r];
        }
        if (gid[r] < 0) {
            gid[r] = ngroups++;
        }
        count[gid[r]]++;
        gid[v] = gid[r];
    }
    for (v = 0; v < ngroups; v++) {
        if ((bids[v] = PyLong_FromSsize_t(v)) == NULL) {
            goto done;
        }
    }
    for (v = 0; v < n; v++) {
        Py_INCREF(bids[gid[v]]);
        PyList_SET_ITEM(buffer_of, v, bids[gid[v]]);
    }
    /* Each class's values in ascending order, as a linked list: ``first[g]``, then ``next[v]`` (-1 ends it); the
     * union-find's array is free for ``next`` now, ``count``'s for nothing else. */
    first = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(ngroups + 1));
    if (first == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    next = parent;
    for (v = 0; v < ngroups; v++) {
        first[v] = -1;
    }
    for (v = n - 1; v >= 0; v--) {
        next[v] = first[gid[v]];
        first[gid[v]] = v;
    }
    for (v = 0; v < n; v++) { /* (count[g] < 0 once its buffer is made) */
        Py_ssize_t g = gid[v];
        PyObject *buffer;
        if (count[g] < 0) {
            continue;
        }
        if (g != PyList_GET_SIZE(buffers)) {
            PyErr_SetString(PyExc_SystemError, "make_buffers: classes out of order");
            goto done;
        }
        if (count[g] == 1) {
            PyObject *t = PyList_GET_ITEM(origin, v), *kind, *shape = PyList_GET_ITEM(shapes, v), *values[BUFFER_SLOTS];
            PyObject *start = PyList_GET_ITEM(define_time, v), *stop = PyList_GET_ITEM(last_use, v), *size, *host;
            PyObject *defined_by, *order;
            int lo = is_live_out[v], is_parameter, cmp;
            long a = PyLong_AsLong(start), b = PyLong_AsLong(stop);
            if ((a == -1 || b == -1) && PyErr_Occurred()) {
                goto done;
            }
            if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(t, 2))) {
                PyErr_SetString(PyExc_TypeError,
                                "make_buffers: walk.origin must hold (computation, instruction, kind)");
                goto done;
            }
            if (b < a) {
                stop = start;
            }
            kind = PyTuple_GET_ITEM(t, 2);
            is_parameter = PyUnicode_Compare(kind, s_parameter) == 0;
            if (is_parameter) {
                start = s_zero;
                stop = end;
            } else if (lo) {
                kind = s_output;
                stop = end;
            } else if ((cmp = PyUnicode_Compare(kind, s_constant)) != 0) {
                if (cmp == -1 && PyErr_Occurred()) {
                    goto done;
                }
                kind = s_temp;
            }
            if (shape == Py_None) {
                long entries = PyLong_AsLong(PyList_GET_ITEM(table_len, v)), bytes;
                if (entries == -1 && PyErr_Occurred()) {
                    goto done;
                }
                bytes = pointer_bytes * entries;
                if (tiled) {
                    bytes = (bytes + granule_bytes - 1) / granule_bytes * granule_bytes;
                }
                if ((size = PyLong_FromLong(bytes)) == NULL) {
                    goto done;
                }
                host = s_zero;
                Py_INCREF(host);
            } else {
                if (!shape_tried) { /* (the shapes' sizes from their slots: ../_slot_fields.h) */
                    PyObject *size_names[2] = {s_hbm_size_bytes, s_host_size_bytes};
                    shape_tried = 1;
                    shape_type = slot_offsets(Py_TYPE(shape), size_names, 2, shape_at) ? Py_TYPE(shape) : NULL;
                }
                size = slot_field(shape, shape_type, shape_at[0], s_hbm_size_bytes);
                host = size ? slot_field(shape, shape_type, shape_at[1], s_host_size_bytes) : NULL;
            }
            defined_by = host ? PyTuple_Pack(2, PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1)) : NULL;
            order = defined_by ? PyDict_GetItemWithError(post_order, defined_by) : NULL;
            if (defined_by == NULL || (order == NULL && PyErr_Occurred())) {
                Py_XDECREF(size);
                Py_XDECREF(host);
                Py_XDECREF(defined_by);
                goto done;
            }
            values[0] = bids[g], values[1] = size, values[2] = host, values[3] = start, values[4] = stop;
            values[5] = kind, values[6] = lo ? Py_True : Py_False;
            values[7] = is_parameter && lo ? Py_True : Py_False;
            values[8] = shape == Py_None ? Py_True : Py_False;
            values[9] = defined_by, values[10] = shape, values[11] = s_empty, values[12] = order ? order : s_zero;
            buffer = new_buffer(cls, direct ? offsets : NULL, values);
            Py_DECREF(size);
            Py_DECREF(host);
            Py_DECREF(defined_by);
        } else {
            PyObject *members = PyList_New(count[g]);
            Py_ssize_t w, k = 0;
            if (members == NULL) {
                goto done;
            }
            for (w = first[g]; w >= 0 && k < count[g]; w = next[w]) {
                PyObject *value = PyLong_FromSsize_t(w);
                if (value == NULL) {
                    Py_DECREF(members);
                    goto done;
                }
                PyList_SET_ITEM(members, k++, value);
            }
            if (k != count[g]) {
                Py_DECREF(members);
                PyErr_SetString(PyExc_SystemError, "make_buffers: a class lost its values");
                goto done;
            }
            buffer = PyObject_CallFunctionObjArgs(merged, walk, bids[g], members, end, tiled_obj, NULL);
            Py_DECREF(members);
            if (buffer != NULL && (PyList_GET_SIZE(define_time) != n || PyList_GET_SIZE(last_use) != n ||
                    PyList_GET_SIZE(shapes) != n || PyList_GET_SIZE(table_len) != n || PyList_GET_SIZE(origin) != n)) {
                Py_DECREF(buffer); /* (merged changed the walk's lists under this loop, which reads them) */
                PyErr_SetString(PyExc_RuntimeError, "make_buffers: merged changed the walk's value lists");
                goto done;
            }
        }
        if (buffer == NULL || PyList_Append(buffers, buffer) < 0) {
            Py_XDECREF(buffer);
            goto done;
        }
        Py_DECREF(buffer);
        count[g] = -1;
    }
    result = PyTuple_Pack(2, buffers, buffer_of);
done:
    if (bids != NULL) {
        for (v = 0; v < ngroups; v++) {
            Py_XDECREF(bids[v]);
        }
    }
    PyMem_Free(bids);
    PyMem_Free(first);
    PyMem_Free(parent);
    PyMem_Free(gid);
    PyMem_Free(count);
    PyMem_Free(is_live_out);
    Py_XDECREF(buffers);
    Py_XDECREF(buffer_of);
    Py_XDECREF(parent_list);
    Py_XDECREF(define_time);
    Py_XDECREF(last_use);
    Py_XDECREF(shapes);
    Py_XDECREF(table_len);
    Py_XDECREF(origin);
    Py_XDECREF(live_out);
    Py_XDECREF(post_order);
    return result;
}

/* list[index] (borrowed), or NULL with an error when the int ``index`` is out of range (``what``: "a value id",
 * "a buffer id"). */
static PyObject *item_at(PyObject *list, PyObject *index, const char *what) {
    Py_ssize_t i = PyLong_AsSsize_t(index);
    if (i < 0 || i >= PyList_GET_SIZE(list)) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_IndexError, "link_buffers: %s out of range", what);
        }
        return NULL;
    }
    return PyList_GET_ITEM(list, i);
}

/* The buffer id of value ``v`` (borrowed from buffer_of), or NULL with an error when v is out of range. */
static PyObject *buffer_id(PyObject *buffer_of, PyObject *v) {
    return item_at(buffer_of, v, "a value id");
}

/* The buffer ids of the value ids of a tuple ``values``, as a new tuple (a list for copy reads: ``as_list``). */
static PyObject *buffer_ids(PyObject *buffer_of, PyObject *values, int as_list) {
    Py_ssize_t k, n;
    PyObject *out;
    if (!PyTuple_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "link_buffers: operand values must be tuples");
        return NULL;
    }
    n = PyTuple_GET_SIZE(values);
    out = as_list ? PyList_New(n) : PyTuple_New(n);
    if (out == NULL) {
        return NULL;
    }
    for (k = 0; k < n; k++) {
        PyObject *bid = buffer_id(buffer_of, PyTuple_GET_ITEM(values, k));
        if (bid == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        Py_INCREF(bid);
        if (as_list) {
            PyList_SET_ITEM(out, k, bid);
        } else {
            PyTuple_SET_ITEM(out, k, bid);
        }
    }
    return out;
}

/* Whether attribute ``name`` of buffers[bid] equals ``time``: 1, 0, or -1 with an error. The attribute is read
 * from the slot at offset when the buffer is of type (slot_field). */
static int buffer_at_time(PyObject *buffers, PyObject *bid, PyTypeObject *type, Py_ssize_t offset, PyObject *name,
                          PyObject *time) {
    PyObject *buffer = item_at(buffers, bid, "a buffer id"), *value;
    int eq;
    if (buffer == NULL) {
        return -1;
    }
    value = slot_field(buffer, type, offset, name);
    if (value == NULL) {
        return -1;
    }
    eq = PyObject_RichCompareBool(value, time, Py_EQ);
    Py_DECREF(value);
    return eq;
}

/* link_buffers(walk, buffers, buffer_of, operand_buffers, copies_of) -> None: hloscope.memory.liveness.
 * py_link_buffers (the specification), the same entries in the same order. */
static PyObject *link_buffers(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *walk, *buffers, *buffer_of, *operand_buffers, *copies_of;
    PyObject *share = NULL, *operand_values = NULL, *copy_reads = NULL, *shares = NULL, *key, *value;
    PyObject *range_names[2] = {s_start, s_end};
    PyTypeObject *type = NULL; /* (the buffers' start and end from their slots when of this type: ../_slot_fields.h) */
    Py_ssize_t i, pos, at[2] = {0, 0};
    (void)self;
    if (nargs != 5 || !PyList_CheckExact(args[1]) || !PyList_CheckExact(args[2]) || !PyDict_CheckExact(args[3])
            || !PyDict_CheckExact(args[4])) {
        PyErr_SetString(PyExc_TypeError,
                        "link_buffers(walk, buffers: list, buffer_of: list, operand_buffers: dict, copies_of: dict)");
        return NULL;
    }
    walk = args[0], buffers = args[1], buffer_of = args[2], operand_buffers = args[3], copies_of = args[4];
    if (list_of(walk, s_share, &share) < 0) {
        return NULL;
    }
    if (PyList_GET_SIZE(buffers) > 0 && slot_offsets(Py_TYPE(PyList_GET_ITEM(buffers, 0)), range_names, 2, at)) {
        type = Py_TYPE(PyList_GET_ITEM(buffers, 0));
    }
    operand_values = PyObject_GetAttr(walk, s_operand_values);
    copy_reads = operand_values ? PyObject_GetAttr(walk, s_copy_reads) : NULL;
    shares = copy_reads ? PyDict_New() : NULL;
    if (shares == NULL) {
        goto fail;
    }
    if (!PyDict_Check(operand_values) || !PyDict_Check(copy_reads)) {
        PyErr_SetString(PyExc_TypeError, "link_buffers: walk.operand_values and walk.copy_reads must be dicts");
        goto fail;
    }
    for (i = 0; i < PyList_GET_SIZE(share); i++) { /* (new value, operand value, time) */
        PyObject *t = PyList_GET_ITEM(share, i), *b_new, *b_op, *cands;
        int eq;
        if (!PyTuple_CheckExact(t) || PyTuple_GET_SIZE(t) != 3) {
            PyErr_SetString(PyExc_TypeError, "link_buffers: walk.share must hold (value, value, time) tuples");
            goto fail;
        }
        b_new = buffer_id(buffer_of, PyTuple_GET_ITEM(t, 0));
        b_op = b_new ? buffer_id(buffer_of, PyTuple_GET_ITEM(t, 1)) : NULL;
        if (b_op == NULL) {
            goto fail;
        }
        if ((eq = PyObject_RichCompareBool(b_new, b_op, Py_EQ)) != 0) {
            if (eq < 0) {
                goto fail;
            }
            continue;
        }
        if ((eq = buffer_at_time(buffers, b_op, type, at[1], s_end, PyTuple_GET_ITEM(t, 2))) <= 0 ||
                (eq = buffer_at_time(buffers, b_new, type, at[0], s_start, PyTuple_GET_ITEM(t, 2))) <= 0) {
            if (eq < 0) {
                goto fail;
            }
            continue;
        }
        cands = PyDict_GetItemWithError(shares, b_new);
        if (cands == NULL) {
            if (PyErr_Occurred() || (cands = PyList_New(0)) == NULL) {
                goto fail;
            }
            eq = PyDict_SetItem(shares, b_new, cands);
            Py_DECREF(cands);
            if (eq < 0) {
                goto fail;
            }
        }
        if (PyList_Append(cands, b_op) < 0) {
            goto fail;
        }
    }
    pos = 0;
    while (PyDict_Next(shares, &pos, &key, &value)) {
        PyObject *buffer = item_at(buffers, key, "a buffer id"), *cands = buffer ? PyList_AsTuple(value) : NULL;
        int rc;
        if (cands == NULL) {
            goto fail;
        }
        rc = PyObject_SetAttr(buffer, s_share_candidates, cands);
        Py_DECREF(cands);
        if (rc < 0) {
            goto fail;
        }
    }
    pos = 0;
    while (PyDict_Next(operand_values, &pos, &key, &value)) {
        PyObject *bid = buffer_id(buffer_of, key), *ids;
        int rc;
        if (bid == NULL || (rc = PyDict_Contains(operand_buffers, bid)) < 0) {
            goto fail;
        }
        if (rc) {
            continue;
        }
        if ((ids = buffer_ids(buffer_of, value, 0)) == NULL) {
            goto fail;
        }
        rc = PyDict_SetItem(operand_buffers, bid, ids);
        Py_DECREF(ids);
        if (rc < 0) {
            goto fail;
        }
    }
    pos = 0;
    while (PyDict_Next(copy_reads, &pos, &key, &value)) {
        PyObject *bid = buffer_id(buffer_of, key), *ids, *set;
        int rc;
        if (bid == NULL || (ids = buffer_ids(buffer_of, value, 1)) == NULL) {
            goto fail;
        }
        set = PyFrozenSet_New(ids);
        Py_DECREF(ids);
        if (set == NULL) {
            goto fail;
        }
        rc = PyDict_SetItem(copies_of, bid, set);
        Py_DECREF(set);
        if (rc < 0) {
            goto fail;
        }
    }
    Py_DECREF(share);
    Py_DECREF(operand_values);
    Py_DECREF(copy_reads);
    Py_DECREF(shares);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(share);
    Py_XDECREF(operand_values);
    Py_XDECREF(copy_reads);
    Py_XDECREF(shares);
    return NULL;
}

static PyMethodDef methods[] = {
    {"plain_run", (PyCFunction)(void (*)(void))plain_run, METH_FASTCALL,
     "plain_run(walk, start, cname, names, opcodes, shapes, operand_lists, trees, needs_python, elementwise) -> "
     "int: see hloscope.memory.liveness._Walk.computation."},
    {"make_buffers", (PyCFunction)(void (*)(void))make_buffers, METH_FASTCALL,
     "make_buffers(walk, end, tiled, merged, buffer_type, pointer_bytes, granule_bytes) -> (buffers, buffer_of): "
     "see hloscope.memory.liveness.py_make_buffers."},
    {"link_buffers", (PyCFunction)(void (*)(void))link_buffers, METH_FASTCALL,
     "link_buffers(walk, buffers, buffer_of, operand_buffers, copies_of) -> None: see "
     "hloscope.memory.liveness.py_link_buffers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_liveness_walk",
    "The memory model's walk over plain instructions and the making and linking of its buffers, in C "
    "(hloscope.memory.liveness._Walk.instruction, py_make_buffers and py_link_buffers are the specification).", -1,
    methods, NULL, NULL, NULL, NULL,
};

static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__liveness_walk(void) {
    int k;
    if (intern(&s_parent, "parent") < 0 || intern(&s_define_time, "define_time") < 0 ||
        intern(&s_last_use, "last_use") < 0 || intern(&s_shapes, "shapes") < 0 ||
        intern(&s_table_len, "table_len") < 0 || intern(&s_origin, "origin") < 0 || intern(&s_share, "share") < 0 ||
        intern(&s_operand_values, "operand_values") < 0 || intern(&s_copy_reads, "copy_reads") < 0 ||
        intern(&s_sequence, "sequence") < 0 || intern(&s_now, "now") < 0 ||
        intern(&s_element_type, "element_type") < 0 || intern(&s_hbm_size_bytes, "hbm_size_bytes") < 0 ||
        intern(&s_tuple, "tuple") < 0 || intern(&s_constant, "constant") < 0 || intern(&s_temp, "temp") < 0 ||
        intern(&s_copy, "copy") < 0 || intern(&s_start_suffix, "-start") < 0 || intern(&s_done_suffix, "-done") < 0 ||
        intern(&s_live_out, "live_out") < 0 || intern(&s_post_order, "post_order") < 0 ||
        intern(&s_host_size_bytes, "host_size_bytes") < 0 || intern(&s_parameter, "parameter") < 0 ||
        intern(&s_output, "output") < 0 || intern(&s_start, "start") < 0 || intern(&s_end, "end") < 0 ||
        intern(&s_share_candidates, "share_candidates") < 0) {
        return NULL;
    }
    for (k = 0; k < BUFFER_SLOTS; k++) {
        if (intern(&BUFFER_SLOT_NAMES[k], BUFFER_SLOT_TEXTS[k]) < 0) {
            return NULL;
        }
    }
    s_empty = PyTuple_New(0);
    if (s_empty == NULL) {
        return NULL;
    }
    s_zero = PyLong_FromLong(0);
    s_minus_one = s_zero ? PyLong_FromLong(-1) : NULL;
    if (s_minus_one == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
