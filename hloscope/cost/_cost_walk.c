/* The shared-cost rows of the cost walk (hloscope.cost.module._Analyzer.visit) without a Python step, the
 * columns of its CostRows in one pass each (cost_totals: module totals; table_columns: the ops table's
 * fields), and the fields a computation's structure is keyed by and its key (structure_fields, structure_key:
 * hloscope.cost.structure);
 * each function's comment below says what it returns.
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
 * With ``keyed`` (a tuple, else None), two more kinds of instruction get their row here: an opcode in
 * ``keyed[0]`` (``FREE_OPCODES``, whose rule costs ``keyed[1]``, ``ZERO``) and an opcode in ``keyed[2]`` (the other
 * opcodes with a rule) whose ``structure.attribute_key`` -- made here as that function makes it, its called
 * computations' work read from ``keyed[5]`` (``_Analyzer.work``; a computation not there yet is costed by
 * ``keyed[8]``, ``computation_work``, which keeps it there -- unless its first answer, a small computation's work
 * by its opcode and shape columns, is found here: ``work_by_columns``), a text's bare form from ``keyed[6]`` else
 * ``keyed[7](text)`` (``without_metadata``, kept in ``keyed[6]``), a collective's (``keyed[3]``) channel_id value
 * cut -- is in ``keyed[4]`` (``_Analyzer.by_attributes``). A key this cannot make (a text, operand or called
 * computation ``attribute_key`` refuses) or does not find stops it there, as ``visit``
 * then costs the instruction and fills the memo. ``attribute_key_of(inst, index, shapes, keyed, collective)``
 * gives the key alone (tests hold it equal to ``attribute_key``'s). A ``call`` gets its row (cost ``ZERO``) and
 * its callees' rows here when ``keyed[12]`` (``_Analyzer.call_rows``, else None) holds the rows of each callee at
 * this count, which ``visit`` made at an earlier call site.
 *
 * tests/cost/test_shared_costs.py holds the walk's rows equal with and without it on every fixture and corpus
 * module. Built as an optional extension (setup.py): without it ``visit`` makes every row itself. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>

#include <structmember.h>

static PyObject *STR_OPCODE, *STR_SHAPE, *STR_OPERANDS, *STR_NAME, *STR_TEXT, *STR_LITERAL, *STR_PARAMETER,
    *STR_CALLS, *STR_CHANNEL_ID, *STR_MASK;

static int init_names(void) {
    if (STR_OPCODE != NULL) {
        return 0;
    }
    STR_OPCODE = PyUnicode_InternFromString("opcode");
    STR_SHAPE = PyUnicode_InternFromString("shape");
    STR_OPERANDS = PyUnicode_InternFromString("operands");
    STR_NAME = PyUnicode_InternFromString("name");
    STR_TEXT = PyUnicode_InternFromString("attribute_text");
    STR_LITERAL = PyUnicode_InternFromString("literal");
    STR_PARAMETER = PyUnicode_InternFromString("parameter_number");
    STR_CALLS = PyUnicode_InternFromString("called_computations");
    STR_CHANNEL_ID = PyUnicode_InternFromString("channel_id=");
    STR_MASK = PyUnicode_FromStringAndSize("\0", 1); /* (structure.py's _MASK) */
    return (STR_OPCODE && STR_SHAPE && STR_OPERANDS && STR_NAME && STR_TEXT && STR_LITERAL && STR_PARAMETER
            && STR_CALLS && STR_CHANNEL_ID && STR_MASK) ? 0 : -1;
}

/* The attributes the walk reads of every instruction, read straight from their slots: ``HloInstruction`` keeps
 * them in ``__slots__`` (member descriptors), and ``PyObject_GetAttr`` -- a type lookup, then the descriptor --
 * cost ~30 ns a read, six reads an instruction between the walk and the table (~4 ms of the corpus's llama). The
 * offsets are learned from the first instruction's type (each name a writable object slot of that type, else no
 * direct read); an instruction of any other type, or a slot not set, is read by ``PyObject_GetAttr``. */
enum { SLOT_OPCODE, SLOT_SHAPE, SLOT_OPERANDS, SLOT_NAME, SLOT_TEXT, SLOT_CALLS, SLOT_LITERAL, SLOT_PARAMETER,
       N_SLOT_READS };
static PyObject **const SLOT_NAMES[N_SLOT_READS] = {&STR_OPCODE, &STR_SHAPE,    &STR_OPERANDS, &STR_NAME,
                                                     &STR_TEXT,   &STR_CALLS,    &STR_LITERAL,  &STR_PARAMETER};
static PyTypeObject *SLOT_TYPE = NULL; /* (a strong reference: its address is not reused while learned) */
static Py_ssize_t SLOT_OFFSETS[N_SLOT_READS];

static void learn_slots(PyTypeObject *type) {
    int k;
    for (k = 0; k < N_SLOT_READS; k++) {
        PyObject *descr = PyObject_GetAttr((PyObject *)type, *SLOT_NAMES[k]);
        SLOT_OFFSETS[k] = 0;
        if (descr == NULL) {
            PyErr_Clear();
            continue;
        }
        if (Py_TYPE(descr) == &PyMemberDescr_Type && ((PyMemberDescrObject *)descr)->d_common.d_type == type) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            if (member->type == T_OBJECT_EX && member->offset > 0) {
                SLOT_OFFSETS[k] = member->offset;
            }
        }
        Py_DECREF(descr);
    }
    Py_INCREF(type);
    Py_XSETREF(SLOT_TYPE, type);
}

/* float(v) as a double: what PyFloat_AsDouble gives (-1.0 with the error set when it fails), an exact int read by
 * PyLong_AsDouble -- the function float() of an int calls -- without the float object PyFloat_AsDouble would make
 * and free for it (a cost's FLOPs and bytes are ints: ~80,000 a corpus module's totals). */
static inline double as_double(PyObject *v) {
    if (PyFloat_CheckExact(v)) {
        return PyFloat_AS_DOUBLE(v);
    }
    return PyLong_CheckExact(v) ? PyLong_AsDouble(v) : PyFloat_AsDouble(v);
}

