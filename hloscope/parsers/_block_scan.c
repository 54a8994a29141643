/* The compiled form of hloscope.parsers._block_rows.py_block_rows: a computation body, one instruction per line
 * as XLA prints it, read in one pass.
 *
 * ``block_rows(src, pos)`` returns exactly what the pure-Python ``py_block_rows`` returns (that function's
 * docstring is the specification; tests/parsers/test_block_rows.py holds the two equal on every fixture, on the
 * corpus and on mutated lines): ``(stop, rows)``, where ``stop`` is the position of the first line from ``pos``
 * that starts with '}' and ``rows`` holds one 7-tuple of ``str`` per line before it -- root marker, name
 * sigil, name, shape, opcode, operands, attributes, as ``BLOCK_LINE.findall`` gives them -- or None when there
 * is no such line, no line before it, an odd number of '"' before it, a line that ``BLOCK_LINE`` does not
 * match, or a ' = ' after a line's ``name = `` that is not attribute text (``second_equals``).
 *
 * One pass over the text; a line is matched without backtracking, because ``BLOCK_LINE`` has at most one way to
 * match a line (its parts are separated by characters they cannot hold), except that "ROOT " may also begin a
 * name: tried first as the marker, then as the name, as the regex does.
 *
 * ``build_rows`` (below) builds the instructions of those rows that ``_hlo_bodies.BodyReader._rows`` would build
 * in its common case, the same way; tests/parsers/test_block_rows.py holds the two equal. ``read_computations``
 * (below) reads whole computations with both, one after the other, as ``_hlo_text._Parser`` would.
 *
 * Built as an optional extension (setup.py): when it is missing, hloscope uses the Python functions. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#if defined(__GNUC__)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE static inline
#endif

#define N_GROUPS 7

typedef struct {
    Py_ssize_t start[N_GROUPS];
    Py_ssize_t end[N_GROUPS];
} Spans;

#define CH(i) PyUnicode_READ(kind, data, (i))

ALWAYS_INLINE int is_lower(Py_UCS4 c) { return c >= 'a' && c <= 'z'; }

ALWAYS_INLINE int is_opcode_char(Py_UCS4 c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* The last character of attributes that leaves a value open (BLOCK_LINE's final class, negated). */
ALWAYS_INLINE int leaves_open(Py_UCS4 c) {
    switch (c) {
    case '\n': case ',': case '=': case '{': case '[': case '(': case ':': case ' ': case '\t': case '\r':
        return 1;
    default:
        return 0;
    }
}

/* Match groups 1-6 of BLOCK_LINE on the line [j, e) (src[e] == '\n'), from the name's sigil on. */
ALWAYS_INLINE int match_from(int kind, const void *data, Py_ssize_t j, Py_ssize_t e, Spans *g) {
    Py_ssize_t start;
    Py_UCS4 c;
    /* (%?) */
    g->start[1] = j;
    if (j < e && CH(j) == '%') {
        j++;
    }
    g->end[1] = j;
    /* ([^\s=%]+) */
    start = j;
    while (j < e) {
        c = CH(j);
        if (c == '=' || c == '%' || Py_UNICODE_ISSPACE(c)) {
            break;
        }
        j++;
    }
    if (j == start) {
        return 0;
    }
    g->start[2] = start;
    g->end[2] = j;
    /* " = " */
    if (e - j < 3 || CH(j) != ' ' || CH(j + 1) != '=' || CH(j + 2) != ' ') {
        return 0;
    }
    j += 3;
    /* ([a-z][^ \n]* | a tuple: parentheses nested at most 4 deep, no '\n') */
    start = j;
    if (j >= e) {
        return 0;
    }
    c = CH(j);
    if (is_lower(c)) {
        j++;
        while (j < e && CH(j) != ' ') {
            j++;
        }
    } else if (c == '(') {
        int depth = 0;
        for (;;) {
            if (j >= e) {
                return 0;
            }
            c = CH(j);
            j++;
            if (c == '(') {
                if (++depth > 4) {
                    return 0;
                }
            } else if (c == ')') {
                if (--depth == 0) {
                    break;
                }
            }
        }
    } else {
        return 0;
    }
    g->start[3] = start;
    g->end[3] = j;
    /* " " */
    if (j >= e || CH(j) != ' ') {
        return 0;
    }
    j++;
    /* ([a-z][a-z0-9\-_]*) */
    start = j;
    if (j >= e || !is_lower(CH(j))) {
        return 0;
    }
    j++;
    while (j < e && is_opcode_char(CH(j))) {
        j++;
    }
    g->start[4] = start;
    g->end[4] = j;
    /* \(((?:[^()\n]|a tuple opening the list or after its ", ": parentheses nested at most 4 deep)*)\) */
    if (j >= e || CH(j) != '(') {
        return 0;
    }
    j++;
    start = j;
    {
        int depth = 0;
        while (j < e) {
            c = CH(j);
            if (c == '(') {
                if (depth == 0 && j != start && (j - start < 2 || CH(j - 1) != ' ' || CH(j - 2) != ',')) {
                    return 0; /* an operand written as an instruction in place: `add(f32[] constant(1), ...)` */
                }
                if (++depth > 4) {
                    return 0;
                }
            } else if (c == ')') {
                if (depth == 0) {
                    break;
                }
                depth--;
            }
            j++;
        }
    }
    if (j >= e) {
        return 0;
    }
    g->start[5] = start;
    g->end[5] = j;
    j++;
    /* (,[^\n]*[^\n,={\[(: \t\r]|) then \n */
    if (j == e) {
        g->start[6] = g->end[6] = e;
        return 1;
    }
    if (CH(j) != ',' || e - j < 2 || leaves_open(CH(e - 1))) {
        return 0;
    }
    g->start[6] = j;
    g->end[6] = e;
    return 1;
}

/* The end of the line that starts at `a` (the index of its '\n', or -1 when there is none before `stop`); adds the
 * line's '"' to *quotes. Text of one byte a character (ASCII, Latin-1: what XLA prints) is searched with memchr. */
ALWAYS_INLINE Py_ssize_t line_end(int kind, const void *data, Py_ssize_t a, Py_ssize_t stop, Py_ssize_t *quotes) {
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        const Py_UCS1 *nl = memchr(d + a, '\n', (size_t)(stop - a));
        const Py_UCS1 *q = d + a;
        if (nl == NULL) {
            return -1;
        }
        while ((q = memchr(q, '"', (size_t)(nl - q))) != NULL) {
            ++*quotes;
            q++;
        }
        return nl - d;
    } else {
        Py_ssize_t e = a;
        Py_UCS4 c;
        while (e < stop && (c = CH(e)) != '\n') {
            if (c == '"') {
                ++*quotes;
            }
            e++;
        }
        return e < stop ? e : -1;
    }
}

/* Whether " = " occurs in [i, e). */
ALWAYS_INLINE int has_equals(int kind, const void *data, Py_ssize_t i, Py_ssize_t e) {
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        const Py_UCS1 *eq = d + i + 1;
        const Py_UCS1 *last = d + e - 1; /* an '=' at i+1 .. e-2 may sit between two blanks */
        while (eq < last && (eq = memchr(eq, '=', (size_t)(last - eq))) != NULL) {
            if (eq[-1] == ' ' && eq[1] == ' ') {
                return 1;
            }
            eq++;
        }
        return 0;
    } else {
        for (; i + 2 < e; i++) {
            if (CH(i + 1) == '=' && CH(i) == ' ' && CH(i + 2) == ' ') {
                return 1;
            }
        }
        return 0;
    }
}

/* ``second_equals`` of _block_rows.py on [i, e): whether a " = " there lies outside every '"'-delimited string
 * ('\\' escaping the next character inside one) and every ``backend_config={...}`` dictionary, or inside a string
 * or such a dictionary the line leaves open. Only asked when has_equals found one. */
static const char DICT_KEY[] = "backend_config=";
#define DICT_KEY_LENGTH ((Py_ssize_t)(sizeof(DICT_KEY) - 1))

static int follows_dict_key(int kind, const void *data, Py_ssize_t i, Py_ssize_t k) {
    Py_ssize_t j;
    if (k - i < DICT_KEY_LENGTH) {
        return 0;
    }
    for (j = 0; j < DICT_KEY_LENGTH; j++) {
        if (CH(k - DICT_KEY_LENGTH + j) != (Py_UCS4)(unsigned char)DICT_KEY[j]) {
            return 0;
        }
    }
    return 1;
}

static int second_equals(int kind, const void *data, Py_ssize_t i, Py_ssize_t e) {
    int in_string = 0, string_equals = 0, dict_equals = 0;
    Py_ssize_t depth = 0, k;
    for (k = i; k < e; k++) {
        Py_UCS4 c = CH(k);
        if (in_string) {
            if (c == '\\') {
                k++;
            } else if (c == '"') {
                in_string = string_equals = 0;
            } else if (c == '=' && CH(k - 1) == ' ' && k + 1 < e && CH(k + 1) == ' ') {
                string_equals = 1;
            }
        } else if (c == '"') {
            in_string = 1;
        } else if (depth) {
            if (c == '{') {
                depth++;
            } else if (c == '}') {
                if (--depth == 0) {
                    dict_equals = 0;
                }
            } else if (c == '=' && CH(k - 1) == ' ' && k + 1 < e && CH(k + 1) == ' ') {
                dict_equals = 1;
            }
        } else if (c == '{' && follows_dict_key(kind, data, i, k)) {
            depth = 1;
        } else if (c == '=' && k > i && CH(k - 1) == ' ' && k + 1 < e && CH(k + 1) == ' ') {
            return 1;
        }
    }
    return string_equals || dict_equals;
}

/* A hash of the characters [p, p + n), eight at a time (a multiply and shift a word, then one byte at a time for
 * the rest, and a final mix so that the low bits, which pick the slot, depend on every character). */
ALWAYS_INLINE size_t span_hash(const Py_UCS1 *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n, w;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    for (; n > 0; p++, n--) {
        h = (h ^ *p) * 0x100000001B3ULL;
    }
    h = (h ^ (h >> 33)) * 0xC4CEB9FE1A85EC53ULL;
    return (size_t)(h ^ (h >> 29));
}

/* ---- One string object per distinct shape text and opcode of a read ------------------------------------------
 *
 * read_computations makes the shape text and the opcode of a row (groups 3 and 4) through a table of the strings
 * it made for them before, found by their characters: a module prints a few hundred distinct shapes and opcodes
 * over tens of thousands of rows, so most rows make no string for them, and the dict and set lookups that follow
 * (the parse's shapes, the known opcodes, the cost walk's and the tables' memos) meet strings whose hash is
 * known. Equal strings either way: only their identity differs. The table lives for one read_computations call. */

typedef struct {
    size_t mask;      /* slots - 1 (slots: a power of two, at least twice the strings; 0 with no slots yet) */
    size_t used;
    PyObject **slots; /* the strings (strong references), NULL where empty */
    size_t *hashes;   /* span_hash of each slot's string */
} StringTable;

