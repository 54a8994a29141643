/* The compiled form of hloscope.parsers._attribute_value.py_attribute_value: one ``key=value`` of an
 * instruction's attribute text, read without decoding the rest; of py_metadata_fields: the fields of a
 * ``metadata={...}`` value; and of hloscope.parsers._hlo_decode.Decoder.py_metadata_column: the metadata of
 * every row of the ops table, read with the two in one pass (metadata_column); and the end of a bracketed group
 * in an attribute value (group_end, at the end of this file).
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
#include <structmember.h>

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

/* tally over [from, to) (no '"' in it): on one-byte text, each character tested against a table of the six
 * brackets first (most characters are none). */
static const unsigned char IS_BRACKET[256] = {['{'] = 1, ['}'] = 1, ['('] = 1, [')'] = 1, ['['] = 1, [']'] = 1};

ALWAYS_INLINE void tally_span(int kind, const void *data, Py_ssize_t from, Py_ssize_t to, Py_ssize_t *counts) {
    Py_ssize_t i;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *d = (const Py_UCS1 *)data;
        for (i = from; i < to; i++) {
            if (IS_BRACKET[d[i]]) {
                tally(d[i], counts);
            }
        }
        return;
    }
    for (i = from; i < to; i++) {
        tally(CH(i), counts);
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
    if (find_char(kind, data, 0, at, '"') >= 0) {
        return 0;
    }
    tally_span(kind, data, 0, at, counts);
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
    i = a;
    for (;;) {
        Py_ssize_t q = find_char(kind, data, i, b, '"');
        tally_span(kind, data, i, q < 0 ? b : q, counts); /* (the brackets up to the next string) */
        if (q < 0) {
            break;
        }
        i = q + 1;
        for (;;) { /* to the closing '"', a backslash escaping the character after it */
            Py_ssize_t e;
            q = find_char(kind, data, i, b, '"');
            e = find_char(kind, data, i, q < 0 ? b : q, '\\');
            if (e >= 0) {
                i = e + 2;
                continue;
            }
            if (q < 0) {
                return 2; /* not closed */
            }
            i = q + 1;
            break;
        }
    }
    return (counts[0] || counts[1] || counts[2]) ? 2 : 1;
}

/* The value of key in text (new reference; NULL on error), its status in *status. */
static PyObject *read_value(PyObject *text, PyObject *key, int *status_out) {
    Py_ssize_t n, klen, a, b;
    int kind, kkind, status;
    const void *data, *kdata;
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
    *status_out = status;
    return PyUnicode_Substring(text, a, b);
}

static PyObject *attribute_value(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *value;
    int status;
    (void)self;
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "attribute_value(text: str, key: str)");
        return NULL;
    }
    value = read_value(args[0], args[1], &status);
    if (value == NULL) {
        return NULL;
    }
    return Py_BuildValue("(iN)", status, value);
}

/* without_metadata(text) -> str | None: hloscope.cost.structure.py_without_metadata (that function's docstring
 * is the specification; tests/cost/test_structure.py holds the two equal on every attribute text of the fixtures
 * and the corpus): text with its ", metadata=<value>" cut out -- the first occurrence, as str.replace(..., 1) --,
 * text itself when it holds no "metadata=" or the value is empty, None for the parser's placeholder or a status
 * other than KNOWN. Without a Python frame and the (status, value) tuple a deviceless TPU module's structure keys
 * read each of its ~9,000 texts through. */
static PyObject *STR_METADATA_KEY, *STR_METADATA_PROBE, *STR_METADATA_MARK, *STR_NOTHING;