/* inst.<SLOT_NAMES[which]> as a new reference (NULL with the attribute error). */
static inline PyObject *get_slot(PyObject *inst, int which) {
    if (SLOT_TYPE == NULL) {
        learn_slots(Py_TYPE(inst));
    }
    if (Py_TYPE(inst) == SLOT_TYPE && SLOT_OFFSETS[which] > 0) {
        PyObject *v = *(PyObject **)((char *)inst + SLOT_OFFSETS[which]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(inst, *SLOT_NAMES[which]);
}

/* id(p) as an int object (new reference, NULL on error), from a small table of the ints it made: a memo key's ids
 * are those of a module's few distinct shapes, met again and again, so the key's items are then the very int
 * objects of the key the memo keeps, which the dict's comparison of the two tuples finds equal by identity, and
 * no int is made and freed for them. An entry stays right whatever object later lives at p: it is the number. */
#define ID_TABLE_SIZE 1024
static void *ID_ADDRESSES[ID_TABLE_SIZE];
static PyObject *ID_INTS[ID_TABLE_SIZE];

static inline PyObject *id_of(void *p) {
    size_t h = ((uintptr_t)p >> 4) & (ID_TABLE_SIZE - 1);
    PyObject *made;
    if (ID_INTS[h] != NULL && ID_ADDRESSES[h] == p) {
        Py_INCREF(ID_INTS[h]);
        return ID_INTS[h];
    }
    made = PyLong_FromVoidPtr(p);
    if (made == NULL) {
        return NULL;
    }
    Py_INCREF(made);
    Py_XSETREF(ID_INTS[h], made);
    ID_ADDRESSES[h] = p;
    return made;
}

/* The shape of the operand named name, shapes[index[name]] (``HloComputation.shape_of``), into *shape (borrowed):
 * 1, 0 when index has no such name or its number is not an index of shapes, -1 on error. */
static inline int operand_shape(PyObject *index, PyObject *shapes, PyObject *name, PyObject **shape) {
    PyObject *i = PyDict_GetItemWithError(index, name);
    Py_ssize_t j;
    if (i == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    j = PyLong_AsSsize_t(i);
    if (j == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (j < 0 || j >= PyTuple_GET_SIZE(shapes)) {
        return 0;
    }
    *shape = PyTuple_GET_ITEM(shapes, j);
    return 1;
}

/* id(shape) of each of inst's operands (operand_shape) into the items of out from ``at`` on (out: a new tuple with
 * room for them): 1, 0 when an operand is not in index (or the operands are not a tuple), -1 on error. */
static int operand_shape_ids(PyObject *operands, PyObject *index, PyObject *shapes, PyObject *out, Py_ssize_t at) {
    Py_ssize_t k, n = PyTuple_GET_SIZE(operands);
    for (k = 0; k < n; k++) {
        PyObject *shape, *item;
        int r = operand_shape(index, shapes, PyTuple_GET_ITEM(operands, k), &shape);
        if (r <= 0) {
            return r;
        }
        item = id_of(shape);
        if (item == NULL) {
            return -1;
        }
        PyTuple_SET_ITEM(out, at + k, item);
    }
    return 1;
}

/* The memo key of inst (new reference), Py_None (borrowed) when an operand is not in index, NULL on error. */
static PyObject *shape_key(PyObject *opcode, PyObject *inst, PyObject *index, PyObject *shapes) {
    PyObject *shape, *operands, *key = NULL, *item;
    int r;
    operands = get_slot(inst, SLOT_OPERANDS);
    if (operands == NULL) {
        return NULL;
    }
    if (!PyTuple_Check(operands)) {
        Py_DECREF(operands);
        return Py_None;
    }
    shape = get_slot(inst, SLOT_SHAPE);
    key = shape == NULL ? NULL : PyTuple_New(2 + PyTuple_GET_SIZE(operands));
    item = key == NULL ? NULL : id_of(shape); /* id(shape) (the instruction keeps it alive) */
    Py_XDECREF(shape);
    if (item == NULL) {
        Py_XDECREF(key);
        Py_DECREF(operands);
        return NULL;
    }
    Py_INCREF(opcode);
    PyTuple_SET_ITEM(key, 0, opcode);
    PyTuple_SET_ITEM(key, 1, item);
    r = operand_shape_ids(operands, index, shapes, key, 2);
    Py_DECREF(operands);
    if (r <= 0) {
        Py_DECREF(key);
        return r < 0 ? NULL : Py_None;
    }
    return key;
}

/* ---- by_shapes' answers kept by the key's addresses ---------------------------------------------------------
 *
 * A shape key's items are an opcode string and the ids of shapes: the objects' addresses name it. Once by_shapes
 * has answered a key, SHAPE_ANSWERS answers it again from those addresses (a hash of a few words, a compare of
 * them) instead of a new key tuple, its hash (tuplehash over its items) and the dict's compare with the key it
 * holds: ~380 instructions a row before, on the 29,000 shape-keyed rows of the corpus's gemma4 walk.
 *
 * Its entries are made from the dict's own answers and stand for that dict alone (``owner``, held by a strong
 * reference so that no other dict is made at its address while they stand; another dict empties the table):
 * the walk only adds keys to by_shapes and stores a key's cost once (``_Analyzer.visit``), so an entry stays the
 * dict's answer. The shapes whose addresses an entry holds live as long as that walk's module, as they must for
 * the ids in the dict's keys. An opcode equal to an entry's but another string object finds no entry: the dict
 * answers it, and an entry is made for that object too. Keys of more than PTR_KEY_MAX items go to the dict only.
 * (The attribute keys were tried the same way, by their bare text's object, and found nothing again: a text names
 * its own called computations, which the key masks.) */
#define PTR_KEY_MAX 16

typedef struct {
    Py_ssize_t n;                   /* items of the key; 0: an empty slot */
    size_t hash;
    const void *items[PTR_KEY_MAX]; /* (shape_pointers) */
    PyObject *cost;                 /* (strong) */
} PtrEntry;

typedef struct {
    PyObject *owner; /* the memo dict the entries answer for (strong), or NULL */
    PtrEntry *slots;
    size_t mask, used;
} PtrTable;

/* by_shapes' answers. */
static PtrTable SHAPE_ANSWERS = {NULL, NULL, 0, 0};

static size_t ptr_hash(const void *const *items, Py_ssize_t n) {
    size_t h = (size_t)n;
    Py_ssize_t k;
    for (k = 0; k < n; k++) {
        h = (h ^ ((uintptr_t)items[k] >> 4)) * 0x9E3779B97F4A7C15ULL;
    }
    return h ^ (h >> 29);
}

static void ptr_table_clear(PtrTable *t) {
    size_t k;
    for (k = 0; t->slots != NULL && k <= t->mask; k++) {
        Py_XDECREF(t->slots[k].cost);
    }
    PyMem_Free(t->slots);
    t->slots = NULL;
    t->mask = t->used = 0;
}

/* The slot of the key (items, n, h): the entry holding it, else the empty slot where it would go. */
static PtrEntry *ptr_slot(PtrEntry *slots, size_t mask, const void *const *items, Py_ssize_t n, size_t h) {
    size_t at = h & mask;
    for (;; at = (at + 1) & mask) {
        PtrEntry *e = &slots[at];
        if (e->n == 0 || (e->hash == h && e->n == n && memcmp(e->items, items, (size_t)n * sizeof(void *)) == 0)) {
            return e;
        }
    }
}

/* The cost memo gave for the key (borrowed), or NULL: none kept (never an error). */
static PyObject *ptr_find(PtrTable *t, PyObject *memo, const void *const *items, Py_ssize_t n, size_t h) {
    if (memo != t->owner || t->slots == NULL) {
        return NULL;
    }
    return ptr_slot(t->slots, t->mask, items, n, h)->cost;
}

/* Keep memo's answer cost for the key: 0, or -1 with MemoryError. */
static int ptr_keep(PtrTable *t, PyObject *memo, const void *const *items, Py_ssize_t n, size_t h, PyObject *cost) {
    PtrEntry *e;
    if (memo != t->owner) {
        ptr_table_clear(t);
        Py_INCREF(memo);
        Py_XSETREF(t->owner, memo);
    }
    if (t->slots == NULL || 2 * (t->used + 1) > t->mask + 1) { /* (kept at most half full) */
        size_t size = t->slots == NULL ? 256 : 2 * (t->mask + 1), k;
        PtrEntry *grown = PyMem_Calloc(size, sizeof(PtrEntry));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (k = 0; t->slots != NULL && k <= t->mask; k++) {
            if (t->slots[k].n != 0) {
                *ptr_slot(grown, size - 1, t->slots[k].items, t->slots[k].n, t->slots[k].hash) = t->slots[k];
            }
        }
        PyMem_Free(t->slots);
        t->slots = grown;
        t->mask = size - 1;
    }
    e = ptr_slot(t->slots, t->mask, items, n, h);
    if (e->n == 0) {
        e->n = n;
        e->hash = h;
        memcpy(e->items, items, (size_t)n * sizeof(void *));
        Py_INCREF(cost);
        e->cost = cost;
        t->used++;
    }
    return 0;
}

/* The items of inst's shape key as addresses: items[0] the opcode, items[1] the result shape, then each operand's
 * shape (shapes[index[name]]); *n their number. 1; 0 when the key cannot be made (operands not a tuple, an operand
 * not in index: shape_key's None); 2 when it has more than PTR_KEY_MAX items; -1 on error. */
static int shape_pointers(PyObject *opcode, PyObject *inst, PyObject *index, PyObject *shapes, const void **items,
                          Py_ssize_t *n) {
    PyObject *operands = get_slot(inst, SLOT_OPERANDS), *shape;
    Py_ssize_t k, m;
    int result = 1;
    if (operands == NULL) {
        return -1;
    }
    if (!PyTuple_Check(operands)) {
        Py_DECREF(operands);
        return 0;
    }
    m = PyTuple_GET_SIZE(operands);
    if (m + 2 > PTR_KEY_MAX) {
        Py_DECREF(operands);
        return 2;
    }
    shape = get_slot(inst, SLOT_SHAPE);
    if (shape == NULL) {
        Py_DECREF(operands);
        return -1;
    }
    items[0] = opcode;
    items[1] = shape;
    Py_DECREF(shape); /* (the instruction keeps it alive) */
    for (k = 0; k < m && result == 1; k++) {
        PyObject *operand = NULL;
        result = operand_shape(index, shapes, PyTuple_GET_ITEM(operands, k), &operand);
        items[2 + k] = operand;
    }
    Py_DECREF(operands);
    *n = m + 2;
    return result;
}

/* The text of a collective's attribute text with its channel_id value cut out, as ``attribute_key`` cuts it
 * (``_CHANNEL_ID``: ``channel_id=`` once, at the start or after ", ", its value one or more ASCII digits ended by
 * ',' or the end): a new reference (the text itself when it holds no ``channel_id=``), Py_None (borrowed) when
 * the key cannot be made, NULL on error. */
static PyObject *cut_channel_id(PyObject *text) {
    Py_ssize_t n = PyUnicode_Count(text, STR_CHANNEL_ID, 0, PY_SSIZE_T_MAX), at, a, b, length;
    PyObject *head, *tail, *out;
    if (n < 0) {
        return NULL;
    }
    if (n == 0) {
        Py_INCREF(text);
        return text;
    }
    if (n != 1) {
        return Py_None;
    }
    length = PyUnicode_GET_LENGTH(text);
    at = PyUnicode_Find(text, STR_CHANNEL_ID, 0, length, 1);
    if (at < 0) {
        return at == -2 ? NULL : Py_None;
    }
    if (at != 0 && !(at >= 2 && PyUnicode_READ_CHAR(text, at - 2) == ',' && PyUnicode_READ_CHAR(text, at - 1) == ' ')) {
        return Py_None;
    }
    a = b = at + 11; /* (len("channel_id=")) */
    while (b < length) {
        Py_UCS4 c = PyUnicode_READ_CHAR(text, b);
        if (c < '0' || c > '9') {
            break;
        }
        b++;
    }
    if (b == a || (b < length && PyUnicode_READ_CHAR(text, b) != ',')) {
        return Py_None;
    }
    head = PyUnicode_Substring(text, 0, a);
    tail = head == NULL ? NULL : PyUnicode_Substring(text, b, length);
    out = tail == NULL ? NULL : PyUnicode_Concat(head, tail);
    Py_XDECREF(head);
    Py_XDECREF(tail);
    return out;
}

static PyObject *STR_OPCODES_SLOT, *STR_SHAPES_SLOT;

/* What ``_Analyzer.computation_work(callee)`` answers first, where it answers from its columns memo: a computation
 * of at most ``keyed[11]`` (``_SMALL_COMPUTATION``) instructions whose work -- keyed by (opcodes, *ids of shapes),
 * its ``_opcodes`` and ``_shapes`` -- ``keyed[9]`` (``work_by_columns``) holds; kept in ``keyed[5]`` (``work``) as
 * that method keeps it. The computation is ``keyed[10][callee]`` (``HloModule._by_name``). A new reference; NULL
 * without an error where that method has more to do (no such computation, columns not made yet, not small, not
 * in the memo): the caller then calls it; NULL with the error on error. (The corpus's llama and mixtral: ~2,500
 * and ~3,300 fused computations a module, all but a few answered here, ~2 us of Python each.) */
static PyObject *work_by_columns(PyObject *callee, PyObject *keyed) {
    PyObject *comp, *opcodes = NULL, *shapes = NULL, *key = NULL, *total = NULL, *item;
    Py_ssize_t small, k;
    if (STR_OPCODES_SLOT == NULL) {
        STR_OPCODES_SLOT = PyUnicode_InternFromString("_opcodes");
        STR_SHAPES_SLOT = PyUnicode_InternFromString("_shapes");
        if (STR_OPCODES_SLOT == NULL || STR_SHAPES_SLOT == NULL) {
            return NULL;
        }
    }
    comp = PyDict_GetItemWithError(PyTuple_GET_ITEM(keyed, 10), callee);
    if (comp == NULL) {
        return NULL; /* (the method raises its KeyError, naming the module) */
    }
    small = PyLong_AsSsize_t(PyTuple_GET_ITEM(keyed, 11));
    if (small == -1 && PyErr_Occurred()) {
        return NULL;
    }
    opcodes = PyObject_GetAttr(comp, STR_OPCODES_SLOT);
    shapes = opcodes == NULL ? NULL : PyObject_GetAttr(comp, STR_SHAPES_SLOT);
    if (shapes == NULL) {
        PyErr_Clear(); /* (another computation class: the method reads it) */
        goto done;
    }
    if (!PyTuple_Check(opcodes) || !PyTuple_Check(shapes) || PyTuple_GET_SIZE(opcodes) > small) {
        goto done;
    }
    key = PyTuple_New(1 + PyTuple_GET_SIZE(shapes));
    if (key == NULL) {
        goto done;
    }
    Py_INCREF(opcodes);
    PyTuple_SET_ITEM(key, 0, opcodes);
    for (k = 0; k < PyTuple_GET_SIZE(shapes); k++) {
        item = id_of(PyTuple_GET_ITEM(shapes, k)); /* id(shape) */
        if (item == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(key, 1 + k, item);
    }
    total = PyDict_GetItemWithError(PyTuple_GET_ITEM(keyed, 9), key);
    if (total != NULL) {
        Py_INCREF(total);
        if (PyDict_SetItem(PyTuple_GET_ITEM(keyed, 5), callee, total) < 0) {
            Py_CLEAR(total);
        }
    }
done:
    Py_XDECREF(opcodes);
    Py_XDECREF(shapes);
    Py_XDECREF(key);
    return total;
}

/* ``structure.attribute_key`` of inst (see the comment at the top): a new reference, Py_None (borrowed) where C
 * leaves the instruction to Python, NULL on error. keyed is shared_rows' keyed tuple. */
static PyObject *attribute_key_of(PyObject *opcode, PyObject *inst, PyObject *index, PyObject *shapes,
                                  PyObject *keyed, int collective) {
    PyObject *work = PyTuple_GET_ITEM(keyed, 5), *bare = PyTuple_GET_ITEM(keyed, 6),
             *strip = PyTuple_GET_ITEM(keyed, 7);
    PyObject *text = NULL, *b, *shape_ids = NULL, *calls = NULL, *key = NULL, *shape, *operands, *item, *roles = NULL;
    Py_ssize_t k;
    text = get_slot(inst, SLOT_TEXT);
    if (text == NULL) {
        return NULL;
    }
    b = PyDict_GetItemWithError(bare, text);
    if (b != NULL) {
        Py_INCREF(b);
    } else if (PyErr_Occurred()) {
        goto done;
    } else {
        b = PyObject_CallOneArg(strip, text);
        if (b == NULL || PyDict_SetItem(bare, text, b) < 0) {
            Py_XDECREF(b);
            goto done;
        }
    }
    Py_SETREF(text, b);
    if (text == Py_None || !PyUnicode_Check(text)) {
        goto none;
    }
    if (collective) {
        b = cut_channel_id(text);
        if (b == NULL) {
            goto done;
        }
        if (b == Py_None) {
            goto none;
        }
        Py_SETREF(text, b);
    }
    operands = get_slot(inst, SLOT_OPERANDS);
    if (operands == NULL) {
        goto done;
    }
    if (!PyTuple_Check(operands)) {
        Py_DECREF(operands);
        goto none;
    }
    shape_ids = PyTuple_New(PyTuple_GET_SIZE(operands));
    k = shape_ids == NULL ? -1 : operand_shape_ids(operands, index, shapes, shape_ids, 0);
    Py_DECREF(operands);
    if (k <= 0) {
        if (k < 0) {
            goto done;
        }
        goto none;
    }
    calls = get_slot(inst, SLOT_CALLS);
    if (calls == NULL) {
        goto done;
    }
    if (!PyDict_Check(calls)) {
        goto none;
    }
    if (PyDict_GET_SIZE(calls) > 0) {
        /* Every called name, in order; each distinct one (first seen first) found in the text as often as it is
         * called, then masked; per role, the work of each called computation. */
        PyObject *names = PyList_New(0), *role, *called;
        Py_ssize_t pos = 0, j;
        if (names == NULL) {
            goto done;
        }
        roles = PyList_New(0);
        if (roles == NULL) {
            Py_DECREF(names);
            goto done;
        }
        while (PyDict_Next(calls, &pos, &role, &called)) {
            PyObject *works, *pair;
            if (!PyTuple_Check(called)) {
                Py_DECREF(names);
                goto none;
            }
            works = PyTuple_New(PyTuple_GET_SIZE(called));
            if (works == NULL) {
                Py_DECREF(names);
                goto done;
            }
            for (j = 0; j < PyTuple_GET_SIZE(called); j++) {
                PyObject *callee = PyTuple_GET_ITEM(called, j),
                         *w = PyDict_GetItemWithError(work, callee);
                if (w != NULL) {
                    Py_INCREF(w);
                } else if (!PyErr_Occurred()) { /* (not known yet: computation_work computes and keeps it) */
                    w = work_by_columns(callee, keyed);
                    if (w == NULL && !PyErr_Occurred()) {
                        w = PyObject_CallOneArg(PyTuple_GET_ITEM(keyed, 8), callee);
                    }
                    if (w == NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
                        PyErr_Clear(); /* (no such computation: attribute_key gives None) */
                        Py_DECREF(works);
                        Py_DECREF(names);
                        goto none;
                    }
                }
                if (w == NULL || PyList_Append(names, callee) < 0) {
                    Py_XDECREF(w);
                    Py_DECREF(works);
                    Py_DECREF(names);
                    goto done;
                }
                PyTuple_SET_ITEM(works, j, w);
            }
            pair = PyTuple_Pack(2, role, works);
            Py_DECREF(works);
            if (pair == NULL || PyList_Append(roles, pair) < 0) {
                Py_XDECREF(pair);
                Py_DECREF(names);
                goto done;
            }
            Py_DECREF(pair);
        }
        for (j = 0; j < PyList_GET_SIZE(names); j++) {
            PyObject *callee = PyList_GET_ITEM(names, j), *masked;
            Py_ssize_t seen = 0, uses = 0, t, in_text;
            for (t = 0; t < PyList_GET_SIZE(names); t++) {
                int eq = PyUnicode_Compare(PyList_GET_ITEM(names, t), callee) == 0;
                if (eq && t < j) {
                    seen = 1;
                    break;
                }
                uses += eq;
            }
            if (seen) {
                continue; /* (masked already) */
            }
            in_text = PyUnicode_Count(text, callee, 0, PY_SSIZE_T_MAX);
            if (in_text < 0) {
                Py_DECREF(names);
                goto done;
            }
            if (in_text != uses) {
                Py_DECREF(names);
                goto none;
            }
            masked = PyUnicode_Replace(text, callee, STR_MASK, -1);
            if (masked == NULL) {
                Py_DECREF(names);
                goto done;
            }
            Py_SETREF(text, masked);
        }
        Py_DECREF(names);
        item = PyList_AsTuple(roles);
        if (item == NULL) {
            goto done;
        }
        Py_SETREF(roles, item);
    }
    shape = get_slot(inst, SLOT_SHAPE);
    if (shape == NULL) {
        goto done;
    }
    item = id_of(shape);
    Py_DECREF(shape);
    if (item == NULL) {
        goto done;
    }
    key = roles != NULL ? PyTuple_Pack(5, opcode, item, shape_ids, text, roles)
                        : PyTuple_Pack(4, opcode, item, shape_ids, text);
    Py_DECREF(item);
done:
    Py_XDECREF(text);
    Py_XDECREF(shape_ids);
    Py_XDECREF(calls);
    Py_XDECREF(roles);
    return key;
none:
    Py_XDECREF(text);
    Py_XDECREF(shape_ids);
    Py_XDECREF(calls);
    Py_XDECREF(roles);
    return Py_None;
}

/* Append cost_row(computation, inst, cost, count) to out; -1 on error. */
static int append_row(PyTypeObject *cost_row, PyObject *computation, PyObject *inst, PyObject *cost, PyObject *count,
                      PyObject *out) {
    PyObject *row = cost_row->tp_alloc(cost_row, 4); /* (as tuple.__new__(CostRow, ...) makes a tuple subclass) */
    int r;
    if (row == NULL) {
        return -1;
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
    return r;
}

/* Whether keyed is shared_rows' keyed tuple (see the comment at the top). */
static int keyed_ok(PyObject *keyed) {
    return PyTuple_Check(keyed) && PyTuple_GET_SIZE(keyed) == 13 && PyAnySet_Check(PyTuple_GET_ITEM(keyed, 0))
           && PyAnySet_Check(PyTuple_GET_ITEM(keyed, 2)) && PyAnySet_Check(PyTuple_GET_ITEM(keyed, 3))
           && PyDict_Check(PyTuple_GET_ITEM(keyed, 4)) && PyDict_Check(PyTuple_GET_ITEM(keyed, 5))
           && PyDict_Check(PyTuple_GET_ITEM(keyed, 6)) && PyCallable_Check(PyTuple_GET_ITEM(keyed, 7))
           && PyCallable_Check(PyTuple_GET_ITEM(keyed, 8)) && PyDict_Check(PyTuple_GET_ITEM(keyed, 9))
           && PyDict_Check(PyTuple_GET_ITEM(keyed, 10)) && PyLong_Check(PyTuple_GET_ITEM(keyed, 11))
           && (PyTuple_GET_ITEM(keyed, 12) == Py_None || PyDict_Check(PyTuple_GET_ITEM(keyed, 12)));
}

/* What shared_rows does with an opcode: leave it to visit, a shape key (``ruled``), the free opcodes' ZERO
 * (keyed[0]), an attribute key (keyed[2]; a collective's, keyed[3]), a ``call``'s rows (keyed[12]). */
enum { OPCODE_OTHER, OPCODE_RULED, OPCODE_FREE, OPCODE_KEYED, OPCODE_KEYED_COLLECTIVE, OPCODE_CALL };

/* Most callees one ``call`` names that call_rows looks up (more: left to visit). */
#define CALL_ROWS_MAX_CALLEES 4

/* The rows of a ``call`` whose callees' rows at this count visit made before (``_Analyzer.call_rows``, keyed[12]):
 * 1 with the call's own row (cost keyed[1], ZERO) and each callee's rows appended to out, as visit appends them;
 * 0 (nothing appended) when one is not there yet, or the called computations are not the plain dict of tuples
 * visit reads; -1 on error. */
static int call_rows(PyObject *inst, PyObject *keyed, PyObject *computation, PyObject *count, PyTypeObject *cost_row,
                     PyObject *out) {
    static const char *const roles[] = {"to_apply", "calls"}; /* (visit's order) */
    PyObject *memo = PyTuple_GET_ITEM(keyed, 12), *called, *made[CALL_ROWS_MAX_CALLEES];
    Py_ssize_t n_made = 0, i, k;
    int r;
    if (memo == Py_None) {
        return 0;
    }
    called = get_slot(inst, SLOT_CALLS);
    if (called == NULL) {
        return -1;
    }
    if (!PyDict_CheckExact(called)) {
        Py_DECREF(called);
        return 0;
    }
    for (i = 0; i < 2; i++) {
        PyObject *callees = PyDict_GetItemString(called, roles[i]); /* (borrowed; str keys: no error to lose) */
        if (callees == NULL) {
            continue;
        }
        if (!PyTuple_CheckExact(callees) || n_made + PyTuple_GET_SIZE(callees) > CALL_ROWS_MAX_CALLEES) {
            Py_DECREF(called);
            return 0;
        }
        for (k = 0; k < PyTuple_GET_SIZE(callees); k++) {
            PyObject *key = PyTuple_Pack(2, PyTuple_GET_ITEM(callees, k), count), *rows;
            if (key == NULL) {
                Py_DECREF(called);
                return -1;
            }
            rows = PyDict_GetItemWithError(memo, key); /* (borrowed: memo keeps it) */
            Py_DECREF(key);
            if (rows == NULL || !PyList_CheckExact(rows)) {
                Py_DECREF(called);
                return PyErr_Occurred() ? -1 : 0;
            }
            made[n_made++] = rows;
        }
    }
    Py_DECREF(called); /* (memo, which the caller holds, keeps the lists in made alive) */
    if (append_row(cost_row, computation, inst, PyTuple_GET_ITEM(keyed, 1), count, out) < 0) {
        return -1;
    }
    for (i = 0; i < n_made; i++) {
        r = PyList_SetSlice(out, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, made[i]); /* (out += made[i]) */
        if (r < 0) {
            return -1;
        }
    }
    return 1;
}

/* Kept per call by the opcode object's address (a parse shares one string per distinct opcode; the sets do not
 * change while the call runs): one pointer compare a row instead of up to four set lookups. Only an opcode read
 * from its instruction's slot is kept (``held``): the instruction, which the call's sequence holds, keeps it alive,
 * so no other object takes its address while the call runs. */
#define OPCODE_MEMO_SLOTS 32
typedef struct {
    PyObject *opcode; /* (borrowed: the call's instructions hold it; NULL: empty) */
    int kind;
} OpcodeKind;

/* The OPCODE_* of opcode, or -1 on error. */
static int opcode_kind(OpcodeKind *memo, PyObject *opcode, int held, PyObject *ruled, PyObject *keyed) {
    OpcodeKind *slot = &memo[((uintptr_t)opcode >> 4) & (OPCODE_MEMO_SLOTS - 1)];
    int r, kind;
    if (slot->opcode == opcode) {
        return slot->kind;
    }
    r = PySet_Contains(ruled, opcode);
    kind = OPCODE_RULED;
    if (r == 0) {
        kind = OPCODE_OTHER;
        if (keyed != NULL && PyTuple_GET_ITEM(keyed, 12) != Py_None && PyUnicode_Check(opcode)
            && PyUnicode_CompareWithASCIIString(opcode, "call") == 0) {
            kind = OPCODE_CALL;
        } else if (keyed != NULL) {
            r = PySet_Contains(PyTuple_GET_ITEM(keyed, 0), opcode);
            kind = OPCODE_FREE;
            if (r == 0) {
                r = PySet_Contains(PyTuple_GET_ITEM(keyed, 2), opcode);
                kind = r > 0 ? OPCODE_KEYED : OPCODE_OTHER;
                if (r > 0) {
                    r = PySet_Contains(PyTuple_GET_ITEM(keyed, 3), opcode);
                    kind = r > 0 ? OPCODE_KEYED_COLLECTIVE : OPCODE_KEYED;
                }
            }
        }
    }
    if (r < 0) {
        return -1;
    }
    if (held) {
        slot->opcode = opcode;
        slot->kind = kind;
    }
    return kind;
}

static PyObject *shared_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *insts, *computation, *count, *index, *shapes, *by_shapes, *ruled, *out, *keyed;
    OpcodeKind opcode_memo[OPCODE_MEMO_SLOTS];
    PyTypeObject *cost_row;
    Py_ssize_t start, n, i;
    (void)self;
    if (nargs != 11 || !(PyList_Check(args[0]) || PyTuple_Check(args[0])) || !PyDict_Check(args[4])
        || !PyTuple_Check(args[5]) || !PyDict_Check(args[6]) || !PyAnySet_Check(args[7]) || !PyType_Check(args[8])
        || !PyType_IsSubtype((PyTypeObject *)args[8], &PyTuple_Type) || !PyList_Check(args[9])
        || !(args[10] == Py_None || keyed_ok(args[10]))) {
        PyErr_SetString(PyExc_TypeError, "shared_rows(insts, start: int, computation: str, count: float, "
                                         "index: dict, shapes: tuple, by_shapes: dict, ruled: set, "
                                         "cost_row: type[tuple], out: list, keyed: tuple | None)");
        return NULL;
    }
    if (init_names() < 0) {
        return NULL;
    }
    keyed = args[10] == Py_None ? NULL : args[10];
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
    memset(opcode_memo, 0, sizeof(opcode_memo));
    for (i = start < 0 ? 0 : start; i < n; i++) {
        PyObject *inst = PySequence_Fast_GET_ITEM(insts, i), *opcode, *key, *cost, *memo = by_shapes;
        const void *items[PTR_KEY_MAX];
        Py_ssize_t n_items = 0;
        size_t hash = 0;
        int kind, remember = 0;
        opcode = get_slot(inst, SLOT_OPCODE);
        if (opcode == NULL) {
            return NULL;
        }
        kind = opcode_kind(opcode_memo, opcode, Py_TYPE(inst) == SLOT_TYPE && SLOT_OFFSETS[SLOT_OPCODE] > 0, ruled,
                           keyed);
        key = NULL;
        if (kind == OPCODE_RULED) {
            int made = shape_pointers(opcode, inst, index, shapes, items, &n_items);
            if (made == 1) {
                hash = ptr_hash(items, n_items);
                cost = ptr_find(&SHAPE_ANSWERS, by_shapes, items, n_items, hash);
                if (cost != NULL) { /* (by_shapes answered this key before) */
                    Py_DECREF(opcode);
                    if (append_row(cost_row, computation, inst, cost, count, out) < 0) {
                        return NULL;
                    }
                    continue;
                }
                remember = 1; /* (the dict's answer, once found, kept under these addresses) */
            }
            key = made == 0 ? Py_None : made < 0 ? NULL : shape_key(opcode, inst, index, shapes);
        } else if (kind == OPCODE_FREE) { /* (a free opcode: its rule's cost, ZERO) */
            Py_DECREF(opcode);
            if (append_row(cost_row, computation, inst, PyTuple_GET_ITEM(keyed, 1), count, out) < 0) {
                return NULL;
            }
            continue;
        } else if (kind == OPCODE_CALL) { /* (a call whose callees' rows are known: those rows again) */
            int done = call_rows(inst, keyed, computation, count, cost_row, out);
            Py_DECREF(opcode);
            if (done < 0) {
                return NULL;
            }
            if (done == 0) {
                break;
            }
            continue;
        } else if (kind == OPCODE_KEYED || kind == OPCODE_KEYED_COLLECTIVE) {
            key = attribute_key_of(opcode, inst, index, shapes, keyed, kind == OPCODE_KEYED_COLLECTIVE);
            memo = PyTuple_GET_ITEM(keyed, 4);
        }
        Py_DECREF(opcode);
        if (kind < 0) {
            return NULL;
        }
        if (kind == OPCODE_OTHER) {
            break;
        }
        if (key == NULL) {
            return NULL;
        }
        if (key == Py_None) {
            break;
        }
        cost = PyDict_GetItemWithError(memo, key);
        Py_DECREF(key);
        if (cost == NULL) {
            if (PyErr_Occurred()) {
                return NULL;
            }
            break;
        }
        if (remember && ptr_keep(&SHAPE_ANSWERS, by_shapes, items, n_items, hash, cost) < 0) {
            return NULL;
        }
        if (append_row(cost_row, computation, inst, cost, count, out) < 0) {
            return NULL;
        }
    }
    return PyLong_FromSsize_t(i);
}

/* attribute_key_of(inst, index, shapes, keyed, collective) -> tuple | None: the key shared_rows makes for inst
 * (for tests: ``structure.attribute_key`` is its specification). */
static PyObject *attribute_key_py(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *opcode, *key;
    int collective;
    (void)self;
    if (nargs != 5 || !PyDict_Check(args[1]) || !PyTuple_Check(args[2]) || !keyed_ok(args[3])) {
        PyErr_SetString(PyExc_TypeError, "attribute_key_of(inst, index: dict, shapes: tuple, keyed: tuple, collective)");
        return NULL;
    }
    if (init_names() < 0) {
        return NULL;
    }
    collective = PyObject_IsTrue(args[4]);
    if (collective < 0) {
        return NULL;
    }
    opcode = PyObject_GetAttr(args[0], STR_OPCODE);
    if (opcode == NULL) {
        return NULL;
    }
    key = attribute_key_of(opcode, args[0], args[1], args[2], args[3], collective);
    Py_DECREF(opcode);
    if (key == Py_None) {
        Py_INCREF(key);
    }
    return key;
}

/* ---- columns of CostRows ------------------------------------------------------------------------------
 * A CostRow is (computation, instruction, cost, count); an OpCost (flops, transcendentals, bytes_read,
 * bytes_written, comm_bytes, comm_kind, group_size, flags): both tuple subclasses, read by index. */

#define ROW_INSTRUCTION 1
#define ROW_COST 2
#define ROW_COUNT 3
#define COST_FIELDS 5 /* flops, transcendentals, bytes_read, bytes_written, comm_bytes */
#define COST_COMM_KIND 5
#define COST_GROUP_SIZE 6
#define COST_FLAGS 7

/* The row's cost (borrowed), or NULL with TypeError when the row or its cost is not a tuple of CostRow's or
 * OpCost's length. */
static PyObject *row_cost(PyObject *row) {
    PyObject *cost;
    if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 4) {
        PyErr_SetString(PyExc_TypeError, "expected CostRow tuples (computation, instruction, cost, count)");
        return NULL;
    }
    cost = PyTuple_GET_ITEM(row, ROW_COST);
    if (!PyTuple_Check(cost) || PyTuple_GET_SIZE(cost) != 8) {
        PyErr_SetString(PyExc_TypeError, "expected an OpCost tuple of 8 fields");
        return NULL;
    }
    return cost;
}

/* cost_totals(rows) -> (totals, known_totals, kinds, group, flags) or None
 *
 * What hloscope.cost.module.summed needs of rows in one pass: per field, the sequential sum from 0.0 of
 * float(value) * count (Python's and numpy's product alike: an int value is converted as PyLong_AsDouble
 * converts it), and the same sum with each NaN value counting 0.0; the set of comm kinds but ""; the largest
 * group size of the rows whose comm kind is true (the first largest, 0 without); the true flag sets, in order.
 * None when a count is not a float (the Python loop then sums). */
static PyObject *cost_totals(PyObject *self, PyObject *rows) {
    double sums[COST_FIELDS] = {0.0}, known[COST_FIELDS] = {0.0};
    PyObject *kinds = NULL, *flags = NULL, *group = NULL, *totals = NULL, *known_totals = NULL, *out = NULL;
    PyObject *empty = NULL;
    Py_ssize_t n, i;
    int f;
    (void)self;
    if (!PyList_Check(rows)) {
        PyErr_SetString(PyExc_TypeError, "cost_totals(rows: list[CostRow])");
        return NULL;
    }
    kinds = PySet_New(NULL);
    flags = PyList_New(0);
    group = PyLong_FromLong(0);
    empty = PyUnicode_FromString("");
    if (kinds == NULL || flags == NULL || group == NULL || empty == NULL) {
        goto done;
    }
    n = PyList_GET_SIZE(rows);
    for (i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *cost, *count, *kind, *set;
        double w;
        int truth;
        cost = row_cost(row);
        if (cost == NULL) {
            goto done;
        }
        count = PyTuple_GET_ITEM(row, ROW_COUNT);
        if (!PyFloat_CheckExact(count)) {
            Py_INCREF(Py_None);
            out = Py_None;
            goto done;
        }
        w = PyFloat_AS_DOUBLE(count);
        for (f = 0; f < COST_FIELDS; f++) {
            double v = as_double(PyTuple_GET_ITEM(cost, f));
            if (v == -1.0 && PyErr_Occurred()) {
                goto done;
            }
            sums[f] += v * w;
            known[f] += (v == v ? v : 0.0) * w;
        }
        kind = PyTuple_GET_ITEM(cost, COST_COMM_KIND);
        truth = PyObject_RichCompareBool(kind, empty, Py_NE); /* (the set of kinds, "" discarded) */
        if (truth < 0 || (truth && PySet_Add(kinds, kind) < 0)) {
            goto done;
        }
        truth = PyObject_IsTrue(kind); /* (the group sizes of the rows whose kind is true) */
        if (truth < 0) {
            goto done;
        }
        if (truth) {
            PyObject *size = PyTuple_GET_ITEM(cost, COST_GROUP_SIZE);
            int larger = PyObject_RichCompareBool(size, group, Py_GT);
            if (larger < 0) {
                goto done;
            }
            if (larger) {
                Py_INCREF(size);
                Py_SETREF(group, size);
            }
        }
        set = PyTuple_GET_ITEM(cost, COST_FLAGS);
        truth = PyObject_IsTrue(set);
        if (truth < 0 || (truth && PyList_Append(flags, set) < 0)) {
            goto done;
        }
    }
    totals = Py_BuildValue("(ddddd)", sums[0], sums[1], sums[2], sums[3], sums[4]);
    known_totals = Py_BuildValue("(ddddd)", known[0], known[1], known[2], known[3], known[4]);
    if (totals != NULL && known_totals != NULL) {
        out = PyTuple_Pack(5, totals, known_totals, kinds, group, flags);
    }
done:
    Py_XDECREF(empty);
    Py_XDECREF(kinds);
    Py_XDECREF(flags);
    Py_XDECREF(group);
    Py_XDECREF(totals);
    Py_XDECREF(known_totals);
    return out;
}

/* table_columns(rows, timings, keep_all) -> (rows, insts, costs, numbers, timings, fields)
 *
 * The rows the ops table keeps (hloscope.roofline.tables._module_columns) and their fields: every row with
 * keep_all, else a row whose cost has flags, or whose timing (timings: a list beside rows, or None) is not None,
 * or for which flops + transcendentals + bytes_read + bytes_written + comm_bytes != 0 (Python's arithmetic, left
 * to right). rows, insts and costs are lists; numbers is a bytes object of TABLE_NUMBERS columns of native
 * doubles, one after the other, each with one value per kept row: count, flops, transcendentals, bytes_read,
 * bytes_written, comm_bytes, work = flops + transcendentals and hbm = bytes_read + bytes_written (added as Python
 * adds them, then converted), each as float() converts it (PyFloat_AsDouble: an int by PyLong_AsDouble; one too
 * large raises OverflowError), and 1.0 where the cost has no flags, else 0.0. The kept timings (None without).
 * fields: lists, one value per kept row, of each row's computation, its instruction's name, opcode and shape, and
 * its cost's comm_kind and group_size. _table_columns in tables.py is the specification.
 *
 * A module's rows share a few thousand cost objects (the cost walk's memos): what a cost gives -- its doubles,
 * whether it has flags, whether its fields sum to non-zero -- is worked out once per cost object (a table keyed
 * by its address), all of it at once; a cost for which any of that raises is read again row by row, as each row
 * needs it, so that the same rows raise. */
#define TABLE_NUMBERS 9
#define ROW_FIELDS 6

typedef struct {
    PyObject *cost; /* (borrowed: the rows keep it alive) */
    int state;      /* 1: the values below; 2: read row by row */
    int flagged, nonzero;
    double values[7]; /* the five cost fields, work, hbm */
} CostEntry;

typedef struct {
    CostEntry *slots;
    size_t mask, used;
} CostMemo;

static size_t cost_hash(PyObject *cost) {
    size_t h = (size_t)cost;
    return (h >> 4) ^ (h >> 13);
}

/* The entry of cost (state 0 when new), or NULL with MemoryError. */
static CostEntry *cost_entry(CostMemo *memo, PyObject *cost) {
    size_t i;
    if (2 * (memo->used + 1) > memo->mask + 1) { /* (at most half full: grow) */
        size_t size = 2 * (memo->mask + 1), k;
        CostEntry *slots = PyMem_Calloc(size, sizeof(CostEntry));
        if (slots == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (k = 0; k <= memo->mask; k++) {
            if (memo->slots[k].cost != NULL) {
                size_t j = cost_hash(memo->slots[k].cost) & (size - 1);
                while (slots[j].cost != NULL) {
                    j = (j + 1) & (size - 1);
                }
                slots[j] = memo->slots[k];
            }
        }
        PyMem_Free(memo->slots);
        memo->slots = slots;
        memo->mask = size - 1;
    }
    for (i = cost_hash(cost) & memo->mask; memo->slots[i].cost != NULL; i = (i + 1) & memo->mask) {
        if (memo->slots[i].cost == cost) {
            return &memo->slots[i];
        }
    }
    memo->slots[i].cost = cost;
    memo->slots[i].state = 0;
    memo->used++;
    return &memo->slots[i];
}

/* Fill a new entry from its cost: state 1, or state 2 (the error cleared) when anything of it raises. 0, or -1
 * on an error that is not the cost's (memory). */
static int fill_entry(CostEntry *e, PyObject *cost, PyObject *zero) {
    PyObject *work = NULL, *sum = NULL, *hbm = NULL;
    int k, flagged, nonzero = -1;
    work = PyNumber_Add(PyTuple_GET_ITEM(cost, 0), PyTuple_GET_ITEM(cost, 1));
    flagged = work == NULL ? -1 : PyObject_IsTrue(PyTuple_GET_ITEM(cost, COST_FLAGS));
    if (flagged >= 0) {
        sum = work;
        Py_INCREF(sum);
        for (k = 2; k < COST_FIELDS && sum != NULL; k++) {
            PyObject *step = PyNumber_Add(sum, PyTuple_GET_ITEM(cost, k));
            Py_DECREF(sum);
            sum = step;
        }
        nonzero = sum == NULL ? -1 : PyObject_RichCompareBool(sum, zero, Py_NE);
    }
    if (nonzero >= 0) {
        hbm = PyNumber_Add(PyTuple_GET_ITEM(cost, 2), PyTuple_GET_ITEM(cost, 3));
    }
    e->state = 1;
    if (hbm == NULL) {
        e->state = 2;
    } else {
        for (k = 0; k < 7; k++) {
            PyObject *v = k < COST_FIELDS ? PyTuple_GET_ITEM(cost, k) : k == 5 ? work : hbm;
            e->values[k] = as_double(v);
            if (e->values[k] == -1.0 && PyErr_Occurred()) {
                e->state = 2;
                break;
            }
        }
    }
    e->flagged = flagged;
    e->nonzero = nonzero;
    Py_XDECREF(work);
    Py_XDECREF(sum);
    Py_XDECREF(hbm);
    if (e->state == 2) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            return -1;
        }
        PyErr_Clear(); /* (its rows read it again one by one, and raise where they must) */
    }
    return 0;
}

/* list[at] = v (a new reference to it), into a list made at its full size whose item at is still NULL. */
static inline void put(PyObject *list, Py_ssize_t at, PyObject *v) {
    Py_INCREF(v);
    PyList_SET_ITEM(list, at, v);
}

static PyObject *table_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *rows, *timings, *zero = NULL, *lists[4 + ROW_FIELDS] = {NULL}, *out = NULL, *numbers = NULL,
             *fields = NULL;
    double *columns = NULL;
    Py_ssize_t n, i, kept = 0;
    int keep_all, k;
    CostMemo memo = {NULL, 63, 0};
    (void)self;
    if (nargs != 3 || !PyList_Check(args[0]) || !(args[1] == Py_None || PyList_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError, "table_columns(rows: list[CostRow], timings: list | None, keep_all)");
        return NULL;
    }
    if (init_names() < 0) {
        return NULL;
    }
    rows = args[0];
    timings = args[1];
    keep_all = PyObject_IsTrue(args[2]);
    if (keep_all < 0) {
        return NULL;
    }
    n = PyList_GET_SIZE(rows);
    if (PyList_Check(timings) && PyList_GET_SIZE(timings) != n) {
        PyErr_SetString(PyExc_ValueError, "table_columns: timings and rows differ in length");
        return NULL;
    }
    zero = PyLong_FromLong(0);
    if (zero == NULL) {
        return NULL;
    }
    memo.slots = PyMem_Calloc(memo.mask + 1, sizeof(CostEntry));
    columns = PyMem_Malloc(sizeof(double) * TABLE_NUMBERS * (size_t)(n > 0 ? n : 1));
    if (columns == NULL || memo.slots == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (k = 0; k < 4 + ROW_FIELDS; k++) { /* (made at their most, n rows, and cut to the kept rows at the end) */
        if ((lists[k] = PyList_New(k == 3 && !PyList_Check(timings) ? 0 : n)) == NULL) {
            goto done;
        }
    }
    for (i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *cost, *work = NULL, *hbm = NULL, *sum, *values[8], *inst;
        static const int attrs[] = {SLOT_NAME, SLOT_OPCODE, SLOT_SHAPE};
        CostEntry *e;
        int keep, flagged;
        cost = row_cost(row);
        if (cost == NULL) {
            goto done;
        }
        e = cost_entry(&memo, cost);
        if (e == NULL || (e->state == 0 && fill_entry(e, cost, zero) < 0)) {
            goto done;
        }
        if (e->state == 1) {
            flagged = e->flagged;
            keep = keep_all || flagged || (PyList_Check(timings) && PyList_GET_ITEM(timings, i) != Py_None)
                   || e->nonzero;
            if (!keep) {
                continue;
            }
        } else { /* (read row by row, as a row needs it) */
            work = PyNumber_Add(PyTuple_GET_ITEM(cost, 0), PyTuple_GET_ITEM(cost, 1));
            if (work == NULL) {
                goto done;
            }
            flagged = PyObject_IsTrue(PyTuple_GET_ITEM(cost, COST_FLAGS));
            if (flagged < 0) {
                Py_DECREF(work);
                goto done;
            }
            keep = keep_all || flagged;
            if (keep == 0 && PyList_Check(timings)) {
                keep = PyList_GET_ITEM(timings, i) != Py_None;
            }
            if (keep == 0) { /* the sum left to right, as Python writes it: (((f + t) + r) + w) + c */
                PyObject *step;
                sum = work;
                Py_INCREF(sum);
                for (k = 2; k < COST_FIELDS && sum != NULL; k++) {
                    step = PyNumber_Add(sum, PyTuple_GET_ITEM(cost, k));
                    Py_DECREF(sum);
                    sum = step;
                }
                keep = sum == NULL ? -1 : PyObject_RichCompareBool(sum, zero, Py_NE);
                Py_XDECREF(sum);
            }
            if (keep <= 0) {
                Py_DECREF(work);
                if (keep < 0) {
                    goto done;
                }
                continue;
            }
            hbm = PyNumber_Add(PyTuple_GET_ITEM(cost, 2), PyTuple_GET_ITEM(cost, 3));
            if (hbm == NULL) {
                Py_DECREF(work);
                goto done;
            }
        }
        inst = PyTuple_GET_ITEM(row, ROW_INSTRUCTION);
        put(lists[0], kept, row);
        put(lists[1], kept, inst);
        put(lists[2], kept, cost);
        if (PyList_Check(timings)) {
            put(lists[3], kept, PyList_GET_ITEM(timings, i));
        }
        put(lists[4], kept, PyTuple_GET_ITEM(row, 0));
        put(lists[8], kept, PyTuple_GET_ITEM(cost, COST_COMM_KIND));
        put(lists[9], kept, PyTuple_GET_ITEM(cost, COST_GROUP_SIZE));
        for (k = 0; k < 3; k++) { /* the instruction's name, opcode, shape */
            PyObject *v = get_slot(inst, attrs[k]);
            if (v == NULL) {
                Py_XDECREF(work);
                Py_XDECREF(hbm);
                goto done;
            }
            PyList_SET_ITEM(lists[5 + k], kept, v);
        }
        if (e->state == 1) {
            double c = PyFloat_CheckExact(PyTuple_GET_ITEM(row, ROW_COUNT))
                           ? PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(row, ROW_COUNT))
                           : PyFloat_AsDouble(PyTuple_GET_ITEM(row, ROW_COUNT));
            if (c == -1.0 && PyErr_Occurred()) {
                goto done;
            }
            columns[kept] = c;
            for (k = 0; k < 7; k++) {
                columns[(Py_ssize_t)(k + 1) * n + kept] = e->values[k];
            }
        } else {
            values[0] = PyTuple_GET_ITEM(row, ROW_COUNT);
            for (k = 0; k < COST_FIELDS; k++) {
                values[1 + k] = PyTuple_GET_ITEM(cost, k);
            }
            values[6] = work;
            values[7] = hbm;
            for (k = 0; k < 8; k++) {
                double v = as_double(values[k]);
                if (v == -1.0 && PyErr_Occurred()) {
                    Py_DECREF(work);
                    Py_DECREF(hbm);
                    goto done;
                }
                columns[(Py_ssize_t)k * n + kept] = v;
            }
            Py_DECREF(work);
            Py_DECREF(hbm);
        }
        columns[(Py_ssize_t)8 * n + kept] = flagged ? 0.0 : 1.0;
        kept++;
    }
    for (k = 0; k < 4 + ROW_FIELDS; k++) {
        if (PyList_GET_SIZE(lists[k]) > kept && PyList_SetSlice(lists[k], kept, PyList_GET_SIZE(lists[k]), NULL) < 0) {
            goto done;
        }
    }
    numbers = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * TABLE_NUMBERS * kept);
    if (numbers == NULL) {
        goto done;
    }
    for (k = 0; k < TABLE_NUMBERS; k++) {
        memcpy(PyBytes_AS_STRING(numbers) + sizeof(double) * (size_t)(k * kept), columns + (Py_ssize_t)k * n,
               sizeof(double) * (size_t)kept);
    }
    if (!PyList_Check(timings)) {
        Py_INCREF(Py_None);
        Py_SETREF(lists[3], Py_None);
    }
    fields = PyTuple_New(ROW_FIELDS);
    if (fields == NULL) {
        goto done;
    }
    for (k = 0; k < ROW_FIELDS; k++) {
        Py_INCREF(lists[4 + k]);
        PyTuple_SET_ITEM(fields, k, lists[4 + k]);
    }
    out = Py_BuildValue("(OOOOOO)", lists[0], lists[1], lists[2], numbers, lists[3], fields);
done:
    Py_DECREF(zero);
    PyMem_Free(columns);
    PyMem_Free(memo.slots);
    Py_XDECREF(numbers);
    Py_XDECREF(fields);
    for (k = 0; k < 4 + ROW_FIELDS; k++) {
        Py_XDECREF(lists[k]);
    }
    return out;
}

/* ---- structure_fields ----------------------------------------------------------------------------------
 * structure_fields(insts, index, bare, without_metadata) -> (fields, calls) | None
 *
 * hloscope.cost.structure.py_structure_fields in one pass (that function's docstring is the specification;
 * tests/cost/test_structure.py holds the two equal): per instruction, in order, appended to the list fields:
 * its opcode, id(shape), the number of its operands, each operand's position (index[name]), its attribute
 * text without metadata (bare[text], else without_metadata(text), kept in bare), its literal and its
 * parameter number; and for each instruction with called computations, (its index, the position of its text
 * in fields) in the list calls. None where an operand is not in index or a text's bare form is None. */

/* Append inst.<SLOT_NAMES[which]> to fields (0, or -1 on error). */
static int append_attr(PyObject *fields, PyObject *inst, int which) {
    PyObject *value = get_slot(inst, which);
    int r;
    if (value == NULL) {
        return -1;
    }
    r = PyList_Append(fields, value);
    Py_DECREF(value);
    return r;
}

static PyObject *structure_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *insts, *index, *bare, *strip, *fields = NULL, *calls = NULL, *out = NULL;
    Py_ssize_t n, i;
    (void)self;
    if (nargs != 4 || !(PyList_Check(args[0]) || PyTuple_Check(args[0])) || !PyDict_Check(args[1])
        || !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "structure_fields(insts, index: dict, bare: dict, without_metadata)");
        return NULL;
    }
    if (init_names() < 0) {
        return NULL;
    }
    insts = args[0];
    index = args[1];
    bare = args[2];
    strip = args[3];
    n = PySequence_Fast_GET_SIZE(insts);
    fields = PyList_New(0);
    calls = PyList_New(0);
    if (fields == NULL || calls == NULL) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        PyObject *inst = PySequence_Fast_GET_ITEM(insts, i), *shape, *operands, *text, *b, *called, *item;
        Py_ssize_t k, m;
        int has_calls;
        if (append_attr(fields, inst, SLOT_OPCODE) < 0) {
            goto done;
        }
        shape = get_slot(inst, SLOT_SHAPE);
        if (shape == NULL) {
            goto done;
        }
        item = id_of(shape); /* id(shape) (the instruction keeps it alive) */
        Py_DECREF(shape);
        if (item == NULL || PyList_Append(fields, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
        operands = get_slot(inst, SLOT_OPERANDS);
        if (operands == NULL) {
            goto done;
        }
        if (!PyTuple_Check(operands)) {
            Py_DECREF(operands);
            PyErr_SetString(PyExc_TypeError, "expected a tuple of operand names");
            goto done;
        }
        m = PyTuple_GET_SIZE(operands);
        item = PyLong_FromSsize_t(m);
        if (item == NULL || PyList_Append(fields, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(operands);
            goto done;
        }
        Py_DECREF(item);
        for (k = 0; k < m; k++) {
            PyObject *at = PyDict_GetItemWithError(index, PyTuple_GET_ITEM(operands, k));
            if (at == NULL) {
                Py_DECREF(operands);
                if (PyErr_Occurred()) {
                    goto done;
                }
                Py_INCREF(Py_None);
                out = Py_None; /* an operand not in the body */
                goto done;
            }
            if (PyList_Append(fields, at) < 0) {
                Py_DECREF(operands);
                goto done;
            }
        }
        Py_DECREF(operands);
        text = get_slot(inst, SLOT_TEXT);
        if (text == NULL) {
            goto done;
        }
        b = PyDict_GetItemWithError(bare, text);
        if (b != NULL) {
            Py_INCREF(b);
        } else if (PyErr_Occurred()) {
            Py_DECREF(text);
            goto done;
        } else {
            b = PyObject_CallOneArg(strip, text);
            if (b == NULL || PyDict_SetItem(bare, text, b) < 0) {
                Py_XDECREF(b);
                Py_DECREF(text);
                goto done;
            }
        }
        Py_DECREF(text);
        if (b == Py_None) {
            Py_DECREF(b);
            Py_INCREF(Py_None);
            out = Py_None; /* a text the key cannot be sure of */
            goto done;
        }
        called = get_slot(inst, SLOT_CALLS);
        if (called == NULL) {
            Py_DECREF(b);
            goto done;
        }
        has_calls = PyObject_IsTrue(called);
        Py_DECREF(called);
        if (has_calls < 0) {
            Py_DECREF(b);
            goto done;
        }
        if (has_calls) {
            item = Py_BuildValue("(nn)", i, PyList_GET_SIZE(fields));
            if (item == NULL || PyList_Append(calls, item) < 0) {
                Py_XDECREF(item);
                Py_DECREF(b);
                goto done;
            }
            Py_DECREF(item);
        }
        k = PyList_Append(fields, b);
        Py_DECREF(b);
        if (k < 0 || append_attr(fields, inst, SLOT_LITERAL) < 0 || append_attr(fields, inst, SLOT_PARAMETER) < 0) {
            goto done;
        }
    }
    out = PyTuple_Pack(2, fields, calls);
done:
    Py_XDECREF(fields);
    Py_XDECREF(calls);
    return out;
}

/* ---- structure_key -------------------------------------------------------------------------------------
 * structure_key(insts, index, bare, without_metadata, key_of, ids, root_index) -> int | None
 *
 * hloscope.cost.structure.py_structure_key in one call (that function's docstring is the specification;
 * tests/cost/test_structure.py holds the keys of the two equal on every fixture and corpus computation): the
 * fields of structure_fields, each called computation's name masked in its caller's bare text (None when a
 * name is found there more often than it is called), each callee's key by key_of(name) (StructureKeys.key: None
 * gives None), then the id of (tuple(fields), tuple(callees), root_index) in ids, a new one (len(ids)) when it is
 * not there yet. */

/* How many times name is in the tuple names (by equality). -1 on error. */
static Py_ssize_t count_in(PyObject *names, PyObject *name) {
    Py_ssize_t k, n = PyTuple_GET_SIZE(names), found = 0;
    for (k = 0; k < n; k++) {
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(names, k), name, Py_EQ);
        if (eq < 0) {
            return -1;
        }
        found += eq;
    }
    return found;
}

