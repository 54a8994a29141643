/* A table of a report printed as ``json.dumps(rows, indent=1, allow_nan=False)`` prints it, from its columns
 * (hloscope.result._json_text._emit_table is the specification and the fallback; tests/report/
 * test_json_table.py holds the two equal).
 *
 * table_text(key_texts, columns, level, as_bytes=False) -> str | bytes | None
 *
 * key_texts: per column, its key as JSON text followed by ": " (``encode_basestring_ascii(key) + ": "``);
 * columns: one per key, each a list, a float64 buffer (a numpy array: its values, NaN and infinities printed
 * as null) or a coded column ``(codes, values)`` -- an int64 buffer of one code a row and the list of values
 * the codes index (row ``i`` holds ``values[codes[i]]``: a report's column of repeated strings) --, of equal
 * length (at least one row); level: the indentation of the list's brackets. Returns the text
 * of the list of row objects: each row's cells ``key: value`` one per line at ``level + 2``, its braces at
 * ``level + 1``; as ASCII bytes with ``as_bytes`` (for a writer). A value is printed as json's C encoder prints
 * it: exact ``str`` (ASCII, escaped as ``encode_basestring_ascii``), exact ``float`` (``float.__repr__``), exact
 * ``int`` (``int.__repr__``), True, False, None, and an exact ``list`` of exact ``str`` (one item per line, as
 * ``indent=1``). Any other value, a float object that is NaN or infinite (which ``allow_nan=False`` refuses), a
 * column of another kind or length, a code out of its values' range or a key text that is not ASCII gives None
 * with no error set: the Python path then prints the table, or raises what ``json.dumps`` raises.
 *
 * Why: the ops table of a large module is 20,000-30,000 rows of 37 cells (22 MB of text for the corpus's
 * llama module); in Python each cell costs a cached lookup and two joins (0.07-0.1 s a report). Here the text
 * of a float or string value is cached by its bits or its object in a small table of its own.
 *
 * Built as an optional extension (setup.py): without it the Python path runs. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* The output: an ASCII str (or bytes) object written in place and resized as it grows (a large one is moved by
 * the C library's realloc without a copy), so the text is never copied into an object after. */
typedef struct {
    PyObject *obj;
    int bytes; /* a bytes object, else a str */
    char *data;
    Py_ssize_t len, cap;
} Buffer;

/* ``b->obj`` resized to ``size`` characters; on failure it is released and NULL. */
static int resize(Buffer *b, Py_ssize_t size) {
    if (b->bytes) {
        return _PyBytes_Resize(&b->obj, size); /* (releases it on failure) */
    }
    if (PyUnicode_Resize(&b->obj, size) < 0) { /* (leaves it as it was on failure) */
        Py_CLEAR(b->obj);
        return -1;
    }
    return 0;
}

/* Ask the kernel to back the whole 2 MiB pages of a large buffer ([data, data + size)) with huge pages, where it
 * does so on request (Linux, transparent huge pages in ``madvise`` mode): a large report's text is tens of MB,
 * written once, and its first touch of each 4 KiB page was a page fault -- measured 4.7 us each on the 2-core VM
 * of benchmarks/README.md, ~20 ms of a report of the corpus's gemma4 module (numpy advises its arrays of 4 MiB or
 * more the same way). Advice only: nothing changes where the kernel declines. */
static void huge_pages(char *data, Py_ssize_t size) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t start = ((uintptr_t)data + huge - 1) & ~(huge - 1);
    uintptr_t end = ((uintptr_t)data + (uintptr_t)size) & ~(huge - 1);
    if (size >= (Py_ssize_t)(4 * huge) && end > start) {
        (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
    }
#else
    (void)data;
    (void)size;
#endif
}

/* Room for ``more`` characters past ``b->len``: the buffer at least doubled (or made, 4096 at first). */
static int grow(Buffer *b, Py_ssize_t more) {
    Py_ssize_t need = b->len + more, cap = b->cap ? b->cap : 4096;
    while (cap < need) {
        cap *= 2;
    }
    if (b->obj == NULL) {
        b->obj = b->bytes ? PyBytes_FromStringAndSize(NULL, cap) : PyUnicode_New(cap, 127);
        if (b->obj == NULL) {
            return -1;
        }
    } else if (resize(b, cap) < 0) {
        return -1;
    }
    b->data = b->bytes ? PyBytes_AS_STRING(b->obj) : PyUnicode_DATA(b->obj);
    b->cap = cap;
    huge_pages(b->data, cap);
    return 0;
}