static PyObject *without_metadata(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *text, *value, *needle, *out;
    Py_ssize_t found;
    int status;
    (void)self;
    if (nargs != 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "without_metadata(text: str)");
        return NULL;
    }
    if (STR_METADATA_KEY == NULL) {
        STR_METADATA_KEY = PyUnicode_InternFromString("metadata");
        STR_METADATA_PROBE = PyUnicode_InternFromString(", metadata=");
        STR_METADATA_MARK = PyUnicode_InternFromString("metadata=");
        STR_NOTHING = PyUnicode_InternFromString("");
        if (STR_METADATA_KEY == NULL || STR_METADATA_PROBE == NULL || STR_METADATA_MARK == NULL
            || STR_NOTHING == NULL) {
            return NULL;
        }
    }
    text = args[0];
    if (PyUnicode_CompareWithASCIIString(text, "<decoded>") == 0) { /* (structure._PLACEHOLDER) */
        Py_RETURN_NONE;
    }
    if (PyUnicode_GET_LENGTH(text) == 0) {
        Py_INCREF(text);
        return text;
    }
    found = PyUnicode_Find(text, STR_METADATA_MARK, 0, PyUnicode_GET_LENGTH(text), 1);
    if (found == -2) {
        return NULL;
    }
    if (found < 0) {
        Py_INCREF(text);
        return text;
    }
    value = read_value(text, STR_METADATA_KEY, &status);
    if (value == NULL) {
        return NULL;
    }
    if (status != 1) { /* (KNOWN) */
        Py_DECREF(value);
        Py_RETURN_NONE;
    }
    if (PyUnicode_GET_LENGTH(value) == 0) {
        Py_DECREF(value);
        Py_INCREF(text);
        return text;
    }
    needle = PyUnicode_Concat(STR_METADATA_PROBE, value);
    Py_DECREF(value);
    if (needle == NULL) {
        return NULL;
    }
    out = PyUnicode_Replace(text, needle, STR_NOTHING, 1);
    Py_DECREF(needle);
    return out;
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
            for (;;) { /* (to the next '"' -- unless a '\' comes first: it and the character after it are read) */
                Py_ssize_t q = find_char(kind, data, j, n, '"');
                Py_ssize_t e = find_char(kind, data, j, q < 0 ? n : q, '\\');
                if (e >= 0) {
                    if (e + 1 >= n || CH(e + 1) == '\n') {
                        break; /* (no match) */
                    }
                    j = e + 2;
                    continue;
                }
                if (q >= 0) {
                    value_end = q + 1;
                }
                break;
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

/* The spans of the METADATA_KEYS fields of a metadata value ([0, 0) for a key it lacks), one metadata_scan (made
 * for 1-byte text apart: the usual kind, its reads then inlined as such). */
static void field_spans(PyObject *text, Py_ssize_t *starts, Py_ssize_t *ends) {
    int k, kind = PyUnicode_KIND(text);
    for (k = 0; k < N_METADATA_KEYS; k++) {
        starts[k] = ends[k] = 0;
    }
    if (kind == PyUnicode_1BYTE_KIND) {
        metadata_scan(PyUnicode_1BYTE_KIND, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), starts, ends);
    } else {
        metadata_scan(kind, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text), starts, ends);
    }
}

/* The tuple of py_metadata_fields(text) (new reference). */
static PyObject *fields_of(PyObject *text) {
    PyObject *out;
    Py_ssize_t starts[N_METADATA_KEYS], ends[N_METADATA_KEYS];
    int k;
    field_spans(text, starts, ends);
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

static PyObject *metadata_fields(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 1 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "metadata_fields(value: str)");
        return NULL;
    }
    return fields_of(args[0]);
}

/* int() of the field [a, b) of text, read in place: 0 for "", the number for up to 18 ASCII digits; -1 for any
 * other text (the caller's make() reads it). */
static long long plain_int_at(PyObject *text, Py_ssize_t a, Py_ssize_t b) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    long long v = 0;
    if (b - a > 18) {
        return -1;
    }
    for (; a < b; a++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, a);
        if (c < '0' || c > '9') {
            return -1;
        }
        v = v * 10 + (c - '0');
    }
    return v;
}

/* The field [a, b) of text as Decoder._metadata reads it (new reference): a quoted field without its quotes (what
 * r.unquote gives when the body holds no backslash), an unquoted one as it is; NULL without an error when a quoted
 * body holds a backslash (the caller's make() reads it). */
static PyObject *plain_text_at(PyObject *text, Py_ssize_t a, Py_ssize_t b) {
    if (b == a || PyUnicode_READ_CHAR(text, a) != '"') {
        return PyUnicode_Substring(text, a, b);
    }
    if (PyUnicode_FindChar(text, '\\', a, b, 1) >= 0) {
        return NULL;
    }
    return PyUnicode_Substring(text, a + 1, b - 1 > a + 1 ? b - 1 : a + 1); /* (text[1:-1]: "" for '"' alone) */
}

/* The Metadata of a metadata value (new reference), as Decoder._metadata makes it; make(value) where a field
 * is not plain (an escape in a string, a number not plain digits). Kept in by_value. */