/* The callee part of the key of instruction inst, whose bare text is fields[at]: fields[at] masked in place and
 * (role, (key, ...)) for each role of its called computations as a new tuple; Py_None (new reference) where the
 * key cannot be sure; NULL on error. */
static PyObject *callee_keys(PyObject *inst, PyObject *fields, Py_ssize_t at, PyObject *key_of) {
    PyObject *calls = get_slot(inst, SLOT_CALLS), *called = NULL, *text, *keys = NULL, *role, *names, *out = NULL;
    Py_ssize_t pos = 0, k, n, r = 0;
    if (calls == NULL) {
        return NULL;
    }
    if (!PyDict_CheckExact(calls)) { /* (any other mapping read as the dict of its items, in its order) */
        Py_SETREF(calls, PyObject_CallOneArg((PyObject *)&PyDict_Type, calls));
        if (calls == NULL) {
            return NULL;
        }
    }
    /* Every called name, in order (called.count(name) is then counted here). */
    called = PyList_New(0);
    while (called != NULL && PyDict_Next(calls, &pos, &role, &names)) {
        PyObject *seq = PySequence_Fast(names, "expected a sequence of called computation names");
        if (seq == NULL) {
            goto done;
        }
        for (k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) {
            if (PyList_Append(called, PySequence_Fast_GET_ITEM(seq, k)) < 0) {
                Py_DECREF(seq);
                goto done;
            }
        }
        Py_DECREF(seq);
    }
    if (called == NULL) {
        goto done;
    }
    Py_SETREF(called, PyList_AsTuple(called));
    if (called == NULL) {
        goto done;
    }
    text = PyList_GET_ITEM(fields, at);
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "expected an attribute text");
        goto done;
    }
    n = PyTuple_GET_SIZE(called);
    for (k = 0; k < n; k++) { /* (all counted in the text as it came, before any is masked) */
        PyObject *name = PyTuple_GET_ITEM(called, k);
        Py_ssize_t in_text = PyUnicode_Count(text, name, 0, PY_SSIZE_T_MAX), in_calls;
        if (in_text < 0 || (in_calls = count_in(called, name)) < 0) {
            goto done;
        }
        if (in_text != in_calls) {
            Py_INCREF(Py_None);
            out = Py_None;
            goto done;
        }
    }
    Py_INCREF(text);
    for (k = 0; k < n; k++) { /* (a name met again was masked already: replacing it again finds nothing) */
        PyObject *masked = PyUnicode_Replace(text, PyTuple_GET_ITEM(called, k), STR_MASK, -1);
        Py_DECREF(text);
        if (masked == NULL) {
            goto done;
        }
        text = masked;
    }
    if (PyList_SetItem(fields, at, text) < 0) { /* (steals text) */
        goto done;
    }
    keys = PyTuple_New(PyDict_GET_SIZE(calls));
    pos = 0;
    while (keys != NULL && PyDict_Next(calls, &pos, &role, &names)) {
        PyObject *seq = PySequence_Fast(names, "expected a sequence of called computation names"), *found, *pair;
        int unsure = 0;
        if (seq == NULL) {
            goto done;
        }
        found = PyTuple_New(PySequence_Fast_GET_SIZE(seq));
        if (found == NULL) {
            Py_DECREF(seq);
            goto done;
        }
        for (k = 0; k < PySequence_Fast_GET_SIZE(seq); k++) { /* (all of a role's keys made, as Python does) */
            PyObject *key = PyObject_CallOneArg(key_of, PySequence_Fast_GET_ITEM(seq, k));
            if (key == NULL) {
                Py_DECREF(found);
                Py_DECREF(seq);
                goto done;
            }
            PyTuple_SET_ITEM(found, k, key);
            unsure |= key == Py_None;
        }
        Py_DECREF(seq);
        if (unsure) {
            Py_DECREF(found);
            Py_INCREF(Py_None);
            out = Py_None;
            goto done;
        }
        pair = PyTuple_Pack(2, role, found);
        Py_DECREF(found);
        if (pair == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(keys, r++, pair);
    }
    if (keys != NULL) {
        out = keys;
        keys = NULL;
    }
done:
    Py_XDECREF(keys);
    Py_XDECREF(called);
    Py_DECREF(calls);
    return out;
}