static void string_table_free(StringTable *t) {
    size_t i;
    if (t->slots != NULL) {
        for (i = 0; i <= t->mask; i++) {
            Py_XDECREF(t->slots[i]);
        }
    }
    PyMem_Free(t->slots);
    PyMem_Free(t->hashes);
    t->slots = NULL;
    t->hashes = NULL;
    t->mask = t->used = 0;
}

/* The slot of the characters [p, p + len) (hash h) in t (slots allocated): the one holding a string of them, else
 * the empty one where it would go. */
static size_t string_slot(const StringTable *t, size_t h, const Py_UCS1 *p, Py_ssize_t len) {
    size_t at = h & t->mask;
    for (; t->slots[at] != NULL; at = (at + 1) & t->mask) {
        PyObject *s = t->slots[at];
        if (t->hashes[at] == h && PyUnicode_GET_LENGTH(s) == len
            && memcmp(PyUnicode_1BYTE_DATA(s), p, (size_t)len) == 0) {
            break;
        }
    }
    return at;
}

/* Room for one more string: 0, or -1 with MemoryError (the table is left as it was). */
static int string_table_room(StringTable *t) {
    StringTable old = *t;
    size_t slots = t->slots == NULL ? 256 : (t->mask + 1) * 2, i, at;
    if (t->slots != NULL && (t->used + 1) * 2 <= t->mask + 1) {
        return 0;
    }
    t->slots = PyMem_Calloc(slots, sizeof(PyObject *));
    t->hashes = PyMem_Calloc(slots, sizeof(size_t));
    if (t->slots == NULL || t->hashes == NULL) {
        PyMem_Free(t->slots);
        PyMem_Free(t->hashes);
        *t = old;
        PyErr_NoMemory();
        return -1;
    }
    t->mask = slots - 1;
    for (i = 0; old.slots != NULL && i <= old.mask; i++) {
        PyObject *s = old.slots[i];
        if (s != NULL) {
            at = string_slot(t, old.hashes[i], PyUnicode_1BYTE_DATA(s), PyUnicode_GET_LENGTH(s));
            t->slots[at] = s;
            t->hashes[at] = old.hashes[i];
        }
    }
    PyMem_Free(old.slots);
    PyMem_Free(old.hashes);
    return 0;
}

/* src[a:b] (new reference; src 1-byte): the table's string with those characters, made and kept on first use.
 * Without a table (t NULL), a new string. */
static PyObject *table_string(StringTable *t, PyObject *src, const Py_UCS1 *data, Py_ssize_t a, Py_ssize_t b) {
    size_t h, at;
    PyObject *made;
    if (t == NULL || b - a < 2) { /* (the empty and 1-character strings are Python's own singletons) */
        return PyUnicode_Substring(src, a, b);
    }
    h = span_hash(data + a, b - a);
    if (t->slots != NULL && t->slots[at = string_slot(t, h, data + a, b - a)] != NULL) {
        Py_INCREF(t->slots[at]);
        return t->slots[at];
    }
    if (string_table_room(t) < 0 || (made = PyUnicode_Substring(src, a, b)) == NULL) {
        return NULL;
    }
    at = string_slot(t, h, data + a, b - a);
    Py_INCREF(made);
    t->slots[at] = made;
    t->hashes[at] = h;
    t->used++;
    return made;
}

/* Scan the lines from `pos` to the first that starts with '}' (before `length`): append a row per line to `rows`.
 * Returns the position of that '}', -1 when there are no rows to give (the caller returns None), -2 on a Python
 * error. */
ALWAYS_INLINE Py_ssize_t scan(int kind, const void *data, PyObject *src, Py_ssize_t pos, Py_ssize_t length,
                              PyObject *rows, StringTable *strings) {
    Py_ssize_t a = pos;
    Py_ssize_t quotes = 0;
    Spans g;
    for (;;) {
        Py_ssize_t e, i;
        if (a >= length) {
            return -1; /* no '}' line */
        }
        if (CH(a) == '}') {
            break;
        }
        e = line_end(kind, data, a, length, &quotes);
        if (e < 0) {
            return -1;
        }
        i = a;
        while (i < e && CH(i) == ' ') {
            i++;
        }
        if (e - i > 5 && CH(i) == 'R' && CH(i + 1) == 'O' && CH(i + 2) == 'O' && CH(i + 3) == 'T' &&
            CH(i + 4) == ' ' && match_from(kind, data, i + 5, e, &g)) {
            g.start[0] = i;
            g.end[0] = i + 5;
        } else if (match_from(kind, data, i, e, &g)) {
            g.start[0] = g.end[0] = i;
        } else {
            return -1;
        }
        /* A second " = " after the name's, outside a string: a second instruction on the line. */
        if (has_equals(kind, data, g.end[2] + 3, e) && second_equals(kind, data, g.end[2] + 3, e)) {
            return -1;
        }
        {
            PyObject *row = PyTuple_New(N_GROUPS);
            int k;
            if (row == NULL) {
                return -2;
            }
            for (k = 0; k < N_GROUPS; k++) {
                PyObject *part = (k == 3 || k == 4) && strings != NULL
                                     ? table_string(strings, src, data, g.start[k], g.end[k])
                                     : PyUnicode_Substring(src, g.start[k], g.end[k]);
                if (part == NULL) {
                    Py_DECREF(row);
                    return -2;
                }
                PyTuple_SET_ITEM(row, k, part);
            }
            if (PyList_Append(rows, row) < 0) {
                Py_DECREF(row);
                return -2;
            }
            Py_DECREF(row);
        }
        a = e + 1;
    }
    return (quotes & 1) || a == pos ? -1 : a;
}

static PyObject *block_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *src, *rows, *result, *stop_obj;
    Py_ssize_t pos, length, stop;
    int kind;
    const void *data;
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "block_rows() takes 2 arguments (src, pos), got %zd", nargs);
        return NULL;
    }
    src = args[0];
    if (!PyUnicode_Check(src)) {
        PyErr_Format(PyExc_TypeError, "block_rows(): src must be str, not %.100s", Py_TYPE(src)->tp_name);
        return NULL;
    }
    pos = PyLong_AsSsize_t(args[1]);
    if (pos == -1 && PyErr_Occurred()) {
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(src) < 0) { /* (a no-op, and deprecated, from Python 3.12 on) */
        return NULL;
    }
#endif
    length = PyUnicode_GET_LENGTH(src);
    kind = PyUnicode_KIND(src);
    data = PyUnicode_DATA(src);
    if (pos < 1 || pos > length || PyUnicode_READ(kind, data, pos - 1) != '\n') {
        PyErr_Format(PyExc_ValueError, "block_rows(): pos=%zd does not follow a line break", pos);
        return NULL;
    }
    rows = PyList_New(0);
    if (rows == NULL) {
        return NULL;
    }
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        stop = scan(PyUnicode_1BYTE_KIND, data, src, pos, length, rows, NULL);
        break;
    case PyUnicode_2BYTE_KIND:
        stop = scan(PyUnicode_2BYTE_KIND, data, src, pos, length, rows, NULL);
        break;
    default:
        stop = scan(PyUnicode_4BYTE_KIND, data, src, pos, length, rows, NULL);
        break;
    }
    if (stop < 0) {
        Py_DECREF(rows);
        if (stop == -2) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    result = PyTuple_New(2);
    if (result == NULL) {
        Py_DECREF(rows);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 1, rows);
    stop_obj = PyLong_FromSsize_t(stop);
    if (stop_obj == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, stop_obj);
    return result;
}

/* ---- build_rows: the common rows of BodyReader._rows (_hlo_bodies.py), built without a Python step ---------
 *
 * build_rows(rows, start, line, shapes, known, never_calls, new, decoder, out, no_calls, params, root, call_keys,
 *            roles) -> int
 *
 * Builds the instructions of rows[start], rows[start + 1], ... (``block_rows`` rows, the first on line ``line``)
 * as ``BodyReader._rows`` builds them, appending each to ``out`` (and a parameter to ``params``; a ROOT's name
 * to the one-item list ``root``), and stops at the first row it leaves to Python: an opcode not in ``known``, a
 * parameter number other than plain digits, a second ROOT, a shape text not in ``shapes``, a computation written
 * in place, or an operand list other than XLA's ``%a, %b``, ``a, b`` or ``f32[2]{0} %a, s32[] %b`` (a '/' in it,
 * a ',' not followed by " %", a tuple-shaped or tiled operand shape). A row that may name called computations (``names_calls``: '%' with "=%" or "={%", or an
 * opcode not in ``never_calls``) gets them as ``_called`` reads them (``read_calls``: ``call_keys`` in
 * ``_CALL_KEY``'s order, filed by ``roles``). Returns the index of the row it stopped at (len(rows) when it built
 * them all). ``new`` is ``HloInstruction``, called with the arguments ``_rows`` passes; ``no_calls`` the shared
 * empty called-computations dict. */

static PyObject *STR_EMPTY, *TUPLE_EMPTY, *STR_CALL, *STR_CALL_SET, *STR_PARAMETER, *STR_CONSTANT, *STR_CALLS;

static int init_constants(void) {
    if (STR_EMPTY != NULL) {
        return 0;
    }
    STR_EMPTY = PyUnicode_FromString("");
    TUPLE_EMPTY = PyTuple_New(0);
    STR_CALL = PyUnicode_FromString("=%");
    STR_CALL_SET = PyUnicode_FromString("={%");
    STR_PARAMETER = PyUnicode_InternFromString("parameter");
    STR_CONSTANT = PyUnicode_InternFromString("constant");
    STR_CALLS = PyUnicode_InternFromString("calls");
    return (STR_EMPTY && TUPLE_EMPTY && STR_CALL && STR_CALL_SET && STR_PARAMETER && STR_CONSTANT && STR_CALLS)
        ? 0 : -1;
}

/* ``HloInstruction`` made without calling it (set_instruction_class): its ``__init__`` only stores its eleven
 * arguments in as many slots and sets ``_decoded`` (None while attribute text waits to be decoded, else the shared
 * empty decoding), so the object is allocated and its slots filled here, in ``__init__``'s order -- ~0.3 us of a
 * Python call saved per instruction, 30,000-40,000 of them in the corpus's llama and mixtral.
 * tests/parsers/test_block_rows.py holds every slot equal to the instructions the Python loop makes. */
#define INST_SLOTS 12
static const char *const INST_SLOT_NAMES[INST_SLOTS] = {
    "name", "opcode", "shape", "operands", "called_computations", "is_root", "line", "literal",
    "parameter_number", "attribute_text", "_decoder", "_decoded"};
static PyTypeObject *INST_TYPE = NULL;
static Py_ssize_t INST_OFFSETS[INST_SLOTS];
static PyObject *NOTHING_DECODED = NULL;

/* set_instruction_class(cls, nothing_decoded) -> bool: take ``cls`` for the direct construction when its slots are
 * exactly INST_SLOT_NAMES, object slots each (True); else leave it to be called (False). */