static PyObject *metadata_of_value(PyObject *value, PyObject *by_value, PyObject *frames, PyTypeObject *type,
                                   PyObject *make) {
    PyObject *texts[3] = {NULL}, *md = NULL, *file = NULL, *line_obj = NULL, *frame_obj = NULL;
    Py_ssize_t starts[N_METADATA_KEYS], ends[N_METADATA_KEYS];
    long long line, frame;
    int k;
    field_spans(value, starts, ends);
    line = plain_int_at(value, starts[3], ends[3]);
    frame = plain_int_at(value, starts[4], ends[4]);
    for (k = 0; k < 3 && line >= 0 && frame >= 0; k++) {
        texts[k] = plain_text_at(value, starts[k], ends[k]);
        if (texts[k] == NULL) {
            if (PyErr_Occurred()) {
                goto done;
            }
            break;
        }
    }
    if (k < 3) { /* not plain: Decoder._metadata reads it (and keeps it) */
        md = PyObject_CallOneArg(make, value);
        goto done;
    }
    file = texts[2];
    Py_INCREF(file);
    line_obj = PyLong_FromLongLong(line);
    frame_obj = PyLong_FromLongLong(frame);
    if (line_obj == NULL || frame_obj == NULL) {
        goto done;
    }
    if (PyUnicode_GET_LENGTH(file) == 0 && frame != 0) { /* resolved through the module's StackFrames */
        PyObject *resolved = PyDict_GetItemWithError(frames, frame_obj);
        if (resolved == NULL && PyErr_Occurred()) {
            goto done;
        }
        if (resolved != NULL) {
            PyObject *f = PyObject_GetAttrString(resolved, "file_name"), *l;
            if (f == NULL) {
                goto done;
            }
            l = PyObject_GetAttrString(resolved, "line");
            if (l == NULL) {
                Py_DECREF(f);
                goto done;
            }
            Py_SETREF(file, f);
            Py_SETREF(line_obj, l);
        }
    }
    md = type->tp_alloc(type, 6); /* (as tuple.__new__(Metadata, ...) makes the named tuple) */
    if (md == NULL) {
        goto done;
    }
    Py_INCREF(texts[0]);
    PyTuple_SET_ITEM(md, 0, texts[0]);
    Py_INCREF(texts[1]);
    PyTuple_SET_ITEM(md, 1, texts[1]);
    PyTuple_SET_ITEM(md, 2, file);
    file = NULL;
    PyTuple_SET_ITEM(md, 3, line_obj);
    line_obj = NULL;
    PyTuple_SET_ITEM(md, 4, frame_obj);
    frame_obj = NULL;
    Py_INCREF(value);
    PyTuple_SET_ITEM(md, 5, value);
    if (PyDict_SetItem(by_value, value, md) < 0) {
        Py_CLEAR(md);
    }
done:
    for (k = 0; k < 3; k++) {
        Py_XDECREF(texts[k]);
    }
    Py_XDECREF(file);
    Py_XDECREF(line_obj);
    Py_XDECREF(frame_obj);
    return md;
}

/* Member-descriptor offset of slot `name` of `type` (0 when it is no object slot of that type itself): where the
 * loop below reads ``attribute_text`` and ``_decoded`` straight from an instruction of that type (each
 * PyObject_GetAttr ~30 ns, two a row). */
static Py_ssize_t slot_offset(PyTypeObject *type, PyObject *name) {
    Py_ssize_t offset = 0;
    PyObject *descr = PyObject_GetAttr((PyObject *)type, name);
    if (descr == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (Py_TYPE(descr) == &PyMemberDescr_Type && ((PyMemberDescrObject *)descr)->d_common.d_type == type
        && ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX) {
        offset = ((PyMemberDescrObject *)descr)->d_member->offset;
    }
    Py_DECREF(descr);
    return offset;
}

/* ``inst.<name>`` (new reference): from the slot at `offset` when inst is a `type` and the slot is set, else
 * PyObject_GetAttr. */
static inline PyObject *read_slot(PyObject *inst, PyTypeObject *type, Py_ssize_t offset, PyObject *name) {
    if (offset > 0 && Py_TYPE(inst) == type) {
        PyObject *v = *(PyObject **)((char *)inst + offset);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttr(inst, name);
}

/* text.find(key) (-2 on error): on one-byte text a memchr for key's first character and a memcmp of the rest
 * where it is found (most texts are short -- `dimensions={1}` -- and PyUnicode_Find's setup cost more). */
static Py_ssize_t find_text(PyObject *text, PyObject *key) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), k = PyUnicode_GET_LENGTH(key), i;
    if (PyUnicode_KIND(text) == PyUnicode_1BYTE_KIND && PyUnicode_KIND(key) == PyUnicode_1BYTE_KIND && k > 0) {
        const Py_UCS1 *d = PyUnicode_1BYTE_DATA(text), *kd = PyUnicode_1BYTE_DATA(key);
        for (i = 0; i + k <= n;) {
            const Py_UCS1 *p = memchr(d + i, kd[0], (size_t)(n - k + 1 - i));
            if (p == NULL) {
                return -1;
            }
            i = p - d;
            if (memcmp(d + i + 1, kd + 1, (size_t)(k - 1)) == 0) {
                return i;
            }
            i++;
        }
        return -1;
    }
    return PyUnicode_Find(text, key, 0, PY_SSIZE_T_MAX, 1);
}