static PyObject *structure_key(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *read, *fields, *calling, *callees = NULL, *key = NULL, *found = NULL, *ids;
    Py_ssize_t n, k;
    if (nargs != 7 || !PyDict_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "structure_key(insts, index: dict, bare: dict, without_metadata, key_of, "
                                         "ids: dict, root_index)");
        return NULL;
    }
    ids = args[5];
    read = structure_fields(self, args, 4);
    if (read == NULL || read == Py_None) {
        return read;
    }
    fields = PyTuple_GET_ITEM(read, 0);
    calling = PyTuple_GET_ITEM(read, 1);
    n = PyList_GET_SIZE(calling);
    callees = PyTuple_New(n);
    if (callees == NULL) {
        goto done;
    }
    for (k = 0; k < n; k++) {
        PyObject *pair = PyList_GET_ITEM(calling, k), *keys, *item;
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 0)), at = PyLong_AsSsize_t(PyTuple_GET_ITEM(pair, 1));
        if ((i == -1 || at == -1) && PyErr_Occurred()) {
            goto done;
        }
        keys = callee_keys(PySequence_Fast_GET_ITEM(args[0], i), fields, at, args[4]);
        if (keys == NULL || keys == Py_None) {
            found = keys;
            goto done;
        }
        item = PyTuple_Pack(2, PyTuple_GET_ITEM(pair, 0), keys);
        Py_DECREF(keys);
        if (item == NULL) {
            goto done;
        }
        PyTuple_SET_ITEM(callees, k, item);
    }
    {
        PyObject *body = PyList_AsTuple(fields);
        if (body == NULL) {
            goto done;
        }
        key = PyTuple_Pack(3, body, callees, args[6]);
        Py_DECREF(body);
    }
    if (key == NULL) {
        goto done;
    }
    found = PyDict_GetItemWithError(ids, key);
    if (found != NULL) {
        Py_INCREF(found);
    } else if (!PyErr_Occurred()) {
        found = PyLong_FromSsize_t(PyDict_GET_SIZE(ids));
        if (found != NULL && PyDict_SetItem(ids, key, found) < 0) {
            Py_CLEAR(found);
        }
    }
