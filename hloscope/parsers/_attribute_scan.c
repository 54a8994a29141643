/* The compiled form of hloscope.parsers._attribute_value.py_attribute_value: one ``key=value`` of an
 * instruction's attribute text, read without decoding the rest; and of py_metadata_fields: the fields of a
 * ``metadata={...}`` value.
 *
 * ``attribute_value(text, key)`` returns exactly what the pure-Python ``py_attribute_value`` returns (that
 * function's docstring is the specification; tests/parsers/test_attribute_value.py holds the two equal on every
 * fixture and corpus text and on mutated texts): ``(status, value)`` with status 0 (a full decode must tell), 1
 * (the value, "" for an absent key) or 2 (the value, if a full decode already read it).
 *
 * The Python function's regexes, as read here: ``ATTRIBUTE_SPLIT`` is ``,[ \t]*[A-Za-z_][\w.\-]*=`` (``\w``:
 * Unicode letters, digits and '_', as ``re`` reads it on ``str``), and ``STRING`` is ``"[^"\\]*(?:\\.[^"\\]*)*"``
 * (a backslash escapes the next character, line breaks included); ``str.strip`` strips Unicode white space.
 *
 * Built as an optional extension (setup.py): when it is missing, hloscope uses the Python function. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#if defined(__GNUC__)
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE static inline
#endif

#define CH(i) PyUnicode_READ(kind, data, (i))

ALWAYS_INLINE int is_word(Py_UCS4 c) { return c == '_' || (c < 128 ? Py_ISALNUM(c) : Py_UNICODE_ISALNUM(c)); }

/* The end of ``,[ \t]*[A-Za-z_][\w.\-]*=`` matched at i (the index after its '='), or -1. */
ALWAYS_INLINE Py_ssize_t split_at(int kind, const void *data, Py_ssize_t i, Py_ssize_t n) {
    Py_UCS4 c;
    if (i >= n || CH(i) != ',') {
        return -1;
    }
    i++;
    while (i < n && ((c = CH(i)) == ' ' || c == '\t')) {
        i++;
    }
    if (i >= n) {
        return -1;
    }
    c = CH(i);
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_')) {
        return -1;
    }
    i++;
    while (i < n && ((c = CH(i)) == '.' || c == '-' || is_word(c))) {
        i++;
    }
    return (i < n && CH(i) == '=') ? i + 1 : -1;
}

/* Count c if it is a bracket: counts[0..2] for {} () [] (an opening adds one, a closing takes one away). */
ALWAYS_INLINE void tally(Py_UCS4 c, Py_ssize_t *counts) {
    switch (c) {
    case '{': counts[0]++; break;
    case '}': counts[0]--; break;
    case '(': counts[1]++; break;
    case ')': counts[1]--; break;
    case '[': counts[2]++; break;
    case ']': counts[2]--; break;
    default: break;
    }
}

/* The first ch in [from, to), or -1 (memchr on one-byte text). */
ALWAYS_INLINE Py_ssize_t find_char(int kind, const void *data, Py_ssize_t from, Py_ssize_t to, Py_UCS4 ch) {
    Py_ssize_t i;
    if (from >= to) {
        return -1;
    }
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        const Py_UCS1 *p = memchr(d + from, (int)ch, (size_t)(to - from));
        return p == NULL ? -1 : p - d;
    }
    for (i = from; i < to; i++) {
        if (CH(i) == ch) {
            return i;
        }
    }
    return -1;
}

/* The first ", <key>=" in [from, n), or -1. */
ALWAYS_INLINE Py_ssize_t find_probe(int kind, const void *data, Py_ssize_t from, Py_ssize_t n, int kkind,
                                    const void *kdata, Py_ssize_t klen) {
    Py_ssize_t i, k, last = n - klen - 3; /* the ',' of a probe starts at most here */
    for (i = from; i <= last; i++) {
        i = find_char(kind, data, i, last + 1, ',');
        if (i < 0) {
            return -1;
        }
        if (CH(i + 1) != ' ' || CH(i + 2 + klen) != '=') {
            continue;
        }
        for (k = 0; k < klen && CH(i + 2 + k) == PyUnicode_READ(kkind, kdata, k); k++) {
        }
        if (k == klen) {
            return i;
        }
    }
    return -1;
}