static PyObject *set_instruction_class(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *cls, *declared;
    PyTypeObject *type;
    Py_ssize_t offsets[INST_SLOTS], k;
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "set_instruction_class(cls: type, nothing_decoded)");
        return NULL;
    }
    cls = args[0];
    type = (PyTypeObject *)cls;
    declared = PyObject_GetAttrString(cls, "__slots__");
    if (declared == NULL) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    k = PySequence_Check(declared) ? PySequence_Size(declared) : -1;
    Py_DECREF(declared);
    if (k != INST_SLOTS || type->tp_itemsize != 0 || type->tp_dictoffset != 0) {
        PyErr_Clear();
        Py_RETURN_FALSE;
    }
    for (k = 0; k < INST_SLOTS; k++) {
        PyObject *descr = PyObject_GetAttrString(cls, INST_SLOT_NAMES[k]);
        int usable;
        if (descr == NULL) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        usable = Py_TYPE(descr) == &PyMemberDescr_Type;
        if (usable) { /* (a slot of cls itself, holding any object) */
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            usable = member->type == T_OBJECT_EX && !(member->flags & READONLY);
            offsets[k] = member->offset;
        }
        Py_DECREF(descr);
        if (!usable) {
            Py_RETURN_FALSE;
        }
    }
    Py_INCREF(cls);
    Py_XSETREF(INST_TYPE, type);
    Py_INCREF(args[1]);
    Py_XSETREF(NOTHING_DECODED, args[1]);
    memcpy(INST_OFFSETS, offsets, sizeof offsets);
    Py_RETURN_TRUE;
}

/* A new ``INST_TYPE`` holding ``args`` (the eleven arguments of its ``__init__``), or NULL on error. */
static PyObject *make_instruction(PyObject *const *args) {
    PyObject *obj = INST_TYPE->tp_alloc(INST_TYPE, 0), *decoded;
    int k;
    if (obj == NULL) {
        return NULL;
    }
    for (k = 0; k < INST_SLOTS - 1; k++) {
        Py_INCREF(args[k]);
        *(PyObject **)((char *)obj + INST_OFFSETS[k]) = args[k];
    }
    decoded = PyUnicode_GET_LENGTH(args[9]) != 0 ? Py_None : NOTHING_DECODED; /* (attribute_text: args[9]) */
    Py_INCREF(decoded);
    *(PyObject **)((char *)obj + INST_OFFSETS[INST_SLOTS - 1]) = decoded;
    return obj;
}

/* Slot ``k`` of INST_SLOT_NAMES of inst, a new reference: read straight from the slot when inst is an INST_TYPE
 * (each PyObject_GetAttr ~30 ns: a type lookup, then the descriptor), else by name. NULL with the error. */
static inline PyObject *inst_slot(PyObject *inst, int k, PyObject *name) {
    if (Py_TYPE(inst) == INST_TYPE) {
        PyObject *v = *(PyObject **)((char *)inst + INST_OFFSETS[k]);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(inst, name);
}

/* 1 when text holds sub, 0 when not, -1 on error. */
static int holds(PyObject *text, PyObject *sub) {
    Py_ssize_t at = PyUnicode_Find(text, sub, 0, PyUnicode_GET_LENGTH(text), 1);
    return at == -2 ? -1 : at >= 0;
}

/* ---- The names of a body's rows, found by their text: an operand's name is the object of the row it names -----
 *
 * read_one indexes the names of a body's rows (group 2) by their characters before building them; an operand name
 * that names one of them is that row's name object itself, not a new string: no string made and freed per
 * operand, and its hash is already known when body_checks and the cost walk look it up (both compare the same
 * object first). Where no row has the name (a name defined nowhere: body_checks fails the body), or the text is
 * not 1-byte, a new string, as before. Equal strings either way: only their identity differs. */

typedef struct {
    PyObject *rows;    /* the rows the table indexes (borrowed; NULL: no table) */
    size_t mask;       /* slots - 1 (slots: a power of two, at least twice the rows) */
    Py_ssize_t *slots; /* row index + 1 of each slot, 0 when empty */
    int duplicate;     /* some name is the name of two rows */
    char *built;       /* 1 for each row build_range built (with this table), 0 for those Python's loop built */
} NameTable;

/* The name (group 2) of row i of t's rows (borrowed). */
#define ROW_NAME(t, i) PyTuple_GET_ITEM(PyList_GET_ITEM((t)->rows, (i)), 2)

static void name_table_free(NameTable *t);

/* The slot of the name [p, p + len): the one holding a row of that name, else the empty one where it would go. */
static size_t name_slot(const NameTable *t, const Py_UCS1 *p, Py_ssize_t len) {
    size_t at = span_hash(p, len) & t->mask;
    for (; t->slots[at] != 0; at = (at + 1) & t->mask) {
        PyObject *name = ROW_NAME(t, t->slots[at] - 1);
        if (PyUnicode_GET_LENGTH(name) == len && memcmp(PyUnicode_1BYTE_DATA(name), p, (size_t)len) == 0) {
            break;
        }
    }
    return at;
}

/* Index the names of rows (a list of block_rows tuples whose names are 1-byte str): 0, or -1 with MemoryError
 * (t then indexes nothing). A name seen twice keeps its first row (body_checks refuses such a body anyway). */
static int name_table_build(NameTable *t, PyObject *rows) {
    Py_ssize_t n = PyList_GET_SIZE(rows), i;
    size_t slots = 16;
    while (slots < (size_t)n * 2) {
        slots <<= 1;
    }
    t->slots = PyMem_Calloc(slots, sizeof(Py_ssize_t));
    t->built = PyMem_Calloc((size_t)n + 1, 1);
    if (t->slots == NULL || t->built == NULL) {
        name_table_free(t);
        PyErr_NoMemory();
        return -1;
    }
    t->mask = slots - 1;
    t->rows = rows;
    for (i = 0; i < n; i++) {
        PyObject *name = ROW_NAME(t, i);
        size_t at = name_slot(t, PyUnicode_1BYTE_DATA(name), PyUnicode_GET_LENGTH(name));
        if (t->slots[at] == 0) {
            t->slots[at] = i + 1;
        } else {
            t->duplicate = 1;
        }
    }
    return 0;
}

static void name_table_free(NameTable *t) {
    PyMem_Free(t->slots);
    PyMem_Free(t->built);
    t->slots = NULL;
    t->built = NULL;
    t->rows = NULL;
}

/* Mark rows [start, stop) of t as built by build_range. */
static void name_table_built(const NameTable *t, Py_ssize_t start, Py_ssize_t stop) {
    if (t != NULL && t->built != NULL && start < stop) {
        memset(t->built + start, 1, (size_t)(stop - start));
    }
}

/* The table of the body read_one is building (NULL outside it): build_rows, called back from Python's loop for
 * the same rows (rows_into), uses it too. */
static const NameTable *ACTIVE_NAMES = NULL;

/* The operand names row_name made as new strings -- no table, or no row of that name -- since read_one set it to
 * 0: while it stays 0 and the table holds no name twice, every operand of the rows built in C is the name of a
 * row of the body, and body_checks need not look at them. */
static Py_ssize_t NAME_MISSES = 0;

/* text[a:b] (new reference): the name object of the row of t with those characters, when there is one. */
static PyObject *row_name(const NameTable *t, PyObject *text, Py_ssize_t a, Py_ssize_t b) {
    if (t != NULL && PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND) {
        size_t at = name_slot(t, PyUnicode_1BYTE_DATA(text) + a, b - a);
        if (t->slots[at] != 0) {
            PyObject *name = ROW_NAME(t, t->slots[at] - 1);
            Py_INCREF(name);
            return name;
        }
    }
    NAME_MISSES++;
    return PyUnicode_Substring(text, a, b);
}

/* The first ch in [from, to), or -1: memchr on one-byte text (what XLA prints), else character by character. */
ALWAYS_INLINE Py_ssize_t find_char(int kind, const void *data, Py_ssize_t from, Py_ssize_t to, Py_UCS4 ch) {
    Py_ssize_t i;
    if (from >= to) {
        return -1;
    }
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data, *p = memchr(d + from, (int)ch, (size_t)(to - from));
        return p == NULL ? -1 : p - d;
    }
    for (i = from; i < to; i++) {
        if (CH(i) == ch) {
            return i;
        }
    }
    return -1;
}

/* The ``commas + 1`` names of text from ``start``, each ended by a ',' (or the end) and the next begun ``sep``
 * characters after that ',' (", %": 3; ", ": 2), as a tuple; NULL on error; Py_None (borrowed) should the text
 * hold another number of names (its callers count the commas as this reads them). */
static PyObject *names_between(const NameTable *t, PyObject *text, Py_ssize_t start, Py_ssize_t commas,
                               Py_ssize_t sep) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i, k = 0, from = start;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    PyObject *out = PyTuple_New(commas + 1);
    if (out == NULL) {
        return NULL;
    }
    while (from <= n) {
        PyObject *name;
        if (k > commas) { /* (a name more than the commas counted) */
            Py_DECREF(out);
            return Py_None;
        }
        i = find_char(kind, data, from, n, ',');
        name = row_name(t, text, from, i < 0 ? n : i);
        if (name == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k++, name);
        if (i < 0) {
            break;
        }
        from = i + sep;
    }
    if (k != commas + 1) { /* (a name fewer: the text ended in a separator) */
        Py_DECREF(out);
        return Py_None;
    }
    return out;
}

/* A character an operand name of split_index_operands may not hold: one that ends SIGIL_NAME's name (white space,
 * ',', '(', ')', '{', '}'), a second '%', or a '/'. */
static int ends_index_operand(Py_UCS4 c) {
    return c == ',' || c == '%' || c == '/' || c == '(' || c == ')' || c == '{' || c == '}' || Py_UNICODE_ISSPACE(c);
}

/* What the Python loop reads of a list of operand names that holds a '/' -- ``SIGIL_NAME.findall``, its names
 * counted against the ", " -- for the list XLA prints past five operands, with an index comment (slash, star,
 * ``index=5``, star, slash) between the ", " and the '%' of every fifth name: each ',' followed by " %" or by
 * " " + that comment + "%", each name from its '%' to the next ',' (or the end), none of them empty or holding a
 * character that would end the regex's name (``ends_index_operand``). There the regex finds those names, one per
 * ", ", and the loop takes them. Py_None (borrowed) for any other text; NULL on error. */
static PyObject *split_index_operands(const NameTable *t, PyObject *text) {
    static const char COMMENT[] = "/*index=";
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 1, count = 0, k, c;
    int kind = PyUnicode_KIND(text), pass;
    const void *data = PyUnicode_DATA(text);
    PyObject *out = NULL;
    for (pass = 0; pass < 2; pass++) { /* (the names counted and checked, then made) */
        i = 1;
        k = 0;
        for (;;) {
            Py_ssize_t start = i;
            while (i < n && !ends_index_operand(CH(i))) {
                i++;
            }
            if (i == start || (i < n && CH(i) != ',')) {
                goto give_up;
            }
            if (pass == 0) {
                count++;
            } else {
                PyObject *name = row_name(t, text, start, i);
                if (name == NULL) {
                    Py_DECREF(out);
                    return NULL;
                }
                PyTuple_SET_ITEM(out, k++, name);
            }
            if (i == n) {
                break;
            }
            if (i + 2 >= n || CH(i + 1) != ' ') {
                goto give_up;
            }
            i += 2;
            if (CH(i) != '%') {
                for (c = 0; COMMENT[c] != '\0'; c++) {
                    if (i + c >= n || CH(i + c) != (Py_UCS4)COMMENT[c]) {
                        goto give_up;
                    }
                }
                i += c;
                c = i;
                while (i < n && CH(i) >= '0' && CH(i) <= '9') {
                    i++;
                }
                if (i == c || i + 2 >= n || CH(i) != '*' || CH(i + 1) != '/' || CH(i + 2) != '%') {
                    goto give_up;
                }
                i += 2;
            }
            i++; /* (past the '%') */
        }
        if (pass == 0 && (out = PyTuple_New(count)) == NULL) {
            return NULL;
        }
    }
    return out;
give_up: /* (a text of another form: the Python loop reads it) */
    Py_XDECREF(out);
    return Py_None;
}