/* Append row i to *left (the rows metadata_column leaves unread; made on the first): 0, or -1 on error. */
static int left_unread(PyObject **left, Py_ssize_t i) {
    PyObject *at;
    int r;
    if (*left == NULL && (*left = PyList_New(0)) == NULL) {
        return -1;
    }
    at = PyLong_FromSsize_t(i);
    r = at == NULL ? -1 : PyList_Append(*left, at);
    Py_XDECREF(at);
    return r;
}

/* metadata_column(insts, by_text, by_value, frames, metadata_type, make, unread[, decoder]) -> list
 *                  | (list, rows left unread) | None
 *
 * With ``decoder``: None when a row's ``_decoder`` is not that object (rows of several parses: the caller reads
 * each row's property), else the list and the indices of its rows that are ``unread``, in order (a module's
 * ops table leaves one to three of its 15,000-30,000 rows: a scan of the list for them cost more than the rows).
 *
 * Decoder.metadata_column's reading, one pass over the instructions: an empty attribute text has no metadata
 * (None); an instruction already decoded (its _decoded not None) gets unread (the caller asks the property); a
 * text without "metadata" in it has none (None: attribute_value's first answer, not kept); a text in by_text gets
 * what it holds; any other text is read as Decoder.metadata_of reads it (attribute_value of
 * "metadata": unknown -> unread; known and absent -> None; known if read -> by_value's, else unread; known ->
 * by_value's, else made as Decoder._metadata makes it, make(value) where a field is not plain) and, where known,
 * kept in by_text. tests/parsers/test_metadata_column.py holds it equal to the Python loop. */