/* (inline, as put: called for every cell, twice) */
static inline int reserve(Buffer *b, Py_ssize_t more) {
    return b->len + more <= b->cap ? 0 : grow(b, more);
}

static inline int put(Buffer *b, const char *s, Py_ssize_t n) {
    if (reserve(b, n) < 0) {
        return -1;
    }
    memcpy(b->data + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

/* A newline and ``spaces`` spaces. */
static int put_pad(Buffer *b, Py_ssize_t spaces) {
    if (reserve(b, spaces + 1) < 0) {
        return -1;
    }
    b->data[b->len++] = '\n';
    memset(b->data + b->len, ' ', (size_t)spaces);
    b->len += spaces;
    return 0;
}

/* The texts printed already, by a key (a float's bits, a string's address), held in the entry itself so that a
 * hit copies from memory the cache keeps warm (copying from where the text was first printed in the output, tens
 * of MB back, cost a cache miss a cell). Direct-mapped: a colliding key replaces the entry (a miss prints the
 * value again); a text longer than an entry holds is never cached. */
#define CACHE_BITS 12
#define CACHE_SIZE (1 << CACHE_BITS)
#define TEXT_MAX 52

typedef struct {
    uint64_t key;
    int32_t len; /* 0: empty */
    char text[TEXT_MAX];
} Entry;

static Entry *slot(Entry *cache, uint64_t key) {
    return &cache[(key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - CACHE_BITS)];
}

static const char HEX[] = "0123456789abcdef";

/* ``encode_basestring_ascii(s)``: quoted, ``"`` and ``\`` escaped, \b \f \n \r \t as such, any other character
 * outside ' '..'~' as \uXXXX (a surrogate pair above U+FFFF). */
static int put_string(Buffer *b, PyObject *s) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s), i;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    char *out;
    if (PyUnicode_IS_ASCII(s)) { /* (most strings: copied at once when nothing in them is escaped) */
        const unsigned char *p = data;
        for (i = 0; i < n; i++) {
            if (p[i] < ' ' || p[i] == '"' || p[i] == '\\' || p[i] == 0x7f) {
                break;
            }
        }
        if (i == n) {
            if (reserve(b, n + 2) < 0) {
                return -1;
            }
            b->data[b->len] = '"';
            memcpy(b->data + b->len + 1, p, (size_t)n);
            b->data[b->len + n + 1] = '"';
            b->len += n + 2;
            return 0;
        }
    }
    if (reserve(b, 12 * n + 2) < 0) { /* (the longest escape of one code point: a surrogate pair) */
        return -1;
    }
    out = b->data + b->len;
    *out++ = '"';
    for (i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= ' ' && c <= '~' && c != '\\' && c != '"') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
        case '\\': *out++ = '\\'; break;
        case '"': *out++ = '"'; break;
        case '\b': *out++ = 'b'; break;
        case '\f': *out++ = 'f'; break;
        case '\n': *out++ = 'n'; break;
        case '\r': *out++ = 'r'; break;
        case '\t': *out++ = 't'; break;
        default:
            if (c >= 0x10000) {
                Py_UCS4 v = c - 0x10000, high = 0xd800 | ((v >> 10) & 0x3ff);
                *out++ = 'u';
                *out++ = HEX[(high >> 12) & 0xf];
                *out++ = HEX[(high >> 8) & 0xf];
                *out++ = HEX[(high >> 4) & 0xf];
                *out++ = HEX[high & 0xf];
                c = 0xdc00 | (v & 0x3ff);
                *out++ = '\\';
            }
            *out++ = 'u';
            *out++ = HEX[(c >> 12) & 0xf];
            *out++ = HEX[(c >> 8) & 0xf];
            *out++ = HEX[(c >> 4) & 0xf];
            *out++ = HEX[c & 0xf];
        }
    }
    *out++ = '"';
    b->len = out - b->data;
    return 0;
}

/* Remember the ``n`` characters of ``text`` as the text of ``key`` in its entry (when they fit). */
static void remember(Entry *e, uint64_t key, const char *text, Py_ssize_t n) {
    if (n <= TEXT_MAX) {
        e->key = key;
        e->len = (int32_t)n;
        memcpy(e->text, text, (size_t)n);
    }
}