/* ``tuple(text[1:].split(", %"))`` for text starting with '%', when that gives one name per ',' (every ','
 * followed by " %") and text holds no '/'; for a text with a '/', ``split_index_operands``; Py_None (borrowed)
 * when not (Python reads it); NULL on error. */
static PyObject *split_operands(const NameTable *t, PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), commas = 0, i;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    if (find_char(kind, data, 1, n, '/') >= 0) {
        return split_index_operands(t, text);
    }
    for (i = find_char(kind, data, 1, n, ','); i >= 0; i = find_char(kind, data, i + 1, n, ',')) {
        if (i + 2 >= n || CH(i + 1) != ' ' || CH(i + 2) != '%') {
            return Py_None;
        }
        commas++;
    }
    return names_between(t, text, 1, commas, 3);
}

/* A character of an operand name as ``_SHAPED_NAME`` reads one: not white space, not one of ``,%(){}[]/``. */
static int is_operand_name_char(Py_UCS4 c) {
    switch (c) {
    case ',': case '%': case '(': case ')': case '{': case '}': case '[': case ']': case '/':
        return 0;
    default:
        return !Py_UNICODE_ISSPACE(c);
    }
}

/* The end of the item of an operand list printed with a plain array shape (``_PLAIN_ARRAY``, " %", a name) that
 * starts at i, and the name's start in *name_at; -1 when no such item starts there. */
static Py_ssize_t shaped_item_end(int kind, const void *data, Py_ssize_t n, Py_ssize_t i, Py_ssize_t *name_at) {
    Py_UCS4 c;
    if (i >= n || (c = CH(i)) < 'a' || c > 'z') {
        return -1;
    }
    for (i++; i < n && (((c = CH(i)) >= 'a' && c <= 'z') || (c >= '0' && c <= '9')); i++) {
    }
    if (i >= n || CH(i) != '[') {
        return -1;
    }
    for (i++; i < n && (((c = CH(i)) >= '0' && c <= '9') || c == ','); i++) {
    }
    if (i >= n || CH(i) != ']') {
        return -1;
    }
    i++;
    if (i < n && CH(i) == '{') { /* a layout of minor-to-major numbers */
        for (i++; i < n && (((c = CH(i)) >= '0' && c <= '9') || c == ','); i++) {
        }
        if (i >= n || CH(i) != '}') {
            return -1;
        }
        i++;
    }
    if (i + 1 >= n || CH(i) != ' ' || CH(i + 1) != '%') {
        return -1;
    }
    i += 2;
    *name_at = i;
    for (; i < n && is_operand_name_char(CH(i)); i++) {
    }
    return i > *name_at ? i : -1;
}

/* The names of an operand list printed with plain array operand shapes (``f32[2,3]{1,0} %a, s32[] %b``): a text
 * ``_SHAPED_OPERANDS`` of _hlo_lexer.py matches whole without its tuple-shaped items, whose names
 * ``operand_list`` reads as ``_SHAPED_NAME``'s matches. Py_None (borrowed) for any other text (a tuple shape, a
 * tiled layout, a comment: operand_list reads it); NULL on error. */
static PyObject *split_shaped_operands(const NameTable *t, PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = 0, end, name_at, items = 0, k = 0;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    PyObject *out;
    for (;;) {
        end = shaped_item_end(kind, data, n, i, &name_at);
        if (end < 0) {
            return Py_None;
        }
        items++;
        if (end == n) {
            break;
        }
        if (end + 1 >= n || CH(end) != ',' || CH(end + 1) != ' ') {
            return Py_None;
        }
        i = end + 2;
    }
    out = PyTuple_New(items);
    if (out == NULL) {
        return NULL;
    }
    for (i = 0; k < items; k++, i = end + 2) {
        PyObject *name;
        end = shaped_item_end(kind, data, n, i, &name_at);
        name = row_name(t, text, name_at, end);
        if (name == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, name);
    }
    return out;
}

/* The names of an operand list printed without '%' (``a.1, b.2``): what ``operand_list`` reads when
 * ``_PLAIN_NAMES`` matches the whole text (names of characters other than white space and ``,%(){}[]/``, each
 * ", " apart): ``tuple(text.split(", "))``. Py_None (borrowed) for any other text; NULL on error. */
static PyObject *split_plain_names(const NameTable *t, PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), commas = 0, i;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (i = 0; i < n; i++) {
        Py_UCS4 c = CH(i);
        if (c == ',') {
            /* ", " between two names: not first, not last, a name character after the blank */
            if (i == 0 || i + 2 >= n || CH(i + 1) != ' ' || CH(i - 1) == ' ') {
                return Py_None;
            }
            commas++;
            i++; /* (the blank) */
            continue;
        }
        switch (c) {
        case '%': case '(': case ')': case '{': case '}': case '[': case ']': case '/':
            return Py_None;
        default:
            if (Py_UNICODE_ISSPACE(c)) {
                return Py_None;
            }
        }
    }
    return names_between(t, text, 0, commas, 2);
}

/* ``name_value`` of _hlo_re (text[1:] when it starts with '%') of [a, b) of text; new reference. */
static PyObject *name_value_of(PyObject *text, Py_ssize_t a, Py_ssize_t b) {
    if (a < b && PyUnicode_READ_CHAR(text, a) == '%') {
        a++;
    }
    return PyUnicode_Substring(text, a, b);
}

/* The names of a braced value [a, b) of text as ``_hlo_re.name_list`` reads them: stripped, its first and
 * last characters dropped, split at ',', each piece stripped, empty pieces skipped, ``name_value`` of each. */
static PyObject *name_list_of(PyObject *text, Py_ssize_t a, Py_ssize_t b) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    PyObject *names = PyList_New(0), *out;
    Py_ssize_t i, from, x, y;
    if (names == NULL) {
        return NULL;
    }
    while (a < b && Py_UNICODE_ISSPACE(CH(a))) {
        a++;
    }
    while (b > a && Py_UNICODE_ISSPACE(CH(b - 1))) {
        b--;
    }
    if (a < b && CH(a) == '{') { /* body[1:-1] */
        a++;
        b = b - 1 < a ? a : b - 1;
    }
    from = a;
    for (i = a; i <= b; i++) {
        if (i == b || CH(i) == ',') {
            x = from;
            y = i;
            while (x < y && Py_UNICODE_ISSPACE(CH(x))) {
                x++;
            }
            while (y > x && Py_UNICODE_ISSPACE(CH(y - 1))) {
                y--;
            }
            if (x < y) {
                PyObject *name = name_value_of(text, x, y);
                if (name == NULL || PyList_Append(names, name) < 0) {
                    Py_XDECREF(name);
                    Py_DECREF(names);
                    return NULL;
                }
                Py_DECREF(name);
            }
            from = i + 1;
        }
    }
    out = PyList_AsTuple(names);
    Py_DECREF(names);
    return out;
}

/* ``InstructionReader._called`` of an attribute text: the called computations named by ``_CALL_KEY``'s matches
 * -- ``(?:^|,)\s*(KEY)=(\{[^}]*\}|[^\s,]+)``, ``keys`` in the regex's order, each match searched from where the
 * last ended, a failed try one character on -- filed by ``roles`` (a key it lacks: ``calls``). A new dict;
 * Py_None (borrowed) when a braced value holds '=' (a computation written in place); NULL on error. */
static PyObject *read_calls(PyObject *rest, PyObject *keys, PyObject *roles) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(rest), p = 0;
    int kind = PyUnicode_KIND(rest);
    const void *data = PyUnicode_DATA(rest);
    PyObject *called = PyDict_New();
    if (called == NULL) {
        return NULL;
    }
    while (p < n) {
        Py_ssize_t q = p, v, e = -1, j, k, nkeys = PyTuple_GET_SIZE(keys);
        PyObject *key = NULL;
        if (CH(q) == ',') {
            q++;
        } else if (p != 0) {
            p++;
            continue;
        }
        while (q < n && Py_UNICODE_ISSPACE(CH(q))) {
            q++;
        }
        for (k = 0; k < nkeys && key == NULL; k++) {
            PyObject *cand = PyTuple_GET_ITEM(keys, k);
            Py_ssize_t m = PyUnicode_GET_LENGTH(cand), t;
            if (q + m >= n || CH(q + m) != '=') {
                continue;
            }
            for (t = 0; t < m && CH(q + t) == PyUnicode_READ_CHAR(cand, t); t++) {
            }
            if (t == m) {
                key = cand;
                v = q + m + 1;
            }
        }
        if (key == NULL) {
            p++;
            continue;
        }
        if (v < n && CH(v) == '{') { /* \{[^}]*\} */
            for (j = v + 1; j < n && CH(j) != '}'; j++) {
            }
            if (j < n) {
                e = j + 1;
            }
        }
        if (e < 0) { /* [^\s,]+ */
            for (j = v; j < n && CH(j) != ',' && !Py_UNICODE_ISSPACE(CH(j)); j++) {
            }
            if (j == v) {
                p++;
                continue;
            }
            e = j;
        }
        {
            PyObject *role, *names, *before, *joined;
            int braced = CH(v) == '{';
            if (braced) {
                for (j = v; j < e && CH(j) != '='; j++) {
                }
                if (j < e) {
                    Py_DECREF(called);
                    return Py_None;
                }
                names = name_list_of(rest, v, e);
            } else {
                PyObject *name = name_value_of(rest, v, e);
                names = name == NULL ? NULL : PyTuple_Pack(1, name);
                Py_XDECREF(name);
            }
            if (names == NULL) {
                Py_DECREF(called);
                return NULL;
            }
            role = PyDict_GetItemWithError(roles, key);
            if (role == NULL && PyErr_Occurred()) {
                Py_DECREF(names);
                Py_DECREF(called);
                return NULL;
            }
            if (role == NULL) {
                role = STR_CALLS;
            }
            before = PyDict_GetItemWithError(called, role);
            if (before == NULL && PyErr_Occurred()) {
                Py_DECREF(names);
                Py_DECREF(called);
                return NULL;
            }
            joined = before == NULL ? (Py_INCREF(names), names) : PySequence_Concat(before, names);
            Py_DECREF(names);
            if (joined == NULL || PyDict_SetItem(called, role, joined) < 0) {
                Py_XDECREF(joined);
                Py_DECREF(called);
                return NULL;
            }
            Py_DECREF(joined);
        }
        p = e;
    }
    return called;
}