static PyObject *metadata_column(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *insts, *by_text, *by_value, *frames, *make, *unread, *out, *key = NULL, *s_text = NULL,
             *s_decoded = NULL;
    PyObject *decoder = nargs == 8 ? args[7] : NULL, *s_decoder = NULL;
    PyTypeObject *type, *inst_type = NULL;
    Py_ssize_t n, i, text_offset = 0, decoded_offset = 0, decoder_offset = 0;
    PyObject *left = NULL; /* (the rows left unread, by index: made at the first) */
    (void)self;
    if ((nargs != 7 && nargs != 8) || !PyList_Check(args[0]) || !PyDict_Check(args[1]) || !PyDict_Check(args[2])
        || !PyDict_Check(args[3]) || !PyType_Check(args[4])
        || !PyType_IsSubtype((PyTypeObject *)args[4], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "metadata_column(insts: list, by_text: dict, by_value: dict, frames: dict, "
                                         "metadata_type: type[tuple], make, unread[, decoder])");
        return NULL;
    }
    insts = args[0];
    by_text = args[1];
    by_value = args[2];
    frames = args[3];
    type = (PyTypeObject *)args[4];
    make = args[5];
    unread = args[6];
    n = PyList_GET_SIZE(insts);
    out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    key = PyUnicode_InternFromString("metadata");
    s_text = PyUnicode_InternFromString("attribute_text");
    s_decoded = PyUnicode_InternFromString("_decoded");
    s_decoder = decoder != NULL ? PyUnicode_InternFromString("_decoder") : NULL;
    if (key == NULL || s_text == NULL || s_decoded == NULL || (decoder != NULL && s_decoder == NULL)) {
        goto fail;
    }
    if (n > 0) { /* (the first instruction's class: every row's, as a rule) */
        inst_type = Py_TYPE(PyList_GET_ITEM(insts, 0));
        Py_INCREF(inst_type);
        text_offset = slot_offset(inst_type, s_text);
        decoded_offset = slot_offset(inst_type, s_decoded);
        decoder_offset = decoder != NULL ? slot_offset(inst_type, s_decoder) : 0;
    }
    for (i = 0; decoder != NULL && i < n; i++) { /* (every row parsed by that decoder: else None) */
        PyObject *own = read_slot(PyList_GET_ITEM(insts, i), inst_type, decoder_offset, s_decoder);
        if (own == NULL) {
            goto fail;
        }
        Py_DECREF(own); /* (compared by identity only) */
        if (own != decoder) {
            Py_DECREF(out);
            out = Py_None;
            Py_INCREF(out);
            goto finish;
        }
    }
    for (i = 0; i < n; i++) {
        PyObject *inst = PyList_GET_ITEM(insts, i), *text, *decoded, *md, *value;
        int status;
        text = read_slot(inst, inst_type, text_offset, s_text);
        if (text == NULL) {
            goto fail;
        }
        if (!PyUnicode_Check(text)) {
            Py_DECREF(text);
            Py_INCREF(unread);
            PyList_SET_ITEM(out, i, unread);
            if (left_unread(&left, i) < 0) {
                goto fail;
            }
            continue;
        }
        if (PyUnicode_GET_LENGTH(text) == 0) {
            Py_DECREF(text);
            Py_INCREF(Py_None);
            PyList_SET_ITEM(out, i, Py_None);
            continue;
        }
        decoded = read_slot(inst, inst_type, decoded_offset, s_decoded);
        if (decoded == NULL) {
            Py_DECREF(text);
            goto fail;
        }
        Py_DECREF(decoded); /* (compared by identity only) */
        if (decoded != Py_None) {
            Py_DECREF(text);
            Py_INCREF(unread);
            PyList_SET_ITEM(out, i, unread);
            if (left_unread(&left, i) < 0) {
                goto fail;
            }
            continue;
        }
        {   /* No "metadata" in the text: no metadata (read_value's first answer), without hashing the text or
             * keeping it (an unfused module's tens of thousands of distinct texts, none with metadata). */
            Py_ssize_t at = find_text(text, key);
            if (at == -2) {
                Py_DECREF(text);
                goto fail;
            }
            if (at == -1) {
                Py_DECREF(text);
                Py_INCREF(Py_None);
                PyList_SET_ITEM(out, i, Py_None);
                continue;
            }
        }
        md = PyDict_GetItemWithError(by_text, text);
        if (md != NULL) {
            Py_DECREF(text);
            Py_INCREF(md);
            PyList_SET_ITEM(out, i, md);
            continue;
        }
        if (PyErr_Occurred()) {
            Py_DECREF(text);
            goto fail;
        }
        value = read_value(text, key, &status);
        if (value == NULL) {
            Py_DECREF(text);
            goto fail;
        }
        md = NULL;
        if (status == 1 && PyUnicode_GET_LENGTH(value) == 0) {
            md = Py_None;
            Py_INCREF(md);
        } else if (status == 1 || status == 2) {
            md = PyDict_GetItemWithError(by_value, value);
            if (md != NULL) {
                Py_INCREF(md);
            } else if (PyErr_Occurred()) {
                Py_DECREF(value);
                Py_DECREF(text);
                goto fail;
            } else if (status == 1) {
                md = metadata_of_value(value, by_value, frames, type, make);
                if (md == NULL) {
                    Py_DECREF(value);
                    Py_DECREF(text);
                    goto fail;
                }
            }
        }
        Py_DECREF(value);
        if (md == NULL) { /* only a full decode can tell */
            Py_DECREF(text);
            Py_INCREF(unread);
            PyList_SET_ITEM(out, i, unread);
            if (left_unread(&left, i) < 0) {
                goto fail;
            }
            continue;
        }
        if (PyDict_SetItem(by_text, text, md) < 0) {
            Py_DECREF(md);
            Py_DECREF(text);
            goto fail;
        }
        Py_DECREF(text);
        PyList_SET_ITEM(out, i, md);
    }
    if (decoder != NULL) { /* (with the decoder: the column and the rows it left unread) */
        PyObject *pair = left != NULL ? Py_BuildValue("(NN)", out, left) : Py_BuildValue("(N[])", out);
        left = NULL;
        out = pair;
    }
    Py_XDECREF(left);
finish:
    Py_DECREF(key);
    Py_DECREF(s_text);
    Py_DECREF(s_decoded);
    Py_XDECREF(s_decoder);
    Py_XDECREF(inst_type);
    return out;
fail:
    Py_XDECREF(key);
    Py_XDECREF(s_text);
    Py_XDECREF(s_decoded);
    Py_XDECREF(s_decoder);
    Py_XDECREF(inst_type);
    Py_XDECREF(left);
    Py_DECREF(out);
    return NULL;
}