/* The read of py_attribute_value on text [0, n): its status, and the value's span [*a, *b). */
ALWAYS_INLINE int scan(int kind, const void *data, Py_ssize_t n, int kkind, const void *kdata, Py_ssize_t klen,
                       Py_ssize_t *a_out, Py_ssize_t *b_out) {
    Py_ssize_t at, start, end, i, a, b;
    Py_ssize_t counts[3] = {0, 0, 0}; /* {} () [] */
    Py_UCS4 c, first;
    *a_out = *b_out = 0;
    at = find_probe(kind, data, 0, n, kkind, kdata, klen);
    if (at < 0) {
        /* absent: known ("") unless the key occurs otherwise (inside a string, without ", " before it, ...) */
        for (i = 0; i + klen <= n; i++) {
            Py_ssize_t k;
            for (k = 0; k < klen && CH(i + k) == PyUnicode_READ(kkind, kdata, k); k++) {
            }
            if (k == klen) {
                return 0;
            }
        }
        return 1;
    }
    start = at + klen + 3;
    if (find_probe(kind, data, start, n, kkind, kdata, klen) >= 0) {
        return 0; /* the key twice */
    }
    c = CH(n - 1);
    if (c == ',' || c == ' ' || c == '\t' || split_at(kind, data, 0, n) < 0) {
        return 0;
    }
    if (find_char(kind, data, 0, n, '\n') >= 0) {
        return 0;
    }
    for (i = find_char(kind, data, 0, n, '/'); i >= 0; i = find_char(kind, data, i + 1, n, '/')) {
        if (i + 1 < n && (CH(i + 1) == '/' || CH(i + 1) == '*')) {
            return 0; /* a comment */
        }
    }
    for (i = 0; i < at; i++) {
        c = CH(i);
        if (c == '"') {
            return 0;
        }
        tally(c, counts);
    }
    if (counts[0] || counts[1] || counts[2]) {
        return 0; /* brackets unbalanced before the key */
    }
    /* The value: up to the next ", name=" (ATTRIBUTE_SPLIT.search from start), stripped. */
    end = n;
    for (i = find_char(kind, data, start, n, ','); i >= 0; i = find_char(kind, data, i + 1, n, ',')) {
        if (split_at(kind, data, i, n) >= 0) {
            end = i;
            break;
        }
    }
    a = start;
    b = end;
    while (a < b && Py_UNICODE_ISSPACE(CH(a))) {
        a++;
    }
    while (b > a && Py_UNICODE_ISSPACE(CH(b - 1))) {
        b--;
    }
    if (a == b) {
        return 0;
    }
    *a_out = a;
    *b_out = b;
    first = CH(a);
    if (first == '{') {
        if (CH(b - 1) != '}') {
            return 2;
        }
    } else if (first == '"' || (b - a >= 5 && CH(a) == 'm' && CH(a + 1) == 'e' && CH(a + 2) == 's'
                                 && CH(a + 3) == 'h' && CH(a + 4) == '[')) {
        return 2;
    } else {
        for (i = a; i < b; i++) {
            c = CH(i);
            if (c == ' ' || c == '\t') {
                return 2;
            }
        }
    }
    /* The value without its strings (STRING.sub("", value)): a string left open leaves a '"' behind. */
    for (i = a; i < b; i++) {
        c = CH(i);
        if (c == '"') {
            i++;
            for (;;) { /* to the closing '"', a backslash escaping the character after it */
                Py_ssize_t q = find_char(kind, data, i, b, '"');
                Py_ssize_t e = find_char(kind, data, i, q < 0 ? b : q, '\\');
                if (e >= 0) {
                    i = e + 2;
                    continue;
                }
                if (q < 0) {
                    return 2; /* not closed */
                }
                i = q;
                break;
            }
        } else {
            tally(c, counts);
        }
    }
    return (counts[0] || counts[1] || counts[2]) ? 2 : 1;
}

static PyObject *attribute_value(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *text, *key, *value;
    Py_ssize_t n, klen, a, b;
    int kind, kkind, status;
    const void *data, *kdata;
    (void)self;
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "attribute_value(text: str, key: str)");
        return NULL;
    }
    text = args[0];
    key = args[1];
    n = PyUnicode_GET_LENGTH(text);
    kind = PyUnicode_KIND(text);
    data = PyUnicode_DATA(text);
    klen = PyUnicode_GET_LENGTH(key);
    kkind = PyUnicode_KIND(key);
    kdata = PyUnicode_DATA(key);
    /* (the kind of text a constant in each call: one-byte text, XLA's, reads a byte a character) */
    if (kind == PyUnicode_1BYTE_KIND) {
        status = scan(PyUnicode_1BYTE_KIND, data, n, kkind, kdata, klen, &a, &b);
    } else {
        status = scan(kind, data, n, kkind, kdata, klen, &a, &b);
    }
    value = PyUnicode_Substring(text, a, b);
    if (value == NULL) {
        return NULL;
    }
    return Py_BuildValue("(iN)", status, value);
}