/* call_keys must hold str (read_calls reads them as such); -1 with a TypeError when not. */
static int check_call_keys(PyObject *call_keys) {
    Py_ssize_t i;
    for (i = 0; i < PyTuple_GET_SIZE(call_keys); i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(call_keys, i))) {
            PyErr_SetString(PyExc_TypeError, "call_keys must hold str");
            return -1;
        }
    }
    return 0;
}

/* The loop of build_rows over rows[start:] (arguments as build_rows's, checked by the caller; names: the rows'
 * NameTable, or NULL): the index of the first row left to Python, or -1 on a Python error. */
/* What build_range asks of a row's opcode -- in ``known``, in ``never_calls``, ``parameter``, ``constant`` -- and
 * the shape of its shape text (``shapes[text]``), kept for the last objects seen in a slot chosen by the object's
 * address: a read makes one string per distinct opcode and shape text (StringTable), so a body's rows ask about a
 * few objects again and again, and the set and dict lookups (hash, probe, compare) were ~2% of an analyze. The rows
 * hold every object asked about, so no address is reused while the memo lives (one call of build_range, or of
 * fill_shapes, which reads the shape texts the same way). */
#define ROW_MEMO_SLOTS 64

typedef struct {
    PyObject *opcode; /* (borrowed; NULL: empty) */
    signed char known, never_calls, parameter, constant;
} OpcodeFlags;

typedef struct {
    PyObject *text;  /* (borrowed; NULL: empty) */
    PyObject *shape; /* (borrowed from the shapes dict, which keeps it) */
} ShapeSlot;

static inline size_t memo_slot(PyObject *o) { return ((uintptr_t)o >> 4) & (ROW_MEMO_SLOTS - 1); }

/* The flags of opcode (its slot of memo, filled on a miss); NULL on error. */
static const OpcodeFlags *opcode_flags(OpcodeFlags *memo, PyObject *opcode, PyObject *known, PyObject *never_calls) {
    OpcodeFlags *f = &memo[memo_slot(opcode)];
    int k, nc;
    if (f->opcode == opcode) {
        return f;
    }
    k = PySet_Contains(known, opcode);
    nc = k < 0 ? -1 : PySet_Contains(never_calls, opcode);
    if (nc < 0) {
        return NULL;
    }
    f->opcode = opcode;
    f->known = (signed char)k;
    f->never_calls = (signed char)nc;
    f->parameter = PyUnicode_Check(opcode) && PyUnicode_Compare(opcode, STR_PARAMETER) == 0;
    f->constant = PyUnicode_Check(opcode) && PyUnicode_Compare(opcode, STR_CONSTANT) == 0;
    return f;
}

/* shapes[text] (borrowed), through its slot of memo; NULL without an error when shapes lacks it, with one on error. */
static PyObject *memo_shape(ShapeSlot *memo, PyObject *shapes, PyObject *text) {
    ShapeSlot *slot = &memo[memo_slot(text)];
    PyObject *shape;
    if (slot->text == text) {
        return slot->shape;
    }
    shape = PyDict_GetItemWithError(shapes, text);
    if (shape != NULL) {
        slot->text = text;
        slot->shape = shape;
    }
    return shape;
}

static Py_ssize_t build_range(PyObject *rows, Py_ssize_t start, Py_ssize_t line, PyObject *shapes, PyObject *known,
                              PyObject *never_calls, PyObject *new, PyObject *decoder, PyObject *out,
                              PyObject *no_calls, PyObject *params, PyObject *root, PyObject *call_keys,
                              PyObject *roles, const NameTable *names) {
    Py_ssize_t n, i;
    OpcodeFlags flags_memo[ROW_MEMO_SLOTS] = {{0}};
    ShapeSlot shape_memo[ROW_MEMO_SLOTS] = {{0}};
    n = PyList_GET_SIZE(rows);
    for (i = start < 0 ? 0 : start; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        PyObject *is_root, *name, *shape_text, *opcode, *operand_text, *rest, *shape, *operands, *literal, *ln,
            *number, *inst, *called = NULL, *call_args[11];
        const OpcodeFlags *flags;
        int r, rooted, parameter;
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != N_GROUPS) {
            break;
        }
        is_root = PyTuple_GET_ITEM(row, 0);
        name = PyTuple_GET_ITEM(row, 2);
        shape_text = PyTuple_GET_ITEM(row, 3);
        opcode = PyTuple_GET_ITEM(row, 4);
        operand_text = PyTuple_GET_ITEM(row, 5);
        rest = PyTuple_GET_ITEM(row, 6);
        if (!PyUnicode_Check(is_root) || !PyUnicode_Check(operand_text) || !PyUnicode_Check(rest)) {
            break;
        }
        rooted = PyUnicode_GET_LENGTH(is_root) != 0;
        if (rooted && PyUnicode_GET_LENGTH(PyList_GET_ITEM(root, 0)) != 0) {
            break; /* a second ROOT: Python returns None */
        }
        flags = opcode_flags(flags_memo, opcode, known, never_calls);
        if (flags == NULL) {
            return -1;
        }
        if (!flags->known) {
            break;
        }
        parameter = flags->parameter;
        shape = memo_shape(shape_memo, shapes, shape_text);
        if (shape == NULL) {
            if (PyErr_Occurred()) {
                return -1;
            }
            break;
        }
        literal = STR_EMPTY;
        number = NULL;
        if (PyUnicode_GET_LENGTH(operand_text) != 0 && PyUnicode_READ_CHAR(operand_text, 0) == '%') {
            operands = split_operands(names, operand_text);
            if (operands == NULL) {
                return -1;
            }
            if (operands == Py_None) {
                break;
            }
        } else if (parameter) { /* int(operand_text), for plain digits (anything else: Python's int() reads it) */
            Py_ssize_t m = PyUnicode_GET_LENGTH(operand_text), d;
            if (m == 0 || m > 18) {
                break;
            }
            for (d = 0; d < m; d++) {
                Py_UCS4 c = PyUnicode_READ_CHAR(operand_text, d);
                if (c < '0' || c > '9') {
                    break;
                }
            }
            if (d < m) {
                break;
            }
            number = PyLong_FromUnicodeObject(operand_text, 10);
            if (number == NULL) {
                return -1;
            }
            operands = TUPLE_EMPTY;
            Py_INCREF(operands);
        } else if (flags->constant) {
            literal = operand_text;
            operands = TUPLE_EMPTY;
            Py_INCREF(operands);
        } else if (PyUnicode_GET_LENGTH(operand_text) == 0) {
            operands = TUPLE_EMPTY;
            Py_INCREF(operands);
        } else {
            operands = split_shaped_operands(names, operand_text);
            if (operands == Py_None) {
                operands = split_plain_names(names, operand_text);
            }
            if (operands == NULL) {
                return -1;
            }
            if (operands == Py_None) {
                break; /* tuple-shaped operands, comments, ...: operand_list */
            }
        }
        called = no_calls; /* (names_calls, then _called's read: after the operands, whose checks may stop first) */
        Py_INCREF(called);
        if (PyUnicode_GET_LENGTH(rest) != 0) {
            int calls = 0;
            PyObject *found = NULL;
            if (PyUnicode_FindChar(rest, '%', 0, PyUnicode_GET_LENGTH(rest), 1) >= 0) {
                int a = holds(rest, STR_CALL), b = a ? 0 : holds(rest, STR_CALL_SET);
                if (a < 0 || b < 0) {
                    goto error;
                }
                calls = a || b;
            }
            if (!calls) {
                calls = !flags->never_calls; /* (a call key, has_call_key's question, is what read_calls looks for) */
            }
            if (calls) {
                found = read_calls(rest, call_keys, roles);
                if (found == NULL) {
                    goto error;
                }
                if (found == Py_None) { /* a computation written in place: Python gives up on the body */
                    Py_DECREF(called);
                    Py_DECREF(operands);
                    Py_XDECREF(number);
                    break;
                }
                if (PyDict_GET_SIZE(found) != 0) {
                    Py_SETREF(called, found);
                } else {
                    Py_DECREF(found);
                }
            }
        }
        if (number == NULL) {
            number = PyLong_FromLong(-1);
            if (number == NULL) {
                goto error;
            }
        }
        ln = PyLong_FromSsize_t(line + (i - start));
        if (ln == NULL) {
            goto error;
        }
        call_args[0] = name;
        call_args[1] = opcode;
        call_args[2] = shape;
        call_args[3] = operands;
        call_args[4] = called;
        call_args[5] = rooted ? Py_True : Py_False;
        call_args[6] = ln;
        call_args[7] = literal;
        call_args[8] = number;
        call_args[9] = rest;
        call_args[10] = decoder;
        inst = new == (PyObject *)INST_TYPE ? make_instruction(call_args)
                                            : PyObject_Vectorcall(new, call_args, 11, NULL);
        Py_DECREF(operands);
        Py_DECREF(ln);
        Py_DECREF(number);
        Py_DECREF(called);
        if (inst == NULL) {
            return -1;
        }
        r = PyList_Append(out, inst);
        if (r == 0 && parameter) {
            r = PyList_Append(params, inst);
        }
        Py_DECREF(inst);
        if (r < 0) {
            return -1;
        }
        if (rooted) {
            Py_INCREF(name);
            if (PyList_SetItem(root, 0, name) < 0) { /* (steals name, releases the "" it held) */
                return -1;
            }
        }
        continue;
    error: /* (an error once the row's operands, number and called computations are held) */
        Py_XDECREF(called);
        Py_DECREF(operands);
        Py_XDECREF(number);
        return -1;
    }
    return i;
}

static PyObject *build_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t start, line, i;
    const NameTable *names;
    (void)self;
    if (nargs != 14 || !PyList_Check(args[0]) || !PyDict_Check(args[3]) || !PyAnySet_Check(args[4])
        || !PyAnySet_Check(args[5]) || !PyList_Check(args[8]) || !PyList_Check(args[10]) || !PyList_Check(args[11])
        || PyList_GET_SIZE(args[11]) != 1 || !PyUnicode_Check(PyList_GET_ITEM(args[11], 0))
        || !PyTuple_Check(args[12]) || !PyDict_Check(args[13])) {
        PyErr_SetString(PyExc_TypeError, "build_rows(rows: list, start: int, line: int, shapes: dict, known: set, "
                                         "never_calls: set, new, decoder, out: list, no_calls, params: list, "
                                         "root: [str], call_keys: tuple, roles: dict)");
        return NULL;
    }
    if (check_call_keys(args[12]) < 0 || init_constants() < 0) {
        return NULL;
    }
    start = PyLong_AsSsize_t(args[1]);
    line = PyLong_AsSsize_t(args[2]);
    if ((start == -1 || line == -1) && PyErr_Occurred()) {
        return NULL;
    }
    names = ACTIVE_NAMES != NULL && ACTIVE_NAMES->rows == args[0] ? ACTIVE_NAMES : NULL;
    i = build_range(args[0], start, line, args[3], args[4], args[5], args[6], args[7], args[8], args[9], args[10],
                    args[11], args[12], args[13], names);
    if (i < 0) {
        return NULL;
    }
    name_table_built(names, start, i);
    return PyLong_FromSsize_t(i);
}