/* A str's text (``put_string``) through ``strings``, keyed by its address. */
static int put_cached_string(Buffer *b, PyObject *s, Entry *strings) {
    uint64_t key = (uint64_t)(uintptr_t)s;
    Entry *e = slot(strings, key);
    Py_ssize_t at = b->len;
    if (e->len && e->key == key) {
        return put(b, e->text, e->len);
    }
    if (put_string(b, s) < 0) {
        return -1;
    }
    remember(e, key, b->data + at, b->len - at);
    return 0;
}

/* A finite double's ``float.__repr__`` through ``floats``, keyed by its bits (-0.0 apart from 0.0). */
static int put_double_text(Buffer *b, double x, Entry *floats) {
    uint64_t bits;
    Entry *e;
    char *text;
    Py_ssize_t n;
    int rc;
    memcpy(&bits, &x, sizeof bits);
    e = slot(floats, bits);
    if (e->len && e->key == bits) {
        return put(b, e->text, e->len);
    }
    text = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) {
        return -1;
    }
    n = (Py_ssize_t)strlen(text);
    remember(e, bits, text, n);
    rc = put(b, text, n);
    PyMem_Free(text);
    return rc;
}

/* The text of an ASCII str object (a key text, an int's repr). */
static int put_ascii(Buffer *b, PyObject *s) {
    return put(b, (const char *)PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s));
}

/* One cell's value at indentation ``level``: 0 printed, 1 a value this printer leaves to Python, -1 an error. */
static int put_value(Buffer *b, PyObject *v, Py_ssize_t level, Entry *floats, Entry *strings) {
    PyTypeObject *t = Py_TYPE(v);
    if (t == &PyFloat_Type) {
        return isfinite(PyFloat_AS_DOUBLE(v)) ? put_double_text(b, PyFloat_AS_DOUBLE(v), floats) : 1;
    }
    if (t == &PyUnicode_Type) {
        return put_cached_string(b, v, strings);
    }
    if (v == Py_None) {
        return put(b, "null", 4);
    }
    if (v == Py_True) {
        return put(b, "true", 4);
    }
    if (v == Py_False) {
        return put(b, "false", 5);
    }
    if (t == &PyLong_Type) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (!overflow) { /* (int.__repr__ of a value that fits in 64 bits, without making its str) */
            char digits[24], *at = digits + sizeof digits;
            unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
            do {
                *--at = (char)('0' + u % 10);
                u /= 10;
            } while (u);
            if (x < 0) {
                *--at = '-';
            }
            return put(b, at, digits + sizeof digits - at);
        }
        PyObject *text = PyLong_Type.tp_repr(v);
        int rc;
        if (text == NULL) {
            return -1;
        }
        rc = put_ascii(b, text);
        Py_DECREF(text);
        return rc;
    }
    if (t == &PyList_Type) {
        Py_ssize_t n = PyList_GET_SIZE(v), i;
        for (i = 0; i < n; i++) {
            if (Py_TYPE(PyList_GET_ITEM(v, i)) != &PyUnicode_Type) {
                return 1;
            }
        }
        if (n == 0) {
            return put(b, "[]", 2);
        }
        if (put(b, "[", 1) < 0) {
            return -1;
        }
        for (i = 0; i < n; i++) {
            if ((i && put(b, ",", 1) < 0) || put_pad(b, level + 1) < 0
                    || put_cached_string(b, PyList_GET_ITEM(v, i), strings) < 0) {
                return -1;
            }
        }
        if (put_pad(b, level) < 0 || put(b, "]", 1) < 0) {
            return -1;
        }
        return 0;
    }
    return 1;
}

/* A float of a float64 column: its text, or null where it is NaN or infinite (``_json_text.listed``). */
static int put_double(Buffer *b, double x, Entry *floats) {
    return isfinite(x) ? put_double_text(b, x, floats) : put(b, "null", 4);
}

/* Whether ``c`` is a one-dimensional C-contiguous buffer of ``nrow`` doubles (a float64 numpy array); its view
 * is held in ``view`` when so (released by the caller), no error set when not. */