/* The fields of a metadata={...} value that Metadata holds (py_metadata_fields), in this order. */
static const char *const METADATA_KEYS[] = {"op_type", "op_name", "source_file", "source_line", "stack_frame_id"};
#define N_METADATA_KEYS 5

/* Which of METADATA_KEYS the key [a, b) is, or -1. */
ALWAYS_INLINE int metadata_key(int kind, const void *data, Py_ssize_t a, Py_ssize_t b) {
    int k;
    for (k = 0; k < N_METADATA_KEYS; k++) {
        const char *name = METADATA_KEYS[k];
        Py_ssize_t i = 0;
        while (a + i < b && name[i] != '\0' && CH(a + i) == (Py_UCS4)(unsigned char)name[i]) {
            i++;
        }
        if (a + i == b && name[i] == '\0') {
            return k;
        }
    }
    return -1;
}

/* BRACED_FIELD.findall over [0, n): ``([A-Za-z_]\w*)=("[^"\\]*(?:\\.[^"\\]*)*"|[^\s,}]+)`` tried at each position,
 * the next try after a match at its end, after a failure one character on. Fills the value spans of the
 * metadata keys (a key repeated: its last value, as a dict keeps it). */
ALWAYS_INLINE void metadata_scan(int kind, const void *data, Py_ssize_t n, Py_ssize_t *starts, Py_ssize_t *ends) {
    Py_ssize_t pos = 0, i, j, value_end;
    Py_UCS4 c;
    while (pos < n) {
        c = CH(pos);
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_')) {
            pos++;
            continue;
        }
        i = pos + 1;
        while (i < n && is_word(CH(i))) {
            i++;
        }
        if (i >= n || CH(i) != '=') {
            pos++; /* (a shorter key is followed by a word character, not '=') */
            continue;
        }
        value_end = -1;
        j = i + 1;
        if (j < n && CH(j) == '"') { /* a string: any character but '"' and '\', or '\' and one not '\n' */
            j++;
            while (j < n && (c = CH(j)) != '"') {
                if (c == '\\') {
                    if (j + 1 >= n || CH(j + 1) == '\n') {
                        break;
                    }
                    j++;
                }
                j++;
            }
            if (j < n && CH(j) == '"') {
                value_end = j + 1;
            }
        }
        if (value_end < 0) { /* else a run of characters that are not white space, ',' or '}' */
            j = i + 1;
            while (j < n && (c = CH(j)) != ',' && c != '}' && !Py_UNICODE_ISSPACE(c)) {
                j++;
            }
            if (j == i + 1) {
                pos++;
                continue;
            }
            value_end = j;
        }
        {
            int k = metadata_key(kind, data, pos, i);
            if (k >= 0) {
                starts[k] = i + 1;
                ends[k] = value_end;
            }
        }
        pos = value_end;
    }
}

static PyObject *metadata_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *text, *out;
    Py_ssize_t starts[N_METADATA_KEYS], ends[N_METADATA_KEYS];
    int k, kind;
    (void)self;
    if (nargs != 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "metadata_fields(value: str)");
        return NULL;
    }
    text = args[0];
    for (k = 0; k < N_METADATA_KEYS; k++) {
        starts[k] = ends[k] = 0;
    }
    kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND) {
        metadata_scan(PyUnicode_1BYTE_KIND, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), starts, ends);
    } else {
        metadata_scan(kind, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), starts, ends);
    }
    out = PyTuple_New(N_METADATA_KEYS);
    if (out == NULL) {
        return NULL;
    }
    for (k = 0; k < N_METADATA_KEYS; k++) {
        PyObject *field = PyUnicode_Substring(text, starts[k], ends[k]);
        if (field == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, k, field);
    }
    return out;
}

static PyMethodDef methods[] = {
    {"attribute_value", (PyCFunction)(void (*)(void))attribute_value, METH_FASTCALL,
     "attribute_value(text, key) -> (status, value): see hloscope.parsers._attribute_value.py_attribute_value."},
    {"metadata_fields", (PyCFunction)(void (*)(void))metadata_fields, METH_FASTCALL,
     "metadata_fields(value) -> 5 field texts: see hloscope.parsers._attribute_value.py_metadata_fields."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_attribute_scan",
    "The compiled forms of hloscope.parsers._attribute_value.py_attribute_value and py_metadata_fields.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__attribute_scan(void) { return PyModule_Create(&module); }