/* ---- read_computations: whole computations as XLA prints them, header to "}\n", without a Python step ------
 *
 * read_computations(src, pos, line, max_lines, shapes, parse_shape, known, never_calls, new, decoder, no_calls,
 *                   call_keys, roles, new_computation, out, rows_into) -> (pos, line)
 *
 * Reads the computations from ``pos`` (on line ``line``) one after the other, as ``_hlo_text._Parser`` reads each
 * with ``_computation`` when all of it takes the fast paths:
 *
 * - a one-line header: ``[ENTRY ]%name (...) -> ... {`` (``_computation_header``'s first branch) or, on a header
 *   without a signature, ``[ENTRY ]%name {`` (its second);
 * - a body of ``block_rows`` rows, built by ``build_rows`` (a shape text missing from ``shapes`` is read with
 *   ``parse_shape`` and kept there, as ``_rows`` does); from the first row ``build_rows`` leaves on, Python's loop
 *   ``rows_into`` (``BodyReader._rows_into``) builds the rest;
 * - a closing "}\n", or "} // comment\n" when what follows is not a ','.
 *
 * It also makes the checks ``_finish`` makes of a body's instructions (names unique, operands naming instructions
 * of the body), and the ``HloComputation`` (``new_computation``) as ``_computation_end`` does: the root (the ROOT,
 * else the last instruction), the parameters' shapes by parameter number; its name, opcode and shape columns are
 * set from the rows (``set_columns``), and the entry's name -> index map (``_index``, what ``name_index`` would make
 * of its names) from the check of its names. Each is appended to ``out``. Blank lines between computations are
 * skipped.
 *
 * It stops, at the start of the blank lines before it, at the first thing it leaves to Python: the end of the
 * text, a line that is not such a header (``HloModule``, a comment, a stack frame table, ...), a body with a row
 * that needs the line-by-line loop (``rows_into`` returns False), a shape ``parse_shape`` refuses (ValueError), a
 * body that fails a check (Python reports it), a body closed otherwise, or a body of ``max_lines`` rows or more
 * closed by "}\n" other than the entry's and a loop's (one tuple-shaped parameter: ``one_tuple_parameter``):
 * ``_block`` keeps it as a ``LazyBody`` (or builds it, ``_not_fused``). Returns the position and line
 * after the last computation read (``pos`` and ``line`` when none). tests/parsers/test_read_computations.py
 * holds the parse with it equal to the parse without it. */

static PyObject *STR_OPERANDS, *STR_PARAMETER_NUMBER, *STR_SHAPE, *STR_ARROW, *STR_NAMES, *STR_OPCODES, *STR_SHAPES,
    *STR_INDEX;

/* A character of a computation name (``[^\s(){}=%,/"]``). */
ALWAYS_INLINE int is_name_char(Py_UCS4 c) {
    switch (c) {
    case '(': case ')': case '{': case '}': case '=': case '%': case ',': case '/': case '"':
        return 0;
    default:
        return !Py_UNICODE_ISSPACE(c);
    }
}

/* ``%?([^\s(){}=%,/"]+)[ \t]*`` then `opener` from j (before e): 1 with the name's span and the position after
 * the opener, 0 when it does not match. */
static int match_name_from(int kind, const void *data, Py_ssize_t j, Py_ssize_t e, Py_UCS4 opener,
                           Py_ssize_t *name_a, Py_ssize_t *name_b, Py_ssize_t *end) {
    if (j < e && CH(j) == '%') {
        j++;
    }
    *name_a = j;
    while (j < e && is_name_char(CH(j))) {
        j++;
    }
    if (j == *name_a) {
        return 0;
    }
    *name_b = j;
    while (j < e && (CH(j) == ' ' || CH(j) == '\t')) {
        j++;
    }
    if (j >= e || CH(j) != opener) {
        return 0;
    }
    *end = j + 1;
    return 1;
}

/* Match ``_HEADER_LINE`` -- ``(ENTRY[ \t]+)?%?([^\s(){}=%,/"]+)[ \t]*\(`` -- at a (before e): 1 with the name's
 * span and the match's end, 0 when it does not match. Without the ENTRY group when the match with it fails, as
 * the regex backtracks. */
static int match_header(int kind, const void *data, Py_ssize_t a, Py_ssize_t e, int *is_entry, Py_ssize_t *name_a,
                        Py_ssize_t *name_b, Py_ssize_t *end) {
    if (e - a > 5 && CH(a) == 'E' && CH(a + 1) == 'N' && CH(a + 2) == 'T' && CH(a + 3) == 'R' && CH(a + 4) == 'Y'
        && (CH(a + 5) == ' ' || CH(a + 5) == '\t')) {
        Py_ssize_t j = a + 5;
        while (j < e && (CH(j) == ' ' || CH(j) == '\t')) {
            j++;
        }
        if (match_name_from(kind, data, j, e, '(', name_a, name_b, end)) {
            *is_entry = 1;
            return 1;
        }
    }
    *is_entry = 0;
    return match_name_from(kind, data, a, e, '(', name_a, name_b, end);
}

/* A header printed without a signature, ``[ENTRY ]%name {`` ('{' ending the line [a, e)), as
 * ``_computation_header``'s second branch reads it: "ENTRY" followed by one of " \t\r\n%/" makes it the entry
 * (no backtracking to a computation named ENTRY), then ``%?name``, blanks, '{'. 1 with the name's span, 0 when the
 * line is not (only) that. */
static int match_brace_header(int kind, const void *data, Py_ssize_t a, Py_ssize_t e, int *is_entry,
                              Py_ssize_t *name_a, Py_ssize_t *name_b) {
    Py_ssize_t j = a, end;
    *is_entry = 0;
    if (e - a > 5 && CH(a) == 'E' && CH(a + 1) == 'N' && CH(a + 2) == 'T' && CH(a + 3) == 'R' && CH(a + 4) == 'Y') {
        Py_UCS4 c = CH(a + 5);
        if (c == '\r' || c == '/') {
            return 0; /* (a comment or a line break after ENTRY: Python's) */
        }
        if (c == ' ' || c == '\t' || c == '%') {
            *is_entry = 1;
            j = a + 5;
            while (j < e && (CH(j) == ' ' || CH(j) == '\t')) {
                j++;
            }
        }
    }
    return match_name_from(kind, data, j, e, '{', name_a, name_b, &end) && end == e;
}

/* Fill ``shapes`` for the shape texts of rows it lacks: 1 when done, 0 when parse_shape raised ValueError (cleared),
 * -1 on any other error. */
static int fill_shapes(PyObject *rows, PyObject *shapes, PyObject *parse_shape) {
    Py_ssize_t i, n = PyList_GET_SIZE(rows);
    ShapeSlot memo[ROW_MEMO_SLOTS] = {{0}};
    for (i = 0; i < n; i++) {
        PyObject *text = PyTuple_GET_ITEM(PyList_GET_ITEM(rows, i), 3), *shape;
        int r;
        if (memo_shape(memo, shapes, text) != NULL) {
            continue;
        }
        if (PyErr_Occurred()) {
            return -1;
        }
        shape = PyObject_CallOneArg(parse_shape, text);
        if (shape == NULL) {
            if (PyErr_ExceptionMatches(PyExc_ValueError)) {
                PyErr_Clear();
                return 0;
            }
            return -1;
        }
        r = PyDict_SetItem(shapes, text, shape);
        Py_DECREF(shape);
        if (r < 0) {
            return -1;
        }
    }
    return 1;
}

/* ``_finish``'s checks of one body: 1 when the names are unique and every operand names one of them, 0 when not,
 * -1 on error. With ``index`` (not NULL), the body's name -> row index dict is handed over in *index when the checks
 * pass (``HloComputation.name_index``, which the cost walk reads for every computation it visits: made here for the
 * entry, whose 23,000 names took ~1.5 ms more in Python, and for a loop body as long as a lazy one).
 *
 * With the body's name table (``table``, 1-byte text) and no operand name it missed (NAME_MISSES), the table
 * answers: the names are unique unless it saw one twice, the operands of every row build_range built are names of
 * rows, and the operands of the rows Python's loop built (``built``) are looked up in it by their characters. Else
 * (or where such an operand is not a 1-byte str) a set of the names (a dict, with ``index``) and a lookup per
 * operand, as ``_finish`` checks: ~4% of gemma4's analyze and ~4% of mixtral's parse went to that set and dict for
 * bodies the table had proven but for a few rows. */
static int table_checks(PyObject *insts, const NameTable *names) {
    Py_ssize_t i, k, n = PyList_GET_SIZE(insts);
    for (i = 0; i < n; i++) {
        PyObject *operands;
        int ok = 1;
        if (names->built[i]) {
            continue;
        }
        operands = inst_slot(PyList_GET_ITEM(insts, i), 3, STR_OPERANDS);
        if (operands == NULL) {
            return -1;
        }
        if (!PyTuple_Check(operands)) {
            Py_DECREF(operands);
            return -2;
        }
        for (k = 0; ok == 1 && k < PyTuple_GET_SIZE(operands); k++) {
            PyObject *name = PyTuple_GET_ITEM(operands, k);
            if (!PyUnicode_CheckExact(name) || PyUnicode_KIND(name) != PyUnicode_1BYTE_KIND) {
                ok = -2;
            } else if (names->slots[name_slot(names, PyUnicode_1BYTE_DATA(name), PyUnicode_GET_LENGTH(name))] == 0) {
                ok = 0;
            }
        }
        Py_DECREF(operands);
        if (ok != 1) {
            return ok;
        }
    }
    return 1;
}

static int body_checks(PyObject *insts, PyObject *rows, PyObject **index, const NameTable *table) {
    Py_ssize_t i, k, n = PyList_GET_SIZE(insts);
    int ok = 1, proven = 0;
    PyObject *names;
    if (table != NULL && table->rows != NULL && NAME_MISSES == 0) {
        if (table->duplicate) {
            return 0;
        }
        ok = table_checks(insts, table);
        if (ok != -2) {
            if (ok != 1 || index == NULL) {
                return ok;
            }
            proven = 1;
        }
        ok = 1;
    }
    names = index != NULL ? _PyDict_NewPresized(n) : PySet_New(NULL);
    if (names == NULL) {
        return -1;
    }
    for (i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(PyList_GET_ITEM(rows, i), 2);
        int r;
        if (index != NULL) {
            PyObject *at = PyLong_FromSsize_t(i);
            r = at == NULL ? -1 : PyDict_SetDefault(names, name, at) == NULL ? -1 : 0;
            Py_XDECREF(at);
        } else {
            r = PySet_Add(names, name);
        }
        if (r < 0) {
            Py_DECREF(names);
            return -1;
        }
    }
    if ((index != NULL ? PyDict_GET_SIZE(names) : PySet_GET_SIZE(names)) != n) {
        ok = 0;
    }
    for (i = 0; ok && !proven && i < n; i++) {
        PyObject *operands = inst_slot(PyList_GET_ITEM(insts, i), 3, STR_OPERANDS);
        if (operands == NULL) {
            Py_DECREF(names);
            return -1;
        }
        if (!PyTuple_Check(operands)) {
            ok = 0;
        }
        for (k = 0; ok && k < PyTuple_GET_SIZE(operands); k++) {
            int r = index != NULL ? PyDict_Contains(names, PyTuple_GET_ITEM(operands, k))
                                  : PySet_Contains(names, PyTuple_GET_ITEM(operands, k));
            if (r < 0) {
                Py_DECREF(operands);
                Py_DECREF(names);
                return -1;
            }
            ok = r;
        }
        Py_DECREF(operands);
    }
    if (ok && index != NULL) {
        *index = names;
    } else {
        Py_DECREF(names);
    }
    return ok;
}