done:
    Py_XDECREF(key);
    Py_XDECREF(callees);
    Py_DECREF(read);
    return found;
}

/* identity_codes(values: list) -> (codes: bytearray, distinct: list)
 *
 * Each value's number among the distinct objects of ``values`` (by identity, first seen first), as native
 * Py_ssize_t in a bytearray (numpy reads it as an intp array), and those objects: what
 * hloscope.roofline.tables.py_identity_codes makes with a dict keyed by id(). The ops table codes its columns of
 * few distinct objects with it (opcodes, comm kinds, result shapes, metadata): an open-addressing table of
 * addresses, without hashing the objects (a module's opcodes are a few dozen interned strings). */
static PyObject *identity_codes(PyObject *self, PyObject *values) {
    Py_ssize_t n, i, size = 256, used = 0;
    PyObject **keys = NULL, *codes = NULL, *distinct = NULL, *result = NULL;
    Py_ssize_t *numbers = NULL, *out;
    (void)self;
    if (!PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "identity_codes(values: list)");
        return NULL;
    }
    n = PyList_GET_SIZE(values);
    codes = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(Py_ssize_t) * n);
    distinct = PyList_New(0);
    keys = PyMem_Calloc((size_t)size, sizeof(PyObject *));
    numbers = PyMem_Calloc((size_t)size, sizeof(Py_ssize_t));
    if (codes == NULL || distinct == NULL || keys == NULL || numbers == NULL) {
        if (keys == NULL || numbers == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    out = (Py_ssize_t *)PyByteArray_AS_STRING(codes);
    for (i = 0; i < n; i++) {
        PyObject *v = PyList_GET_ITEM(values, i);
        size_t h = (size_t)((uintptr_t)v >> 4) * (size_t)0x9E3779B97F4A7C15ULL, mask = (size_t)size - 1, at;
        for (at = (h >> 17) & mask; keys[at] != NULL && keys[at] != v; at = (at + 1) & mask) {
        }
        if (keys[at] == NULL) {
            if (PyList_Append(distinct, v) < 0) {
                goto done;
            }
            keys[at] = v;
            numbers[at] = used++;
            if (used * 2 > size) { /* grow: rehash the addresses into a table twice as large */
                Py_ssize_t j, bigger = size * 2;
                PyObject **k2 = PyMem_Calloc((size_t)bigger, sizeof(PyObject *));
                Py_ssize_t *n2 = PyMem_Calloc((size_t)bigger, sizeof(Py_ssize_t));
                if (k2 == NULL || n2 == NULL) {
                    PyMem_Free(k2);
                    PyMem_Free(n2);
                    PyErr_NoMemory();
                    goto done;
                }
                for (j = 0; j < size; j++) {
                    if (keys[j] != NULL) {
                        size_t h2 = (size_t)((uintptr_t)keys[j] >> 4) * (size_t)0x9E3779B97F4A7C15ULL,
                               m2 = (size_t)bigger - 1, a2;
                        for (a2 = (h2 >> 17) & m2; k2[a2] != NULL; a2 = (a2 + 1) & m2) {
                        }
                        k2[a2] = keys[j];
                        n2[a2] = numbers[j];
                    }
                }
                PyMem_Free(keys);
                PyMem_Free(numbers);
                keys = k2;
                numbers = n2;
                size = bigger;
            }
            out[i] = used - 1;
        } else {
            out[i] = numbers[at];
        }
    }
    result = PyTuple_Pack(2, codes, distinct);
done:
    PyMem_Free(keys);
    PyMem_Free(numbers);
    Py_XDECREF(codes);
    Py_XDECREF(distinct);
    return result;
}

/* exact_sum(values) -> float | None: the correctly rounded sum of a 1-D float64 buffer (a numpy array), as
 * ``math.fsum`` gives it for the same values in the same order; None where that function raises or sees a value
 * that is not finite (an infinity, a NaN, an overflow on the way), and for a buffer that is not 1-D native doubles:
 * the caller then sums the values' list as before. The modules table sums each column by bound class and dtype
 * exactly; the list of 15,000-30,000 floats made for ``math.fsum`` per sum was ~80% of the table's time.
 *
 * The method is ``math.fsum``'s (CPython's Modules/mathmodule.c; J. R. Shewchuk, "Adaptive Precision
 * Floating-Point Arithmetic and Fast Robust Geometric Predicates", 1997): the running sum is kept exactly as
 * partials of increasing magnitude that do not overlap (each addition split into its rounded sum and its error by
 * Knuth's two-sum, the larger operand first), then added from the top down while they add exactly, the last
 * rounding made half-even across the partials below it. Written for a buffer of doubles: no float object a value. */
static PyObject *exact_sum(PyObject *self, PyObject *values) {
    Py_buffer view;
    double fixed[32], *partials = fixed, hi = 0.0, lo = 0.0;
    Py_ssize_t used = 0, room = 32, i, j, k, n;
    int inexact = 0;
    const double *x;
    PyObject *result = NULL;
    (void)self;
    if (PyObject_GetBuffer(values, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    if (view.ndim != 1 || view.itemsize != sizeof(double) || view.format == NULL || strcmp(view.format, "d") != 0) {
        goto special; /* (not native doubles -- float32, another byte order: the list's sum) */
    }
    x = (const double *)view.buf;
    n = view.shape != NULL ? view.shape[0] : view.len / (Py_ssize_t)sizeof(double);
    for (i = 0; i < n; i++) {
        double v = x[i];
        if (!isfinite(v)) {
            goto special;
        }
        for (j = k = 0; j < used; j++) { /* add v to the partials, keeping each error term that is not zero */
            double y = partials[j], big = v, small = y, sum, err;
            if (fabs(v) < fabs(y)) {
                big = y;
                small = v;
            }
            sum = big + small;
            err = small - (sum - big);
            if (err != 0.0) {
                partials[k++] = err;
            }
            v = sum;
        }
        used = k;
        if (v != 0.0) {
            if (!isfinite(v)) {
                goto special; /* (an overflow on the way) */
            }
            if (used == room) {
                double *grown = PyMem_Malloc(sizeof(double) * (size_t)(2 * room));
                if (grown == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
                memcpy(grown, partials, sizeof(double) * (size_t)used);
                if (partials != fixed) {
                    PyMem_Free(partials);
                }
                partials = grown;
                room *= 2;
            }
            partials[used++] = v;
        }
    }
    if (used > 0) { /* from the largest partial down, while the additions are exact */
        hi = partials[--used];
        while (used > 0) {
            double top = hi, y = partials[--used];
            hi = top + y;
            lo = y - (hi - top);
            if (lo != 0.0) {
                inexact = 1;
                break;
            }
        }
        /* half-even across the partials left: a tie rounded down whose remainder has the sign of the error */
        if (inexact && used > 0 && ((lo < 0.0 && partials[used - 1] < 0.0) || (lo > 0.0 && partials[used - 1] > 0.0))) {
            double twice = lo * 2.0, up = hi + twice;
            if (twice == up - hi) {
                hi = up;
            }
        }
    }
    result = PyFloat_FromDouble(hi);
    goto done;
special:
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&view);
    if (partials != fixed) {
        PyMem_Free(partials);
    }
    return result;
}

static PyMethodDef methods[] = {
    {"shared_rows", (PyCFunction)(void (*)(void))shared_rows, METH_FASTCALL,
     "shared_rows(insts, start, computation, count, index, shapes, by_shapes, ruled, cost_row, out, keyed) -> int\n\n"
     "The rows of hloscope.cost.module._Analyzer.visit for instructions whose shared cost is known, from\n"
     "insts[start] on (appended to out); the index of the first instruction left to visit."},
    {"attribute_key_of", (PyCFunction)(void (*)(void))attribute_key_py, METH_FASTCALL,
     "attribute_key_of(inst, index, shapes, keyed, collective) -> tuple | None\n\n"
     "The key shared_rows makes for inst (hloscope.cost.structure.attribute_key is its specification)."},
    {"cost_totals", (PyCFunction)cost_totals, METH_O,
     "cost_totals(rows) -> (totals, known_totals, kinds, group, flags) | None\n\n"
     "What hloscope.cost.module.summed needs of a list of CostRows, in one pass (None: a count not a float)."},
    {"table_columns", (PyCFunction)(void (*)(void))table_columns, METH_FASTCALL,
     "table_columns(rows, timings, keep_all) -> (rows, insts, costs, numbers, timings, fields)\n\n"
     "The CostRows the ops table keeps, their numbers as columns of doubles (bytes), and their fields."},
    {"exact_sum", (PyCFunction)exact_sum, METH_O,
     "exact_sum(values) -> float | None\n\n"
     "math.fsum of a 1-D float64 buffer, without a float object a value; None where math.fsum would raise or\n"
     "meets a value that is not finite, and for a buffer of anything but native float64."},
    {"identity_codes", (PyCFunction)identity_codes, METH_O,
     "identity_codes(values: list) -> (codes: bytearray, distinct: list)\n\n"
     "Each value's number among the distinct objects of values, by identity (hloscope.roofline.tables."
     "py_identity_codes is its specification)."},
    {"structure_fields", (PyCFunction)(void (*)(void))structure_fields, METH_FASTCALL,
     "structure_fields(insts, index, bare, without_metadata) -> (fields, calls) | None\n\n"
     "What hloscope.cost.structure keys a computation by, instruction by instruction, in one list."},
    {"structure_key", (PyCFunction)(void (*)(void))structure_key, METH_FASTCALL,
     "structure_key(insts, index, bare, without_metadata, key_of, ids, root_index) -> int | None\n\n"
     "The structure id of a computation (hloscope.cost.structure.py_structure_key is its specification)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cost_walk",
    "The shared-cost rows of hloscope.cost.module._Analyzer.visit and the columns of CostRows, made in C.", -1,
    methods,
    NULL, NULL, NULL, NULL,
};

/* ABI: the interface version (hloscope._compiled.ABI): 2 since shared_rows takes its keyed tuple and table_columns
 * gives the rows' fields; 3 since keyed holds work_by_columns' three items; 4 since it holds the call rows memo. */
PyMODINIT_FUNC PyInit__cost_walk(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 4) < 0) {
        Py_CLEAR(m);
    }
    return m;
}
