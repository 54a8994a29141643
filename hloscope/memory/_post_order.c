/* XLA's post order of one computation's instructions (HloComputation::MakeInstructionPostOrder), for the memory
 * model's buffer order (hloscope.memory.liveness.py_post_order is the specification; tests/memory/
 * test_post_order.py holds the two equal).
 *
 * post_order(names, operand_lists) -> list[str]
 *
 * names: the instruction names in printed order; operand_lists: each instruction's operand names (a name that is
 * not an instruction of the computation is passed over). A depth-first walk of operands, first operand first,
 * from each instruction no other uses, in printed order; an instruction comes after all its operands. Names the
 * walk never reaches (a cycle, which the parser rejects) follow in printed order. A name printed twice is the
 * later instruction, as a dict built in order keeps it.
 *
 * Built as an optional extension (setup.py): without it the Python walk runs (~1 us an instruction: 18-26 ms of
 * the memory footprint of the corpus's llama module). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *post_order(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *names = NULL, *lists = NULL, *index = NULL, *out = NULL;
    Py_ssize_t n, i, edges = 0, top, *first = NULL, *kids = NULL, *stack = NULL;
    char *used = NULL, *state = NULL;
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "post_order(names, operand_lists)");
        return NULL;
    }
    names = PySequence_Fast(args[0], "post_order: names must be a sequence");
    lists = names ? PySequence_Fast(args[1], "post_order: operand_lists must be a sequence") : NULL;
    if (lists == NULL) {
        goto done;
    }
    n = PySequence_Fast_GET_SIZE(names);
    if (PySequence_Fast_GET_SIZE(lists) != n) {
        PyErr_SetString(PyExc_ValueError, "post_order: names and operand_lists differ in length");
        goto done;
    }
    index = PyDict_New();
    if (index == NULL) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        PyObject *k = PyLong_FromSsize_t(i);
        if (k == NULL || PyDict_SetItem(index, PySequence_Fast_GET_ITEM(names, i), k) < 0) {
            Py_XDECREF(k);
            goto done;
        }
        Py_DECREF(k);
        edges += PyObject_Length(PySequence_Fast_GET_ITEM(lists, i));
        if (PyErr_Occurred()) {
            goto done;
        }
    }
    /* The operands that are instructions, as indices: kids[first[i] .. first[i + 1]). */
    first = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    kids = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(edges + 1));
    stack = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(edges + n + 1));
    used = PyMem_Calloc((size_t)n + 1, 1);
    state = PyMem_Calloc((size_t)n + 1, 1); /* 0 new, 1 visiting, 2 done */
    if (!first || !kids || !stack || !used || !state) {
        PyErr_NoMemory();
        goto done;
    }
    edges = 0;
    for (i = 0; i < n; i++) {
        PyObject *ops = PySequence_Fast(PySequence_Fast_GET_ITEM(lists, i), "post_order: operands must be a sequence");
        Py_ssize_t j, m;
        if (ops == NULL) {
            goto done;
        }
        first[i] = edges;
        m = PySequence_Fast_GET_SIZE(ops);
        for (j = 0; j < m; j++) {
            PyObject *k = PyDict_GetItemWithError(index, PySequence_Fast_GET_ITEM(ops, j));
            if (k == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(ops);
                    goto done;
                }
                continue;
            }
            kids[edges] = PyLong_AsSsize_t(k);
            used[kids[edges]] = 1;
            edges++;
        }
        Py_DECREF(ops);
    }
    first[n] = edges;
    out = PyList_New(0);
    if (out == NULL) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        if (used[i] || state[i]) {
            continue;
        }
        top = 0;
        stack[top++] = i;
        while (top > 0) {
            Py_ssize_t at = stack[top - 1], e;
            if (state[at]) {
                top--;
                if (state[at] == 1) {
                    state[at] = 2;
                    if (PyList_Append(out, PySequence_Fast_GET_ITEM(names, at)) < 0) {
                        Py_CLEAR(out);
                        goto done;
                    }
                }
                continue;
            }
            state[at] = 1;
            for (e = first[at + 1] - 1; e >= first[at]; e--) { /* reversed: the first operand on top */
                if (!state[kids[e]]) {
                    stack[top++] = kids[e];
                }
            }
        }
    }
    for (i = 0; i < n; i++) {
        if (!state[i] && PyList_Append(out, PySequence_Fast_GET_ITEM(names, i)) < 0) {
            Py_CLEAR(out);
            goto done;
        }
    }
done:
    PyMem_Free(first);
    PyMem_Free(kids);
    PyMem_Free(stack);
    PyMem_Free(used);
    PyMem_Free(state);
    Py_XDECREF(index);
    Py_XDECREF(names);
    Py_XDECREF(lists);
    return out;
}

static PyMethodDef methods[] = {
    {"post_order", (PyCFunction)(void (*)(void))post_order, METH_FASTCALL,
     "post_order(names, operand_lists) -> list[str]: see hloscope.memory.liveness.py_post_order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_post_order",
    "The compiled form of hloscope.memory.liveness.py_post_order.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__post_order(void) { return PyModule_Create(&module); }