typedef struct {
    long number;
    Py_ssize_t at; /* (its place in the body: the tie-break that makes qsort's order a stable sort's) */
    PyObject *inst;
} NumberedParameter;

static int by_number(const void *a, const void *b) {
    const NumberedParameter *x = a, *y = b;
    if (x->number != y->number) {
        return x->number < y->number ? -1 : 1;
    }
    return x->at < y->at ? -1 : x->at > y->at;
}

/* The parameters' shapes, by parameter number (``_computation_end``: a stable sort of params); NULL on error. */
static PyObject *parameter_shapes(PyObject *params) {
    Py_ssize_t n = PyList_GET_SIZE(params), i;
    NumberedParameter *order;
    PyObject *out = NULL;
    int sorted = 1;
    order = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(NumberedParameter));
    if (order == NULL) {
        return PyErr_NoMemory();
    }
    for (i = 0; i < n; i++) {
        PyObject *inst = PyList_GET_ITEM(params, i), *num = inst_slot(inst, 8, STR_PARAMETER_NUMBER);
        long v;
        if (num == NULL) {
            goto done;
        }
        v = PyLong_AsLong(num);
        Py_DECREF(num);
        if (v == -1 && PyErr_Occurred()) {
            goto done;
        }
        order[i].number = v;
        order[i].at = i;
        order[i].inst = inst;
        sorted = sorted && (i == 0 || order[i - 1].number <= v);
    }
    if (!sorted) { /* (an entry may print thousands of parameters in another order: gemma4's) */
        qsort(order, (size_t)n, sizeof(NumberedParameter), by_number);
    }
    out = PyTuple_New(n);
    if (out == NULL) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        PyObject *shape = inst_slot(order[i].inst, 2, STR_SHAPE);
        if (shape == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyTuple_SET_ITEM(out, i, shape);
    }
done:
    PyMem_Free(order);
    return out;
}

/* The first line from `a` (a line start) that starts with '}', its position, with the number of lines before it
 * in *lines; -1 when there is none. Found without reading the lines. */
static Py_ssize_t close_line(int kind, const void *data, Py_ssize_t a, Py_ssize_t length, Py_ssize_t *lines) {
    Py_ssize_t e;
    *lines = 0;
    while (a < length && CH(a) != '}') {
        ++*lines;
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *nl = memchr((const Py_UCS1 *)data + a, '\n', (size_t)(length - a));
            e = nl == NULL ? length : nl - (const Py_UCS1 *)data;
        } else {
            for (e = a; e < length && CH(e) != '\n'; e++) {
            }
        }
        a = e + 1;
    }
    return a < length ? a : -1;
}

/* How the body's closing line at `stop` ends it, as ``_body`` reads it: the position after that line, and whether
 * it is the plain "}\n" (*plain); -1 for any other close (Python's). A close followed by a
 * comment (``} // name``, as XLA prints a module before optimization) ends at its line's end when the next
 * thing after it is not a ',' (attributes of the computation: Python's). */
static Py_ssize_t close_end(int kind, const void *data, Py_ssize_t stop, Py_ssize_t length, int *plain) {
    Py_ssize_t j = stop + 1;
    *plain = j < length && CH(j) == '\n';
    if (*plain) {
        return j + 1;
    }
    while (j < length && (CH(j) == ' ' || CH(j) == '\t')) {
        j++;
    }
    if (j + 1 >= length || CH(j) != '/' || CH(j + 1) != '/') {
        return -1;
    }
    while (j < length && CH(j) != '\n') {
        j++;
    }
    if (j >= length) {
        return -1;
    }
    {
        Py_ssize_t k = j + 1;
        Py_UCS4 c = 0;
        while (k < length && ((c = CH(k)) == ' ' || c == '\t' || c == '\r' || c == '\n')) {
            k++;
        }
        if (k < length && (c == ',' || c == '/')) {
            return -1; /* (attributes after the close, or a comment that may hide them) */
        }
    }
    return j + 1;
}

/* The computation's name, opcode and shape columns (``HloComputation._names``, ``_opcodes``, ``_shapes``, else made
 * from its instructions on first use) from the rows its instructions were built from: the row's name, opcode, and
 * the shape ``shapes`` holds for its shape text, as both build_rows and Python's loop take them. -1 on error. */
static int set_columns(PyObject *comp, PyObject *rows, PyObject *shapes) {
    Py_ssize_t i, n = PyList_GET_SIZE(rows);
    PyObject *names = PyTuple_New(n), *opcodes = PyTuple_New(n), *shapes_of = PyTuple_New(n);
    int r = -1;
    if (names == NULL || opcodes == NULL || shapes_of == NULL) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i), *shape = PyDict_GetItemWithError(shapes, PyTuple_GET_ITEM(row, 3));
        if (shape == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_KeyError, "read_computations: a shape text left out of shapes");
            }
            goto done;
        }
        Py_INCREF(PyTuple_GET_ITEM(row, 2));
        PyTuple_SET_ITEM(names, i, PyTuple_GET_ITEM(row, 2));
        Py_INCREF(PyTuple_GET_ITEM(row, 4));
        PyTuple_SET_ITEM(opcodes, i, PyTuple_GET_ITEM(row, 4));
        Py_INCREF(shape);
        PyTuple_SET_ITEM(shapes_of, i, shape);
    }
    r = (PyObject_SetAttr(comp, STR_NAMES, names) < 0 || PyObject_SetAttr(comp, STR_OPCODES, opcodes) < 0
         || PyObject_SetAttr(comp, STR_SHAPES, shapes_of) < 0) ? -1 : 0;
done:
    Py_XDECREF(names);
    Py_XDECREF(opcodes);
    Py_XDECREF(shapes_of);
    return r;
}

/* Whether a header's parameter list, from `j` (just after its '(') to the line's end `e`, is one parameter of a
 * tuple shape -- ``(p: (s32[], f32[8]{0}))`` --, as a while loop's body and condition read (XLA gives a fusion its
 * operands' arrays as parameters): such a body is read here however long, since every cost walk builds it
 * (``_hlo_text._not_fused`` makes the same call from a body's rows, for the bodies handed back). */
static int one_tuple_parameter(int kind, const void *data, Py_ssize_t j, Py_ssize_t e) {
    Py_ssize_t depth = 0;
    while (j < e && CH(j) != ':' && CH(j) != ',' && CH(j) != '(' && CH(j) != ')') {
        j++;
    }
    if (j >= e || CH(j) != ':') {
        return 0;
    }
    j++;
    while (j < e && (CH(j) == ' ' || CH(j) == '\t')) {
        j++;
    }
    if (j >= e || CH(j) != '(') {
        return 0;
    }
    for (; j < e; j++) { /* to the tuple's closing ')' (comments and layouts hold no parenthesis) */
        Py_UCS4 c = CH(j);
        if (c == '(') {
            depth++;
        } else if (c == ')' && --depth == 0) {
            break;
        }
    }
    if (j >= e) {
        return 0;
    }
    j++;
    while (j < e && (CH(j) == ' ' || CH(j) == '\t')) {
        j++;
    }
    return j < e && CH(j) == ')';
}

/* One computation from its header line [a, e) (src[e] == '\n', on line `line`): 1 with it appended to out and
 * *after / *after_line set, 0 when it is left to Python, -1 on error. */
static int read_one(PyObject *src, int kind, const void *data, Py_ssize_t length, Py_ssize_t a, Py_ssize_t e,
                    Py_ssize_t line, Py_ssize_t max_lines, PyObject *const *args, StringTable *strings,
                    Py_ssize_t *after, Py_ssize_t *after_line) {
    PyObject *shapes = args[4], *parse_shape = args[5], *known = args[6], *never_calls = args[7], *new = args[8],
             *decoder = args[9], *no_calls = args[10], *call_keys = args[11], *roles = args[12],
             *new_computation = args[13], *out = args[14], *rows_into = args[15];
    PyObject *rows = NULL, *insts = NULL, *params = NULL, *root = NULL, *name = NULL, *root_name, *tuple = NULL,
             *shapes_of = NULL, *ln = NULL, *comp = NULL, *index = NULL;
    NameTable names = {NULL, 0, NULL, 0, NULL};
    Py_ssize_t name_a, name_b, end, stop, n, stop_row, after_close;
    int is_entry, plain, r, result = -1;
    if (e - a >= 2 && CH(e - 2) == ' ' && CH(e - 1) == '{'
        && match_header(kind, data, a, e, &is_entry, &name_a, &name_b, &end)) {
        r = (int)PyUnicode_Find(src, STR_ARROW, end, e, 1) >= 0;
        if (PyErr_Occurred()) {
            return -1;
        }
    } else {
        r = 0;
    }
    if (!r && !match_brace_header(kind, data, a, e, &is_entry, &name_a, &name_b)) {
        return 0;
    }
    stop = close_line(kind, data, e + 1, length, &n);
    if (stop < 0 || (after_close = close_end(kind, data, stop, length, &plain)) < 0
        || (plain && !is_entry && n >= max_lines && !(r && one_tuple_parameter(kind, data, end, e)))) {
        return 0; /* (a long body closed by "}\n", not a loop's: _block keeps it as a LazyBody, or builds it) */
    }
    rows = PyList_New(0);
    if (rows == NULL) {
        return -1;
    }
    /* (1-byte text, nearly always, read by a scan compiled for it: no test of the kind a character) */
    if ((kind == PyUnicode_1BYTE_KIND ? scan(PyUnicode_1BYTE_KIND, data, src, e + 1, length, rows, strings)
                                      : scan(kind, data, src, e + 1, length, rows, NULL))
        != stop) { /* (-2: an error; -1: a row Python reads) */
        result = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    r = fill_shapes(rows, shapes, parse_shape);
    if (r <= 0) {
        result = r;
        goto done;
    }
    insts = PyList_New(0);
    params = PyList_New(0);
    root = PyList_New(1);
    if (insts == NULL || params == NULL || root == NULL) {
        goto done;
    }
    Py_INCREF(STR_EMPTY);
    PyList_SET_ITEM(root, 0, STR_EMPTY);
    if (kind == PyUnicode_1BYTE_KIND) { /* (the rows' names are substrings of src: 1-byte too) */
        if (name_table_build(&names, rows) < 0) {
            goto done;
        }
        ACTIVE_NAMES = &names;
    }
    NAME_MISSES = 0;
    stop_row = build_range(rows, 0, line + 1, shapes, known, never_calls, new, decoder, insts, no_calls, params, root,
                           call_keys, roles, names.rows != NULL ? &names : NULL);
    if (stop_row < 0) {
        goto done;
    }
    name_table_built(&names, 0, stop_row);
    if (stop_row < n) { /* the rows build_rows leaves: Python's loop builds them, from there on */
        PyObject *more = PyLong_FromSsize_t(stop_row), *built;
        if (more == NULL) {
            goto done;
        }
        ln = PyLong_FromSsize_t(line + 1);
        if (ln == NULL) {
            Py_DECREF(more);
            goto done;
        }
        {
            PyObject *rest_args[] = {rows, ln, more, insts, params, root};
            built = PyObject_Vectorcall(rows_into, rest_args, 6, NULL);
        }
        Py_DECREF(more);
        Py_CLEAR(ln);
        if (built == NULL) {
            goto done;
        }
        r = PyObject_IsTrue(built);
        Py_DECREF(built);
        if (r <= 0) {
            result = r;
            goto done;
        }
    }
    /* (the index of the entry, and of a long body read here rather than kept lazy -- a loop's, which the cost walk
     * visits as it does the entry --: made with the checks, presized, not again in Python) */
    r = body_checks(insts, rows, is_entry || n >= max_lines ? &index : NULL, names.rows != NULL ? &names : NULL);
    if (r <= 0) {
        result = r;
        goto done;
    }
    root_name = PyList_GET_ITEM(root, 0);
    if (PyUnicode_GET_LENGTH(root_name) == 0) {
        root_name = PyTuple_GET_ITEM(PyList_GET_ITEM(rows, n - 1), 2);
    }
    shapes_of = parameter_shapes(params);
    if (shapes_of == NULL) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear(); /* a parameter number beyond a C long: Python's */
            result = 0;
        }
        goto done;
    }
    name = PyUnicode_Substring(src, name_a, name_b);
    tuple = name == NULL ? NULL : PyList_AsTuple(insts);
    ln = tuple == NULL ? NULL : PyLong_FromSsize_t(line);
    if (ln == NULL) {
        goto done;
    }
    {
        PyObject *call_args[] = {name, tuple, root_name, is_entry ? Py_True : Py_False, shapes_of, ln};
        comp = PyObject_Vectorcall(new_computation, call_args, 6, NULL);
    }
    if (comp == NULL || set_columns(comp, rows, shapes) < 0
        || (index != NULL && PyObject_SetAttr(comp, STR_INDEX, index) < 0) || PyList_Append(out, comp) < 0) {
        goto done;
    }
    *after = after_close;
    *after_line = line + 1 + n + 1;
    result = 1;