/* group_end(text, at) -> int: the index just after the bracketed group opening at ``text[at]`` (one of ``{[(``),
 * read as ``_hlo_lexer.ParserBase._value_end`` reads a value bracket by bracket -- any of ``{[(`` opens and any of
 * ``}])`` closes (kinds are not paired), block comments and ``//`` comments to the line's end are skipped, a lone
 * ``/`` is text --, or -1 where that loop must read it itself: a string (``"``), a comment left open, a group never
 * closed, an ``at`` that opens none. What ``_hlo_re.NESTED_BRACKETS`` (the specification) matches, in one pass of a
 * few instructions a character instead of the regex's backtracking-free but costly alternation (the module header
 * of the corpus's gemma4 holds a 40 kB layout: ~7 M instructions by the regex), and at any depth (the regex stops
 * at 8). */
static PyObject *group_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *text;
    Py_ssize_t at, n, i, depth = 0;
    int kind;
    const void *data;
    (void)self;
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyLong_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "group_end(text: str, at: int)");
        return NULL;
    }
    text = args[0];
    at = PyLong_AsSsize_t(args[1]);
    if (at == -1 && PyErr_Occurred()) {
        return NULL;
    }
    n = PyUnicode_GET_LENGTH(text);
    kind = PyUnicode_KIND(text);
    data = PyUnicode_DATA(text);
    if (at < 0 || at >= n || (CH(at) != '{' && CH(at) != '[' && CH(at) != '(')) {
        return PyLong_FromSsize_t(-1);
    }
    for (i = at; i < n; i++) {
        Py_UCS4 c = CH(i);
        if (c == '{' || c == '[' || c == '(') {
            depth++;
        } else if (c == '}' || c == ']' || c == ')') {
            if (--depth == 0) {
                return PyLong_FromSsize_t(i + 1);
            }
        } else if (c == '"') {
            break;
        } else if (c == '/' && i + 1 < n && CH(i + 1) == '*') {
            Py_ssize_t j = i + 2;
            while (j + 1 < n && !(CH(j) == '*' && CH(j + 1) == '/')) {
                j++;
            }
            if (j + 1 >= n) {
                break; /* (left open) */
            }
            i = j + 1;
        } else if (c == '/' && i + 1 < n && CH(i + 1) == '/') {
            while (i + 1 < n && CH(i + 1) != '\n') {
                i++;
            }
        }
    }
    return PyLong_FromSsize_t(-1);
}

static PyMethodDef methods[] = {
    {"attribute_value", (PyCFunction)(void (*)(void))attribute_value, METH_FASTCALL,
     "attribute_value(text, key) -> (status, value): see hloscope.parsers._attribute_value.py_attribute_value."},
    {"without_metadata", (PyCFunction)(void (*)(void))without_metadata, METH_FASTCALL,
     "without_metadata(text) -> str | None: see hloscope.cost.structure.py_without_metadata."},
    {"metadata_fields", (PyCFunction)(void (*)(void))metadata_fields, METH_FASTCALL,
     "metadata_fields(value) -> 5 field texts: see hloscope.parsers._attribute_value.py_metadata_fields."},
    {"metadata_column", (PyCFunction)(void (*)(void))metadata_column, METH_FASTCALL,
     "metadata_column(insts, by_text, by_value, frames, metadata_type, make, unread[, decoder]) -> list: see\n"
     "hloscope.parsers._hlo_decode.Decoder.metadata_column."},
    {"group_end", (PyCFunction)(void (*)(void))group_end, METH_FASTCALL,
     "group_end(text, at) -> int: the end of the bracketed group opening at text[at] (-1: read it in Python); "
     "see hloscope.parsers._hlo_lexer.ParserBase._value_end."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_attribute_scan",
    "The compiled forms of hloscope.parsers._attribute_value.py_attribute_value and py_metadata_fields, of "
    "_hlo_decode's metadata column and of _hlo_lexer.py_group_end.", -1, methods,
    NULL, NULL, NULL, NULL,
};

/* ABI: the interface version (hloscope._compiled.ABI): 1 since metadata_column takes the decoder (then checks every
 * row's and gives the count of rows left unread); 2 since it gives those rows' indices instead of their count. */
PyMODINIT_FUNC PyInit__attribute_scan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "ABI", 2) < 0) {
        Py_CLEAR(m);
    }
    return m;
}
