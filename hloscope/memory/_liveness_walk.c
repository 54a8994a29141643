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

#define MAX_OPERANDS 64

static PyObject *s_parent, *s_define_time, *s_last_use, *s_shapes, *s_table_len, *s_origin, *s_share,
    *s_operand_values, *s_copy_reads, *s_sequence, *s_now, *s_element_type, *s_hbm_size_bytes, *s_tuple,
    *s_constant, *s_temp, *s_copy, *s_start_suffix, *s_done_suffix, *s_zero, *s_minus_one;

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
        etype = PyObject_GetAttr(shape, s_element_type);
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
            size = PyObject_GetAttr(shape, s_hbm_size_bytes);
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
                other_size = PyObject_GetAttr(other, s_hbm_size_bytes);
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

static PyMethodDef methods[] = {
    {"plain_run", (PyCFunction)(void (*)(void))plain_run, METH_FASTCALL,
     "plain_run(walk, start, cname, names, opcodes, shapes, operand_lists, trees, needs_python, elementwise) -> "
     "int: see hloscope.memory.liveness._Walk.computation."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_liveness_walk",
    "The memory model's walk over plain instructions, in C (hloscope.memory.liveness._Walk.instruction is the "
    "specification).", -1, methods, NULL, NULL, NULL, NULL,
};

static int intern(PyObject **slot, const char *text) {
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC PyInit__liveness_walk(void) {
    if (intern(&s_parent, "parent") < 0 || intern(&s_define_time, "define_time") < 0 ||
        intern(&s_last_use, "last_use") < 0 || intern(&s_shapes, "shapes") < 0 ||
        intern(&s_table_len, "table_len") < 0 || intern(&s_origin, "origin") < 0 || intern(&s_share, "share") < 0 ||
        intern(&s_operand_values, "operand_values") < 0 || intern(&s_copy_reads, "copy_reads") < 0 ||
        intern(&s_sequence, "sequence") < 0 || intern(&s_now, "now") < 0 ||
        intern(&s_element_type, "element_type") < 0 || intern(&s_hbm_size_bytes, "hbm_size_bytes") < 0 ||
        intern(&s_tuple, "tuple") < 0 || intern(&s_constant, "constant") < 0 || intern(&s_temp, "temp") < 0 ||
        intern(&s_copy, "copy") < 0 || intern(&s_start_suffix, "-start") < 0 || intern(&s_done_suffix, "-done") < 0) {
        return NULL;
    }
    s_zero = PyLong_FromLong(0);
    s_minus_one = s_zero ? PyLong_FromLong(-1) : NULL;
    if (s_minus_one == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