done:
    ACTIVE_NAMES = NULL;
    name_table_free(&names);
    Py_XDECREF(rows);
    Py_XDECREF(insts);
    Py_XDECREF(params);
    Py_XDECREF(root);
    Py_XDECREF(name);
    Py_XDECREF(tuple);
    Py_XDECREF(shapes_of);
    Py_XDECREF(ln);
    Py_XDECREF(comp);
    Py_XDECREF(index);
    return result;
}

static PyObject *read_computations(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *src;
    Py_ssize_t pos, line, max_lines, length;
    int kind;
    const void *data;
    StringTable strings = {0, 0, NULL, NULL};
    (void)self;
    if (nargs != 16 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[4]) || !PyAnySet_Check(args[6])
        || !PyAnySet_Check(args[7]) || !PyTuple_Check(args[11]) || !PyDict_Check(args[12])
        || !PyList_Check(args[14])) {
        PyErr_SetString(PyExc_TypeError, "read_computations(src: str, pos: int, line: int, max_lines: int, "
                                         "shapes: dict, parse_shape, known: set, never_calls: set, new, decoder, "
                                         "no_calls, call_keys: tuple, roles: dict, new_computation, out: list, "
                                         "rows_into)");
        return NULL;
    }
    if (check_call_keys(args[11]) < 0 || init_constants() < 0) {
        return NULL;
    }
    if (STR_OPERANDS == NULL) {
        STR_OPERANDS = PyUnicode_InternFromString("operands");
        STR_PARAMETER_NUMBER = PyUnicode_InternFromString("parameter_number");
        STR_SHAPE = PyUnicode_InternFromString("shape");
        STR_ARROW = PyUnicode_FromString(") -> ");
        STR_NAMES = PyUnicode_InternFromString("_names");
        STR_OPCODES = PyUnicode_InternFromString("_opcodes");
        STR_SHAPES = PyUnicode_InternFromString("_shapes");
        STR_INDEX = PyUnicode_InternFromString("_index");
        if (STR_OPERANDS == NULL || STR_PARAMETER_NUMBER == NULL || STR_SHAPE == NULL || STR_ARROW == NULL
            || STR_NAMES == NULL || STR_OPCODES == NULL || STR_SHAPES == NULL || STR_INDEX == NULL) {
            return NULL;
        }
    }
    src = args[0];
    pos = PyLong_AsSsize_t(args[1]);
    line = PyLong_AsSsize_t(args[2]);
    max_lines = PyLong_AsSsize_t(args[3]);
    if ((pos == -1 || line == -1 || max_lines == -1) && PyErr_Occurred()) {
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(src) < 0) {
        return NULL;
    }
#endif
    length = PyUnicode_GET_LENGTH(src);
    kind = PyUnicode_KIND(src);
    data = PyUnicode_DATA(src);
    if (pos < 0 || pos > length) {
        PyErr_Format(PyExc_ValueError, "read_computations(): pos=%zd is outside the text", pos);
        return NULL;
    }
    for (;;) {
        Py_ssize_t a = pos, a_line = line, e, after = pos, after_line = line;
        Py_UCS4 c = 0;
        int r;
        while (a < length && ((c = CH(a)) == ' ' || c == '\t' || c == '\r' || c == '\n')) {
            if (c == '\n') {
                a_line++;
            }
            a++;
        }
        if (a >= length || c == 'H') { /* the end, or maybe an ``HloModule`` header: Python's */
            break;
        }
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *nl = memchr((const Py_UCS1 *)data + a, '\n', (size_t)(length - a));
            e = nl == NULL ? -1 : nl - (const Py_UCS1 *)data;
        } else {
            e = PyUnicode_FindChar(src, '\n', a, length, 1);
            if (e == -2) {
                string_table_free(&strings);
                return NULL;
            }
        }
        if (e < 0) {
            break;
        }
        r = read_one(src, kind, data, length, a, e, a_line, max_lines, args,
                     kind == PyUnicode_1BYTE_KIND ? &strings : NULL, &after, &after_line);
        if (r < 0) {
            string_table_free(&strings);
            return NULL;
        }
        if (r == 0) {
            break;
        }
        pos = after;
        line = after_line;
    }
    string_table_free(&strings);
    return Py_BuildValue("(nn)", pos, line);
}

/* called_names(bodies) -> set | None: the names every instruction of bodies (tuples of instructions) calls, the
 * items of the tuples its ``called_computations`` dict holds: what ``_hlo_text._Parser._finish`` checks against the
 * module's computations, its ``py_called_names`` (the specification) in one pass, each dict read from its slot.
 * None when an instruction holds anything else there (not a dict, a value not a tuple): Python's then. */
static PyObject *STR_CALLED_COMPUTATIONS;

static PyObject *called_names(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *bodies, *out;
    Py_ssize_t b, i;
    (void)self;
    if (nargs != 1 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "called_names(bodies: list[tuple])");
        return NULL;
    }
    if (STR_CALLED_COMPUTATIONS == NULL
        && (STR_CALLED_COMPUTATIONS = PyUnicode_InternFromString("called_computations")) == NULL) {
        return NULL;
    }
    bodies = args[0];
    out = PySet_New(NULL);
    if (out == NULL) {
        return NULL;
    }
    for (b = 0; b < PyList_GET_SIZE(bodies); b++) {
        PyObject *body = PyList_GET_ITEM(bodies, b);
        if (!PyTuple_Check(body)) {
            goto python;
        }
        for (i = 0; i < PyTuple_GET_SIZE(body); i++) {
            PyObject *calls = inst_slot(PyTuple_GET_ITEM(body, i), 4, STR_CALLED_COMPUTATIONS), *role, *called;
            Py_ssize_t pos = 0, k;
            if (calls == NULL) {
                Py_DECREF(out);
                return NULL;
            }
            if (!PyDict_Check(calls)) {
                Py_DECREF(calls);
                goto python;
            }
            while (PyDict_Next(calls, &pos, &role, &called)) {
                if (!PyTuple_Check(called)) {
                    Py_DECREF(calls);
                    goto python;
                }
                for (k = 0; k < PyTuple_GET_SIZE(called); k++) {
                    if (PySet_Add(out, PyTuple_GET_ITEM(called, k)) < 0) {
                        Py_DECREF(calls);
                        Py_DECREF(out);
                        return NULL;
                    }
                }
            }
            Py_DECREF(calls);
        }
    }
    return out;
python:
    Py_DECREF(out);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"block_rows", (PyCFunction)(void (*)(void))block_rows, METH_FASTCALL,
     "block_rows(src, pos) -> tuple[int, list[tuple[str, ...]]] | None\n\n"
     "The position of the first line from pos that starts with '}' and the rows of BLOCK_LINE of the lines\n"
     "before it, or None; see hloscope.parsers._block_rows.py_block_rows, which this equals."},
    {"set_instruction_class", (PyCFunction)(void (*)(void))set_instruction_class, METH_FASTCALL,
     "set_instruction_class(cls, nothing_decoded) -> bool\n\n"
     "Make instances of cls (hloscope.hlo.HloInstruction) directly, its slots filled as its __init__ fills\n"
     "them, where build_rows is given cls as new; False (and cls called) when its slots are not those."},
    {"build_rows", (PyCFunction)(void (*)(void))build_rows, METH_FASTCALL,
     "build_rows(rows, start, line, shapes, known, never_calls, new, decoder, out, no_calls, params, root,\n"
     "           call_keys, roles) -> int\n\n"
     "Build the common rows of hloscope.parsers._hlo_bodies.BodyReader._rows from rows[start] on (appended to\n"
     "out); return the index of the first row left to Python."},
    {"read_computations", (PyCFunction)(void (*)(void))read_computations, METH_FASTCALL,
     "read_computations(src, pos, line, max_lines, shapes, parse_shape, known, never_calls, new, decoder,\n"
     "                  no_calls, call_keys, roles, new_computation, out) -> tuple[int, int]\n\n"
     "Read whole computations printed as XLA prints them from pos on (appended to out) until the first thing\n"
     "left to hloscope.parsers._hlo_text._Parser; return the position and line after the last one read."},
    {"called_names", (PyCFunction)(void (*)(void))called_names, METH_FASTCALL,
     "called_names(bodies) -> set | None\n\n"
     "The names the instructions of bodies (tuples of instructions) call, or None where one holds other than a\n"
     "dict of tuples; see hloscope.parsers._hlo_text.py_called_names, which this equals."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_block_scan",
    "Compiled scanner of one-line HLO instructions and builder of their common rows "
    "(hloscope.parsers._block_rows, _hlo_bodies).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__block_scan(void) { return PyModule_Create(&module); }