static int float64_view(PyObject *c, Py_ssize_t nrow, Py_buffer *view) {
    if (PyObject_GetBuffer(c, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim == 1 && view->itemsize == 8 && view->format != NULL && strcmp(view->format, "d") == 0
            && view->shape[0] == nrow) {
        return 1;
    }
    PyBuffer_Release(view);
    return 0;
}

/* Whether ``c`` is a coded column of ``nrow`` rows: a 2-tuple of a one-dimensional C-contiguous buffer of
 * ``nrow`` int64 codes (held in ``view`` when so, released by the caller) and a list of values, every code an
 * index of the list (its items then in ``*values``). No error set when not. */
static int coded_view(PyObject *c, Py_ssize_t nrow, Py_buffer *view, PyObject ***values) {
    PyObject *list;
    Py_ssize_t nvalues, i;
    const int64_t *codes;
    if (!PyTuple_CheckExact(c) || PyTuple_GET_SIZE(c) != 2 || !PyList_CheckExact(PyTuple_GET_ITEM(c, 1))) {
        return 0;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(c, 0), view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim != 1 || view->itemsize != 8 || view->format == NULL || view->shape[0] != nrow
            || (strcmp(view->format, "l") != 0 && strcmp(view->format, "q") != 0)) {
        PyBuffer_Release(view);
        return 0;
    }
    list = PyTuple_GET_ITEM(c, 1);
    nvalues = PyList_GET_SIZE(list);
    codes = view->buf;
    for (i = 0; i < nrow; i++) {
        if (codes[i] < 0 || codes[i] >= nvalues) {
            PyBuffer_Release(view);
            return 0;
        }
    }
    *values = PySequence_Fast_ITEMS(list);
    return 1;
}

/* The texts between a table's values, made once for the table: per column, what precedes its value in a row
 * (``,`` after the first cell, a newline, the cell's indentation, the key text); a row's opening (``,`` before
 * every row but the first, a newline, the indentation, ``{``) and its closing (a newline, the indentation, ``}``).
 * ``texts`` holds them one after another: ``at[col]`` and ``len[col]`` for the columns, then the opening and the
 * closing at ``at[ncol]``, ``at[ncol + 1]``. make_joints returns 0, -1 (an error set) when memory runs out, 1 (no
 * error) when a key text is not an ASCII str; the caller frees the three arrays either way. */
typedef struct {
    char *texts;
    Py_ssize_t *at, *len;
} Joints;

static int make_joints(Joints *j, PyObject *keys, Py_ssize_t ncol, Py_ssize_t level) {
    Py_ssize_t col, size = 0, at = 0;
    for (col = 0; col < ncol; col++) {
        PyObject *k = PyList_GET_ITEM(keys, col);
        if (!PyUnicode_CheckExact(k) || !PyUnicode_IS_ASCII(k)) {
            return 1;
        }
        size += 2 + level + 2 + PyUnicode_GET_LENGTH(k);
    }
    size += 2 * (2 + level + 1 + 1);
    j->texts = PyMem_Malloc((size_t)size);
    j->at = PyMem_Calloc((size_t)ncol + 2, sizeof(Py_ssize_t));
    j->len = PyMem_Calloc((size_t)ncol + 2, sizeof(Py_ssize_t));
    if (j->texts == NULL || j->at == NULL || j->len == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (col = 0; col < ncol + 2; col++) {
        char *p = j->texts + at;
        Py_ssize_t indent = col < ncol ? level + 2 : level + 1;
        if (col > 0 && col <= ncol) { /* (every column but the first, and the row's opening) */
            *p++ = ',';
        }
        *p++ = '\n';
        memset(p, ' ', (size_t)indent);
        p += indent;
        if (col < ncol) {
            PyObject *k = PyList_GET_ITEM(keys, col);
            memcpy(p, PyUnicode_DATA(k), (size_t)PyUnicode_GET_LENGTH(k));
            p += PyUnicode_GET_LENGTH(k);
        } else {
            *p++ = col == ncol ? '{' : '}';
        }
        j->at[col] = at;
        j->len[col] = (p - j->texts) - at;
        at += j->len[col];
    }
    return 0;
}

static PyObject *table_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *keys, *columns, *out = NULL, ***items = NULL, ***coded = NULL;
    Py_ssize_t ncol, nrow, level, row, col, viewed = 0;
    Joints joints = {NULL, NULL, NULL};
    Buffer b = {NULL, 0, NULL, 0, 0};
    Entry *floats = NULL, *strings = NULL;
    Py_buffer *views = NULL;
    const double **doubles = NULL;
    const int64_t **codes = NULL;
    (void)self;
    if (nargs < 3 || nargs > 4 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "table_text(key_texts: list, columns: list, level: int, as_bytes=False)");
        return NULL;
    }
    if (nargs == 4 && (b.bytes = PyObject_IsTrue(args[3])) < 0) {
        return NULL;
    }
    keys = args[0];
    columns = args[1];
    level = PyLong_AsSsize_t(args[2]);
    if (level == -1 && PyErr_Occurred()) {
        return NULL;
    }
    ncol = PyList_GET_SIZE(keys);
    if (ncol == 0 || PyList_GET_SIZE(columns) != ncol || level < 0) {
        Py_RETURN_NONE;
    }
    {   /* (every column is checked to have as many rows below; a coded column's are its codes) */
        PyObject *first = PyList_GET_ITEM(columns, 0);
        nrow = PyObject_Length(PyTuple_CheckExact(first) && PyTuple_GET_SIZE(first) == 2 ? PyTuple_GET_ITEM(first, 0)
                                                                                        : first);
    }
    if (nrow < 0) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    items = PyMem_Calloc((size_t)ncol, sizeof(PyObject **));
    doubles = PyMem_Calloc((size_t)ncol, sizeof(double *));
    coded = PyMem_Calloc((size_t)ncol, sizeof(PyObject **));
    codes = PyMem_Calloc((size_t)ncol, sizeof(int64_t *));
    views = PyMem_Calloc((size_t)ncol, sizeof(Py_buffer));
    floats = PyMem_Calloc(CACHE_SIZE, sizeof(Entry));
    strings = PyMem_Calloc(CACHE_SIZE, sizeof(Entry));
    if (items == NULL || doubles == NULL || coded == NULL || codes == NULL || views == NULL || floats == NULL
            || strings == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (col = 0; col < ncol; col++) {
        PyObject *c = PyList_GET_ITEM(columns, col);
        if (PyList_CheckExact(c) && PyList_GET_SIZE(c) == nrow) {
            items[col] = PySequence_Fast_ITEMS(c);
        } else if (float64_view(c, nrow, &views[viewed])) {
            doubles[col] = views[viewed++].buf;
        } else if (coded_view(c, nrow, &views[viewed], &coded[col])) {
            codes[col] = views[viewed++].buf;
        } else {
            goto none;
        }
    }
    if (nrow == 0) {
        goto none;
    }
    switch (make_joints(&joints, keys, ncol, level)) {
    case -1: goto done;
    case 1: goto none;
    }
    if (reserve(&b, nrow * ncol * 32) < 0 || put(&b, "[", 1) < 0) {
        goto done;
    }
    /* (nothing below runs Python code: the lists keep their lengths and items) */
    for (row = 0; row < nrow; row++) {
        int first = row == 0; /* (the first row's opening without its comma) */
        if (put(&b, joints.texts + joints.at[ncol] + first, joints.len[ncol] - first) < 0) {
            goto done;
        }
        for (col = 0; col < ncol; col++) {
            int rc;
            if (put(&b, joints.texts + joints.at[col], joints.len[col]) < 0) {
                goto done;
            }
            rc = items[col]   ? put_value(&b, items[col][row], level + 2, floats, strings)
                 : coded[col] ? put_value(&b, coded[col][codes[col][row]], level + 2, floats, strings)
                              : put_double(&b, doubles[col][row], floats);
            if (rc < 0) {
                goto done;
            }
            if (rc > 0) {
                goto none;
            }
        }
        if (put(&b, joints.texts + joints.at[ncol + 1], joints.len[ncol + 1]) < 0) {
            goto done;
        }
    }
    if (put_pad(&b, level) < 0 || put(&b, "]", 1) < 0) {
        goto done;
    }
    if (resize(&b, b.len) == 0) {
        out = b.obj;
        b.obj = NULL;
    }
    goto done;
none:
    out = Py_None;
    Py_INCREF(out);
done:
    while (viewed > 0) {
        PyBuffer_Release(&views[--viewed]);
    }
    PyMem_Free(views);
    PyMem_Free(doubles);
    PyMem_Free(codes);
    PyMem_Free(coded);
    PyMem_Free(items);
    Py_XDECREF(b.obj);
    PyMem_Free(floats);
    PyMem_Free(strings);
    PyMem_Free(joints.texts);
    PyMem_Free(joints.at);
    PyMem_Free(joints.len);
    return out;
}

static PyMethodDef methods[] = {
    {"table_text", (PyCFunction)(void (*)(void))table_text, METH_FASTCALL,
     "table_text(key_texts, columns, level, as_bytes=False) -> the rows' JSON text (indent=1), or None where "
     "Python must print it"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json_table", NULL, -1, methods};

PyMODINIT_FUNC PyInit__json_table(void) {
    return PyModule_Create(&module);
}
