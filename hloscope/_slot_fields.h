/* Fields of hloscope's records read in place, for the C extensions that walk many of them.
 *
 * hloscope's records (hloscope._record) keep their fields in object slots (``__slots__``) and leave attribute access
 * to the generic one: for an instance of such a type, ``obj.name`` is the object in the slot whose member
 * descriptor the type's attribute ``name`` is (NULL there: unset, AttributeError). Reading the slot skips the
 * lookup of the name in the type's dictionaries that PyObject_GetAttr makes each time (~160 instructions a read).
 * Included by hloscope/memory/_buffer_assign.c and hloscope/memory/_liveness_walk.c (setup.py: ``depends``); the
 * latter also writes a new Buffer's slots at the offsets found here (``make_buffers``). */

#ifndef HLOSCOPE_SLOT_FIELDS_H
#define HLOSCOPE_SLOT_FIELDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* The slot offsets of the n fields names[k] of instances of type into offsets: 1, or 0 (no error set) when the
 * type's attribute access is not the generic one or a field is not a settable object slot of it (a property, a
 * class attribute, missing; ``__slots__`` members are all settable, so a reader and a writer ask the same). */
static int slot_offsets(PyTypeObject *type, PyObject *const *names, int n, Py_ssize_t *offsets) {
    int k;
    if (type->tp_getattro != PyObject_GenericGetAttr) {
        return 0;
    }
    for (k = 0; k < n; k++) {
        PyObject *descr = PyObject_GetAttr((PyObject *)type, names[k]);
        int slot;
        if (descr == NULL) {
            PyErr_Clear();
            return 0;
        }
        slot = Py_TYPE(descr) == &PyMemberDescr_Type;
        if (slot) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            slot = member->type == T_OBJECT_EX && !(member->flags & READONLY);
            offsets[k] = member->offset;
        }
        Py_DECREF(descr);
        if (!slot) {
            return 0;
        }
    }
    return 1;
}

/* obj.name, a new reference (NULL with the error set): from the slot at offset when obj is exactly of type (offset
 * found by slot_offsets; type NULL: never) and the slot is set, else by PyObject_GetAttr. */
static PyObject *slot_field(PyObject *obj, PyTypeObject *type, Py_ssize_t offset, PyObject *name) {
    if (type != NULL && Py_TYPE(obj) == type) {
        PyObject *v = *(PyObject **)((char *)obj + offset);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(obj, name);
}

#endif
