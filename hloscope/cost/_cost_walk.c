/* The shared-cost rows of the cost walk (hloscope.cost.module._Analyzer.visit) without a Python step.
 *
 * shared_rows(insts, start, computation, count, index, shapes, by_shapes, ruled, cost_row, out) -> int
 *
 * For insts[start], insts[start + 1], ...: an instruction whose opcode is in ``ruled`` (the opcodes whose cost
 * is a function of the opcode and the result and operand shapes alone, ``_SHAPE_RULED``) and whose key
 * ``(opcode, id(shape), id(operand shape), ...)`` -- an operand's shape being ``shapes[index[name]]``, what
 * ``HloComputation.shape_of`` gives -- is already in ``by_shapes`` gets the row
 * ``cost_row(computation, inst, by_shapes[key], count)``, appended to ``out``, as ``visit`` makes it. Stops at
 * the first instruction it leaves to ``visit``: another opcode, an operand not in ``index``, a key not yet in
 * ``by_shapes`` (``visit`` costs it and stores it). Returns that instruction's index (len(insts) when none).
 * ``cost_row`` is ``CostRow`` (a tuple subclass: its rows are made as ``tuple.__new__`` makes them).
 *
 * tests/cost/test_shared_costs.py holds the walk's rows equal with and without it on every fixture and corpus
 * module. Built as an optional extension (setup.py): without it ``visit`` makes every row itself. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *STR_OPCODE, *STR_SHAPE, *STR_OPERANDS;

static int init_names(void) {
    if (STR_OPCODE != NULL) {
        return 0;
    }
    STR_OPCODE = PyUnicode_InternFromString("opcode");
    STR_SHAPE = PyUnicode_InternFromString("shape");
    STR_OPERANDS = PyUnicode_InternFromString("operands");
    return (STR_OPCODE && STR_SHAPE && STR_OPERANDS) ? 0 : -1;
}

/* The memo key of inst (new reference), Py_None (borrowed) when an operand is not in index, NULL on error. */
static PyObject *shape_key(PyObject *opcode, PyObject *inst, PyObject *index, PyObject *shapes) {
    PyObject *shape, *operands, *key, *item;
    Py_ssize_t n, k;
    shape = PyObject_GetAttr(inst, STR_SHAPE);
    if (shape == NULL) {
        return NULL;
    }
    operands = PyObject_GetAttr(inst, STR_OPERANDS);
    if (operands == NULL) {
        Py_DECREF(shape);
        return NULL;
    }
    if (!PyTuple_Check(operands)) {
        Py_DECREF(shape);
        Py_DECREF(operands);
        return Py_None;
    }
    n = PyTuple_GET_SIZE(operands);
    key = PyTuple_New(2 + n);
    if (key == NULL) {
        Py_DECREF(shape);
        Py_DECREF(operands);
        return NULL;
    }
    Py_INCREF(opcode);
    PyTuple_SET_ITEM(key, 0, opcode);
    item = PyLong_FromVoidPtr(shape); /* id(shape) */
    Py_DECREF(shape); /* (the instruction keeps it alive) */
    if (item == NULL) {
        goto fail;
    }
    PyTuple_SET_ITEM(key, 1, item);
    for (k = 0; k < n; k++) {
        PyObject *i = PyDict_GetItemWithError(index, PyTuple_GET_ITEM(operands, k)), *operand_shape;
        Py_ssize_t at;
        if (i == NULL) {
            if (PyErr_Occurred()) {
                goto fail;
            }
            Py_DECREF(operands);
            Py_DECREF(key);
            return Py_None;
        }
        at = PyLong_AsSsize_t(i);
        if (at == -1 && PyErr_Occurred()) {
            goto fail;
        }
        if (at < 0 || at >= PyTuple_GET_SIZE(shapes)) {
            Py_DECREF(operands);
            Py_DECREF(key);
            return Py_None;
        }
        operand_shape = PyTuple_GET_ITEM(shapes, at);
        item = PyLong_FromVoidPtr(operand_shape);
        if (item == NULL) {
            goto fail;
        }
        PyTuple_SET_ITEM(key, 2 + k, item);
    }
    Py_DECREF(operands);
    return key;
fail:
    Py_DECREF(operands);
    Py_DECREF(key);
    return NULL;
}

static PyObject *shared_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *insts, *computation, *count, *index, *shapes, *by_shapes, *ruled, *out;
    PyTypeObject *cost_row;
    Py_ssize_t start, n, i;
    (void)self;
    if (nargs != 10 || !(PyList_Check(args[0]) || PyTuple_Check(args[0])) || !PyDict_Check(args[4])
        || !PyTuple_Check(args[5]) || !PyDict_Check(args[6]) || !PyAnySet_Check(args[7]) || !PyType_Check(args[8])
        || !PyType_IsSubtype((PyTypeObject *)args[8], &PyTuple_Type) || !PyList_Check(args[9])) {
        PyErr_SetString(PyExc_TypeError, "shared_rows(insts, start: int, computation: str, count: float, "
                                         "index: dict, shapes: tuple, by_shapes: dict, ruled: set, "
                                         "cost_row: type[tuple], out: list)");
        return NULL;
    }
    if (init_names() < 0) {
        return NULL;
    }
    insts = args[0];
    start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    computation = args[2];
    count = args[3];
    index = args[4];
    shapes = args[5];
    by_shapes = args[6];
    ruled = args[7];
    cost_row = (PyTypeObject *)args[8];
    out = args[9];
    n = PySequence_Fast_GET_SIZE(insts);
    for (i = start < 0 ? 0 : start; i < n; i++) {
        PyObject *inst = PySequence_Fast_GET_ITEM(insts, i), *opcode, *key, *cost, *row;
        int r;
        opcode = PyObject_GetAttr(inst, STR_OPCODE);
        if (opcode == NULL) {
            return NULL;
        }
        r = PySet_Contains(ruled, opcode);
        if (r <= 0) {
            Py_DECREF(opcode);
            if (r < 0) {
                return NULL;
            }
            break;
        }
        key = shape_key(opcode, inst, index, shapes);
        Py_DECREF(opcode);
        if (key == NULL) {
            return NULL;
        }
        if (key == Py_None) {
            break;
        }
        cost = PyDict_GetItemWithError(by_shapes, key);
        Py_DECREF(key);
        if (cost == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            break;
        }
        row = cost_row->tp_alloc(cost_row, 4); /* (as tuple.__new__(CostRow, ...) makes a tuple subclass) */
        if (row == NULL) {
            return NULL;
        }
        Py_INCREF(computation);
        PyTuple_SET_ITEM(row, 0, computation);
        Py_INCREF(inst);
        PyTuple_SET_ITEM(row, 1, inst);
        Py_INCREF(cost);
        PyTuple_SET_ITEM(row, 2, cost);
        Py_INCREF(count);
        PyTuple_SET_ITEM(row, 3, count);
        r = PyList_Append(out, row);
        Py_DECREF(row);
        if (r < 0) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"shared_rows", (PyCFunction)(void (*)(void))shared_rows, METH_FASTCALL,
     "shared_rows(insts, start, computation, count, index, shapes, by_shapes, ruled, cost_row, out) -> int\n\n"
     "The rows of hloscope.cost.module._Analyzer.visit for instructions whose shared cost is known, from\n"
     "insts[start] on (appended to out); the index of the first instruction left to visit."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cost_walk",
    "The shared-cost rows of hloscope.cost.module._Analyzer.visit, made in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__cost_walk(void) { return PyModule_Create(&module); }
