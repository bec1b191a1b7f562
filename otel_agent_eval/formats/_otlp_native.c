/* OTLP ``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest`` bytes -> span and log records, in C: the
 * optional fast path of ``formats/otlp.py``'s ``decode_traces_protobuf`` and ``decode_logs_protobuf``.
 *
 * Why: decoding through upb's Python objects costs ~10 us a span, a quarter of serve's path,
 * almost all of it creating wrappers for each field read. Here the wire format is read
 * directly into the same ``SpanRecord`` / ``SpanEvent`` objects the Python path makes.
 *
 * Contract: ``decode_spans(data)`` (``decode_logs``) returns the list the Python path returns for ``data``, or
 * None when it does not read ``data``: anything but the canonical encoding of fields this
 * file knows (an unknown field, a wire type other than the field's, a singular message
 * repeated (protobuf merges those), groups, a varint past 64 bits, invalid UTF-8, an id of the
 * wrong size or all zeros, nesting past ``MAX_DEPTH``). The caller then decodes through upb,
 * whose answer (records, or the error naming the field) is the reference. So this file never
 * raises a decode error of its own, and never accepts what upb refuses: every string field
 * is checked as UTF-8, read or not. ``tests/formats/test_otlp_native.py`` holds both paths
 * to the same output, on real exports and on mutated bytes.
 *
 * Every read is bounds-checked against the end of its enclosing message (``Cur``). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define MAX_DEPTH 64 /* AnyValue nesting (arrays, kvlists) read here; deeper goes to upb */
#define BAIL (-1)

typedef struct {
    const uint8_t *p;
    const uint8_t *end;
} Cur;

typedef struct {
    uint32_t number;
    int wire;
    uint64_t v;         /* varint and fixed values */
    const uint8_t *s;   /* length-delimited payload */
    Py_ssize_t n;
} Field;

/* Set once by ``configure``: the record classes, the slots' member descriptors (in the order of
 * ``RECORD_SLOTS`` / ``EVENT_SLOTS``), ``resource_metadata`` and the enums' names. */
static PyTypeObject *record_type, *event_type, *log_type;
static PyObject *resource_metadata;
static PyObject *kind_names[6], *status_names[3], *kind_default, *status_default;

enum { TRACE_ID, SPAN_ID, PARENT_SPAN_ID, NAME, START, END, ATTRIBUTES, EVENTS, STATUS_CODE, STATUS_MESSAGE, KIND,
       SCOPE_NAME, PARENT_IS_REMOTE, RESOURCE, DROPPED_ATTRIBUTES, DROPPED_EVENTS, RECORD_SLOTS };
static const char *record_slot_names[RECORD_SLOTS] = {
    "trace_id", "span_id", "parent_span_id", "name", "start_time_unix_nano", "end_time_unix_nano", "attributes",
    "events", "status_code", "status_message", "kind", "scope_name", "parent_is_remote", "resource",
    "dropped_attributes_count", "dropped_events_count"};
enum { EVENT_NAME, EVENT_TIME, EVENT_ATTRIBUTES, EVENT_SLOTS };
static const char *event_slot_names[EVENT_SLOTS] = {"name", "time_unix_nano", "attributes"};
enum { LOG_TRACE_ID, LOG_SPAN_ID, LOG_TIME, LOG_EVENT_NAME, LOG_ATTRIBUTES, LOG_BODY, LOG_SLOTS };
static const char *log_slot_names[LOG_SLOTS] = {"trace_id", "span_id", "time_unix_nano", "event_name", "attributes",
                                                "body"};
static PyObject *record_slots[RECORD_SLOTS], *event_slots[EVENT_SLOTS], *log_slots[LOG_SLOTS];

static int read_varint(Cur *c, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end)
            return BAIL;
        uint8_t byte = *c->p++;
        if (shift == 63 && byte > 1)
            return BAIL; /* past 64 bits */
        value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = value;
            return 0;
        }
    }
    return BAIL;
}

/* 1: a field read into ``f``; 0: the end of the message; BAIL: not readable here. */
static int next_field(Cur *c, Field *f) {
    uint64_t key;
    if (c->p >= c->end)
        return 0;
    if (read_varint(c, &key) < 0 || (key >> 3) == 0 || (key >> 3) > 0x1fffffff)
        return BAIL;
    f->number = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
    case 0:
        return read_varint(c, &f->v) < 0 ? BAIL : 1;
    case 1:
        if (c->end - c->p < 8)
            return BAIL;
        f->v = 0;
        for (int i = 7; i >= 0; i--)
            f->v = (f->v << 8) | c->p[i];
        c->p += 8;
        return 1;
    case 5:
        if (c->end - c->p < 4)
            return BAIL;
        f->v = (uint64_t)c->p[0] | (uint64_t)c->p[1] << 8 | (uint64_t)c->p[2] << 16 | (uint64_t)c->p[3] << 24;
        c->p += 4;
        return 1;
    case 2: {
        uint64_t size;
        if (read_varint(c, &size) < 0 || size > (uint64_t)(c->end - c->p) || size > INT32_MAX)
            return BAIL;
        f->s = c->p;
        f->n = (Py_ssize_t)size;
        c->p += size;
        return 1;
    }
    default: /* groups (3, 4) and the invalid 6 and 7 */
        return BAIL;
    }
}

#define LEN 2
#define VARINT 0
#define FIXED64 1
#define FIXED32 5

static Cur cursor(const uint8_t *s, Py_ssize_t n) {
    Cur c = {s, s + n};
    return c;
}

/* New reference to the text, or NULL (invalid UTF-8: the error is cleared, the caller bails). */
static PyObject *text(const Field *f) {
    PyObject *out = PyUnicode_DecodeUTF8((const char *)f->s, f->n, NULL);
    if (out == NULL)
        PyErr_Clear();
    return out;
}

/* A string field that is not kept: still refused by upb when it is not UTF-8. */
static int check_text(const Field *f) {
    for (Py_ssize_t i = 0; i < f->n; i++) {
        if (f->s[i] & 0x80) {
            PyObject *decoded = text(f);
            if (decoded == NULL)
                return BAIL;
            Py_DECREF(decoded);
            return 0;
        }
    }
    return 0;
}

static void replace(PyObject **slot, PyObject *value) {
    PyObject *old = *slot;
    *slot = value;
    Py_XDECREF(old);
}

/* Attribute names seen lately (ASCII, up to ``KEY_CACHE_MAX_SIZE`` bytes), by a hash of their bytes, each in one
 * of ``KEY_CACHE_WAYS`` slots from there: the same few dozen names come in every span, and one str each is shared,
 * not made anew. Not interned: CPython 3.12 makes interned strings immortal, and names come from the network
 * (this cache is bounded: a new name takes an empty slot of its four, else the first). */
#define KEY_CACHE 1024
#define KEY_CACHE_WAYS 4
#define KEY_CACHE_MAX_SIZE 128
static PyObject *key_cache[KEY_CACHE];

/* A ``KeyValue.key``: new reference, or NULL (invalid UTF-8). */
static PyObject *attribute_key(const Field *f) {
    uint32_t hash = 2166136261u; /* FNV-1a */
    PyObject *key;
    size_t first;
    for (Py_ssize_t i = 0; i < f->n; i++)
        hash = (hash ^ f->s[i]) * 16777619u;
    first = hash & (KEY_CACHE - 1);
    for (size_t way = 0; way < KEY_CACHE_WAYS; way++) {
        key = key_cache[(first + way) & (KEY_CACHE - 1)];
        if (key == NULL)
            break;
        if (PyUnicode_GET_LENGTH(key) == f->n && memcmp(PyUnicode_DATA(key), f->s, (size_t)f->n) == 0)
            return Py_NewRef(key);
    }
    if ((key = text(f)) == NULL)
        return NULL;
    if (PyUnicode_IS_ASCII(key) && f->n <= KEY_CACHE_MAX_SIZE) {
        PyObject **slot = &key_cache[first];
        for (size_t way = 0; way < KEY_CACHE_WAYS; way++) {
            if (key_cache[(first + way) & (KEY_CACHE - 1)] == NULL) {
                slot = &key_cache[(first + way) & (KEY_CACHE - 1)];
                break;
            }
        }
        replace(slot, Py_NewRef(key));
    }
    return key;
}

static PyObject *key_value_list(const uint8_t *s, Py_ssize_t n, int bytes_as_text, int depth);

static PyObject *any_value(const uint8_t *s, Py_ssize_t n, int bytes_as_text, int depth);

/* ``ArrayValue``: a tuple of its values. New reference, or NULL to bail. */
static PyObject *array_value(const uint8_t *s, Py_ssize_t n, int bytes_as_text, int depth) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    PyObject *list = PyList_New(0), *out;
    if (list == NULL)
        return NULL;
    while ((got = next_field(&c, &f)) == 1) {
        PyObject *element;
        if (f.number != 1 || f.wire != LEN || (element = any_value(f.s, f.n, bytes_as_text, depth)) == NULL) {
            got = BAIL;
            break;
        }
        got = PyList_Append(list, element);
        Py_DECREF(element);
        if (got < 0)
            break;
    }
    out = got == 0 ? PyList_AsTuple(list) : NULL;
    Py_DECREF(list);
    return out;
}

/* ``any_value_to_python``: new reference, or NULL to bail. */
static PyObject *any_value(const uint8_t *s, Py_ssize_t n, int bytes_as_text, int depth) {
    Cur c = cursor(s, n);
    Field f;
    int got, current = 0;
    PyObject *value = NULL;
    if (depth > MAX_DEPTH)
        return NULL;
    while ((got = next_field(&c, &f)) == 1) {
        PyObject *item = NULL;
        if ((f.number == 5 || f.number == 6) && current == (int)f.number)
            goto bail; /* the same message case twice: protobuf merges them */
        switch (f.number) {
        case 1: /* string_value */
            if (f.wire != LEN || (item = text(&f)) == NULL)
                goto bail;
            break;
        case 2: /* bool_value */
            if (f.wire != VARINT)
                goto bail;
            item = PyBool_FromLong(f.v != 0);
            break;
        case 3: /* int_value */
            if (f.wire != VARINT)
                goto bail;
            item = PyLong_FromLongLong((long long)(int64_t)f.v);
            break;
        case 4: { /* double_value */
            double d;
            uint64_t bits = f.v;
            if (f.wire != FIXED64)
                goto bail;
            memcpy(&d, &bits, sizeof d);
            item = PyFloat_FromDouble(d);
            break;
        }
        case 5: /* array_value: a tuple, as the SDK stores sequences */
            if (f.wire != LEN)
                goto bail;
            item = array_value(f.s, f.n, bytes_as_text, depth + 1);
            break;
        case 6: /* kvlist_value */
            if (f.wire != LEN)
                goto bail;
            item = key_value_list(f.s, f.n, bytes_as_text, depth + 1);
            break;
        case 7: /* bytes_value */
            if (f.wire != LEN)
                goto bail;
            item = bytes_as_text ? PyUnicode_DecodeUTF8((const char *)f.s, f.n, "replace")
                                 : PyBytes_FromStringAndSize((const char *)f.s, f.n);
            break;
        default: /* string_value_strindex (profiles), or unknown */
            goto bail;
        }
        if (item == NULL)
            goto bail;
        current = (int)f.number;
        replace(&value, item);
    }
    if (got != 0)
        goto bail;
    if (value == NULL)
        Py_RETURN_NONE; /* an empty AnyValue */
    return value;
bail:
    PyErr_Clear();
    Py_XDECREF(value);
    return NULL;
}

/* Repeated ``KeyValue`` (field 1 of a KeyValueList, or an attributes field given one at a time):
 * ``key_value`` adds one to ``into`` (a later duplicate key wins). 0, or BAIL. */
static int key_value(const uint8_t *s, Py_ssize_t n, int bytes_as_text, int depth, PyObject *into) {
    Cur c = cursor(s, n);
    Field f;
    int got, has_value = 0;
    PyObject *key = NULL, *value = NULL;
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number == 1 && f.wire == LEN) {
            PyObject *k = attribute_key(&f);
            if (k == NULL)
                goto bail;
            replace(&key, k);
        } else if (f.number == 2 && f.wire == LEN && !has_value) {
            has_value = 1;
            if ((value = any_value(f.s, f.n, bytes_as_text, depth)) == NULL)
                goto bail;
        } else {
            goto bail; /* key_strindex, unknown fields, a value given twice (merged by protobuf) */
        }
    }
    if (got != 0)
        goto bail;
    if (key == NULL) {
        key = PyUnicode_FromStringAndSize("", 0);
        if (key == NULL)
            goto bail;
    }
    if (value == NULL) {
        value = Py_None;
        Py_INCREF(value);
    }
    if (PyDict_SetItem(into, key, value) < 0)
        goto bail;
    Py_DECREF(key);
    Py_DECREF(value);
    return 0;
bail:
    PyErr_Clear();
    Py_XDECREF(key);
    Py_XDECREF(value);
    return BAIL;
}

static PyObject *key_value_list(const uint8_t *s, Py_ssize_t n, int bytes_as_text, int depth) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    PyObject *out = PyDict_New();
    if (out == NULL || depth > MAX_DEPTH)
        goto bail;
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number != 1 || f.wire != LEN || key_value(f.s, f.n, bytes_as_text, depth, out) < 0)
            goto bail;
    }
    if (got != 0)
        goto bail;
    return out;
bail:
    PyErr_Clear();
    Py_XDECREF(out);
    return NULL;
}

/* ``InstrumentationScope``: its name (new reference; "" when absent), the rest checked. */
static PyObject *scope_name(const uint8_t *s, Py_ssize_t n) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    PyObject *name = NULL, *ignored = NULL;
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number == 1 && f.wire == LEN) {
            PyObject *t = text(&f);
            if (t == NULL)
                goto bail;
            replace(&name, t);
        } else if (f.number == 2 && f.wire == LEN) {
            if (check_text(&f) < 0)
                goto bail;
        } else if (f.number == 3 && f.wire == LEN) { /* attributes: read and dropped, as upb checks them */
            if (ignored == NULL && (ignored = PyDict_New()) == NULL)
                goto bail;
            if (key_value(f.s, f.n, 1, 0, ignored) < 0)
                goto bail;
        } else if (!(f.number == 4 && f.wire == VARINT && f.v <= UINT32_MAX)) {
            goto bail;
        }
    }
    if (got != 0)
        goto bail;
    Py_XDECREF(ignored);
    if (name == NULL)
        name = PyUnicode_FromStringAndSize("", 0);
    return name;
bail:
    PyErr_Clear();
    Py_XDECREF(name);
    Py_XDECREF(ignored);
    return NULL;
}

/* ``Span.Link``: nothing of it is kept; checked as upb would parse it. */
static int check_link(const uint8_t *s, Py_ssize_t n) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    PyObject *ignored = NULL;
    while ((got = next_field(&c, &f)) == 1) {
        int ok;
        switch (f.number) {
        case 1:
        case 2:
            ok = f.wire == LEN;
            break;
        case 3:
            ok = f.wire == LEN && check_text(&f) == 0;
            break;
        case 4:
            ok = f.wire == LEN && (ignored != NULL || (ignored = PyDict_New()) != NULL) &&
                 key_value(f.s, f.n, 1, 0, ignored) == 0;
            break;
        case 5:
            ok = f.wire == VARINT && f.v <= UINT32_MAX;
            break;
        case 6:
            ok = f.wire == FIXED32;
            break;
        default:
            ok = 0;
        }
        if (!ok) {
            got = BAIL;
            break;
        }
    }
    PyErr_Clear();
    Py_XDECREF(ignored);
    return got == 0 ? 0 : BAIL;
}

/* Status: its code's name and message (new references; the message None when empty). */
static int status(const uint8_t *s, Py_ssize_t n, PyObject **code_name, PyObject **message) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    uint64_t code = 0;
    PyObject *text_value = NULL;
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number == 2 && f.wire == LEN) {
            PyObject *t = text(&f);
            if (t == NULL)
                goto bail;
            replace(&text_value, t);
        } else if (f.number == 3 && f.wire == VARINT && f.v <= INT32_MAX) {
            code = f.v;
        } else {
            goto bail;
        }
    }
    if (got != 0)
        goto bail;
    *code_name = code < 3 ? status_names[code] : status_default;
    Py_INCREF(*code_name);
    if (text_value != NULL && PyUnicode_GET_LENGTH(text_value) == 0)
        Py_CLEAR(text_value);
    *message = text_value != NULL ? text_value : Py_NewRef(Py_None);
    return 0;
bail:
    Py_XDECREF(text_value);
    return BAIL;
}

/* An id's big-endian bytes as an unsigned int. */
static PyObject *id_int(const uint8_t *s, Py_ssize_t n) {
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromUnsignedNativeBytes(s, (size_t)n, Py_ASNATIVEBYTES_BIG_ENDIAN);
#else
    return _PyLong_FromByteArray(s, (size_t)n, 0, 0);
#endif
}

static int all_zero(const uint8_t *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i])
            return 0;
    return 1;
}

/* One slot of a record made here, stored through its member descriptor (the frozen dataclass's
 * ``__setattr__`` refuses; its ``__init__`` would check and clean each field again). Steals ``value``. */
static int set(PyObject *obj, PyObject *slot, PyObject *value) {
    int rc;
    if (value == NULL)
        return BAIL;
    rc = Py_TYPE(slot)->tp_descr_set(slot, obj, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *new_record(PyTypeObject *type) {
    return type->tp_alloc(type, 0);
}

/* ``unchecked_span_event``: new reference, or NULL. */
static PyObject *span_event(const uint8_t *s, Py_ssize_t n) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    uint64_t time = 0;
    PyObject *name = NULL, *attributes = PyDict_New(), *event = NULL;
    if (attributes == NULL)
        goto bail;
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number == 1 && f.wire == FIXED64) {
            time = f.v;
        } else if (f.number == 2 && f.wire == LEN) {
            PyObject *t = text(&f);
            if (t == NULL)
                goto bail;
            replace(&name, t);
        } else if (f.number == 3 && f.wire == LEN) {
            if (key_value(f.s, f.n, 1, 0, attributes) < 0)
                goto bail;
        } else if (!(f.number == 4 && f.wire == VARINT && f.v <= UINT32_MAX)) {
            goto bail;
        }
    }
    if (got != 0)
        goto bail;
    if (name == NULL && (name = PyUnicode_FromStringAndSize("", 0)) == NULL)
        goto bail;
    if ((event = new_record(event_type)) == NULL)
        goto bail;
    if (set(event, event_slots[EVENT_NAME], Py_NewRef(name)) < 0 ||
        set(event, event_slots[EVENT_TIME], PyLong_FromUnsignedLongLong(time)) < 0 ||
        set(event, event_slots[EVENT_ATTRIBUTES], Py_NewRef(attributes)) < 0)
        goto bail;
    Py_DECREF(name);
    Py_DECREF(attributes);
    return event;
bail:
    PyErr_Clear();
    Py_XDECREF(name);
    Py_XDECREF(attributes);
    Py_XDECREF(event);
    return NULL;
}

/* ``_span_record``: new reference, or NULL. ``scope`` and ``resource`` are borrowed. */
static PyObject *span_record(const uint8_t *s, Py_ssize_t n, PyObject *scope, PyObject *resource) {
    Cur c = cursor(s, n);
    Field f;
    int got, has_status = 0;
    const uint8_t *trace_id = NULL, *span_id = NULL, *parent = NULL;
    Py_ssize_t trace_size = 0, span_size = 0, parent_size = 0;
    uint64_t start = 0, end = 0, kind = 0, flags = 0, dropped_attributes = 0, dropped_events = 0;
    PyObject *name = NULL, *attributes = PyDict_New(), *events = PyList_New(0), *tuple = NULL;
    PyObject *code_name = NULL, *message = NULL, *record = NULL;
    if (attributes == NULL || events == NULL)
        goto bail;
    while ((got = next_field(&c, &f)) == 1) {
        switch (f.number) {
        case 1:
            if (f.wire != LEN)
                goto bail;
            trace_id = f.s, trace_size = f.n;
            break;
        case 2:
            if (f.wire != LEN)
                goto bail;
            span_id = f.s, span_size = f.n;
            break;
        case 3: /* trace_state */
            if (f.wire != LEN || check_text(&f) < 0)
                goto bail;
            break;
        case 4:
            if (f.wire != LEN)
                goto bail;
            parent = f.s, parent_size = f.n;
            break;
        case 5: {
            PyObject *t;
            if (f.wire != LEN || (t = text(&f)) == NULL)
                goto bail;
            replace(&name, t);
            break;
        }
        case 6:
            if (f.wire != VARINT || f.v > INT32_MAX)
                goto bail;
            kind = f.v;
            break;
        case 7:
            if (f.wire != FIXED64)
                goto bail;
            start = f.v;
            break;
        case 8:
            if (f.wire != FIXED64)
                goto bail;
            end = f.v;
            break;
        case 9:
            if (f.wire != LEN || key_value(f.s, f.n, 1, 0, attributes) < 0)
                goto bail;
            break;
        case 10:
        case 12:
        case 14:
            if (f.wire != VARINT || f.v > UINT32_MAX)
                goto bail;
            if (f.number == 10)
                dropped_attributes = f.v;
            else if (f.number == 12)
                dropped_events = f.v;
            break;
        case 11: {
            PyObject *event;
            if (f.wire != LEN || (event = span_event(f.s, f.n)) == NULL)
                goto bail;
            if (PyList_Append(events, event) < 0) {
                Py_DECREF(event);
                goto bail;
            }
            Py_DECREF(event);
            break;
        }
        case 13:
            if (f.wire != LEN || check_link(f.s, f.n) < 0)
                goto bail;
            break;
        case 15:
            if (f.wire != LEN || has_status || status(f.s, f.n, &code_name, &message) < 0)
                goto bail;
            has_status = 1;
            break;
        case 16:
            if (f.wire != FIXED32)
                goto bail;
            flags = f.v;
            break;
        default:
            goto bail;
        }
    }
    /* Ids as ``_span_record`` wants them; anything else is its error to name. */
    if (got != 0 || trace_size != 16 || span_size != 8 || all_zero(trace_id, 16) || all_zero(span_id, 8) ||
        (parent_size != 0 && parent_size != 8))
        goto bail;
    if (name == NULL && (name = PyUnicode_FromStringAndSize("", 0)) == NULL)
        goto bail;
    if (!has_status) {
        code_name = Py_NewRef(status_names[0]);
        message = Py_NewRef(Py_None);
    }
    if ((tuple = PyList_AsTuple(events)) == NULL || (record = new_record(record_type)) == NULL)
        goto bail;
    {
        PyObject **slot = record_slots;
        PyObject *kind_name = kind < 6 ? kind_names[kind] : kind_default;
        int failed =
            set(record, slot[TRACE_ID], id_int(trace_id, 16)) < 0 || set(record, slot[SPAN_ID], id_int(span_id, 8)) < 0 ||
            set(record, slot[PARENT_SPAN_ID],
                parent_size == 0 || all_zero(parent, 8) ? Py_NewRef(Py_None) : id_int(parent, 8)) < 0 ||
            set(record, slot[NAME], Py_NewRef(name)) < 0 ||
            set(record, slot[START], PyLong_FromUnsignedLongLong(start)) < 0 ||
            set(record, slot[END], PyLong_FromUnsignedLongLong(end ? end : start)) < 0 ||
            set(record, slot[ATTRIBUTES], Py_NewRef(attributes)) < 0 || set(record, slot[EVENTS], Py_NewRef(tuple)) < 0 ||
            set(record, slot[STATUS_CODE], Py_NewRef(code_name)) < 0 ||
            set(record, slot[STATUS_MESSAGE], Py_NewRef(message)) < 0 ||
            set(record, slot[KIND], Py_NewRef(kind_name)) < 0 || set(record, slot[SCOPE_NAME], Py_NewRef(scope)) < 0 ||
            set(record, slot[PARENT_IS_REMOTE], PyBool_FromLong((flags & 0x300) == 0x300)) < 0 ||
            set(record, slot[RESOURCE], Py_NewRef(resource)) < 0 ||
            set(record, slot[DROPPED_ATTRIBUTES], PyLong_FromUnsignedLongLong(dropped_attributes)) < 0 ||
            set(record, slot[DROPPED_EVENTS], PyLong_FromUnsignedLongLong(dropped_events)) < 0;
        if (failed)
            goto bail;
    }
    Py_DECREF(name);
    Py_DECREF(attributes);
    Py_DECREF(events);
    Py_DECREF(tuple);
    Py_DECREF(code_name);
    Py_DECREF(message);
    return record;
bail:
    PyErr_Clear();
    Py_XDECREF(name);
    Py_XDECREF(attributes);
    Py_XDECREF(events);
    Py_XDECREF(tuple);
    Py_XDECREF(code_name);
    Py_XDECREF(message);
    Py_XDECREF(record);
    return NULL;
}

/* ``ScopeSpans``: its spans appended to ``out``. The scope may come after its spans on the wire. */
static int scope_spans(const uint8_t *s, Py_ssize_t n, PyObject *resource, PyObject *out) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    PyObject *name = NULL;
    while ((got = next_field(&c, &f)) == 1) { /* first pass: the scope, and the checks */
        if (f.number == 1 && f.wire == LEN) {
            if (name != NULL || (name = scope_name(f.s, f.n)) == NULL)
                goto bail; /* a scope twice is merged by protobuf */
        } else if (f.number == 3 && f.wire == LEN) {
            if (check_text(&f) < 0)
                goto bail;
        } else if (!(f.number == 2 && f.wire == LEN)) {
            goto bail;
        }
    }
    if (got != 0)
        goto bail;
    if (name == NULL && (name = PyUnicode_FromStringAndSize("", 0)) == NULL)
        goto bail;
    c = cursor(s, n);
    while (next_field(&c, &f) == 1) {
        if (f.number == 2) {
            PyObject *record = span_record(f.s, f.n, name, resource);
            if (record == NULL)
                goto bail;
            if (PyList_Append(out, record) < 0) {
                Py_DECREF(record);
                goto bail;
            }
            Py_DECREF(record);
        }
    }
    Py_DECREF(name);
    return 0;
bail:
    PyErr_Clear();
    Py_XDECREF(name);
    return BAIL;
}

/* ``Resource``: its attributes (bytes kept as bytes), the rest checked. New reference, or NULL. */
static PyObject *resource_attributes(const uint8_t *s, Py_ssize_t n) {
    Cur c = cursor(s, n);
    Field f;
    int got;
    PyObject *attributes = PyDict_New();
    if (attributes == NULL)
        return NULL;
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number == 1 && f.wire == LEN) {
            if (key_value(f.s, f.n, 0, 0, attributes) < 0)
                break;
        } else if (!(f.number == 2 && f.wire == VARINT && f.v <= UINT32_MAX)) {
            got = BAIL; /* entity_refs and unknown fields: upb's */
            break;
        }
    }
    if (got != 0) {
        Py_DECREF(attributes);
        return NULL;
    }
    return attributes;
}

/* ``ResourceSpans`` or ``ResourceLogs`` (the same fields): the resource found and the rest checked in a first
 * pass (it may come after its scopes); then ``scope`` for each scope's bytes, given ``resource_metadata`` of the
 * resource (spans) or None (logs: not read). 0, or BAIL. */
typedef int (*ScopeReader)(const uint8_t *s, Py_ssize_t n, PyObject *resource, PyObject *out);

static int resource_scopes(const uint8_t *s, Py_ssize_t n, ScopeReader scope, int with_metadata, PyObject *out) {
    Cur c = cursor(s, n);
    Field f;
    int got, has_resource = 0;
    const uint8_t *resource_at = (const uint8_t *)"";
    Py_ssize_t resource_size = 0;
    PyObject *attributes, *metadata;
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number == 1 && f.wire == LEN && !has_resource) {
            has_resource = 1;
            resource_at = f.s, resource_size = f.n;
        } else if (f.number == 3 && f.wire == LEN) {
            if (check_text(&f) < 0)
                return BAIL;
        } else if (!(f.number == 2 && f.wire == LEN)) {
            return BAIL;
        }
    }
    if (got != 0 || (attributes = resource_attributes(resource_at, resource_size)) == NULL)
        return BAIL;
    metadata = with_metadata ? PyObject_CallOneArg(resource_metadata, attributes) : Py_NewRef(Py_None);
    Py_DECREF(attributes);
    if (metadata == NULL)
        return BAIL;
    c = cursor(s, n);
    while (next_field(&c, &f) == 1) {
        if (f.number == 2 && scope(f.s, f.n, metadata, out) < 0) {
            Py_DECREF(metadata);
            return BAIL;
        }
    }
    Py_DECREF(metadata);
    return 0;
}

/* ``LogRecord`` -> ``LogRecordData``, as ``log_records_from_request`` makes it: new reference, or NULL. */
static PyObject *log_record(const uint8_t *s, Py_ssize_t n) {
    Cur c = cursor(s, n);
    Field f;
    int got, has_body = 0;
    const uint8_t *trace_id = NULL, *span_id = NULL;
    Py_ssize_t trace_size = 0, span_size = 0;
    uint64_t time = 0, observed = 0;
    PyObject *event_name = NULL, *attributes = PyDict_New(), *body = NULL, *record = NULL;
    if (attributes == NULL)
        goto bail;
    while ((got = next_field(&c, &f)) == 1) {
        switch (f.number) {
        case 1:
        case 11:
            if (f.wire != FIXED64)
                goto bail;
            *(f.number == 1 ? &time : &observed) = f.v;
            break;
        case 2: /* severity_number */
        case 7: /* dropped_attributes_count */
            if (f.wire != VARINT || f.v > (f.number == 2 ? INT32_MAX : UINT32_MAX))
                goto bail;
            break;
        case 3: /* severity_text */
            if (f.wire != LEN || check_text(&f) < 0)
                goto bail;
            break;
        case 5:
            if (f.wire != LEN || has_body || (body = any_value(f.s, f.n, 0, 0)) == NULL)
                goto bail;
            has_body = 1;
            break;
        case 6:
            if (f.wire != LEN || key_value(f.s, f.n, 0, 0, attributes) < 0)
                goto bail;
            break;
        case 8:
            if (f.wire != FIXED32)
                goto bail;
            break;
        case 9:
        case 10:
            if (f.wire != LEN)
                goto bail;
            if (f.number == 9)
                trace_id = f.s, trace_size = f.n;
            else
                span_id = f.s, span_size = f.n;
            break;
        case 12: {
            PyObject *t;
            if (f.wire != LEN || (t = text(&f)) == NULL)
                goto bail;
            replace(&event_name, t);
            break;
        }
        default:
            goto bail;
        }
    }
    if (got != 0 || (trace_size != 0 && trace_size != 16) || (span_size != 0 && span_size != 8))
        goto bail; /* an id of the wrong size: ``_optional_id``'s error to name */
    if (event_name != NULL && PyUnicode_GET_LENGTH(event_name) == 0)
        Py_CLEAR(event_name);
    if (event_name == NULL) { /* the older ``event.name`` attribute, as text when it is set */
        PyObject *named = PyDict_GetItemString(attributes, "event.name"); /* borrowed */
        int truthy = named == NULL ? 0 : PyObject_IsTrue(named);
        if (truthy < 0)
            goto bail;
        event_name = truthy ? PyObject_Str(named) : Py_NewRef(Py_None);
        if (event_name == NULL)
            goto bail;
    }
    if (body == NULL)
        body = Py_NewRef(Py_None);
    if ((record = new_record(log_type)) == NULL)
        goto bail;
    {
        PyObject **slot = log_slots;
        int failed =
            set(record, slot[LOG_TRACE_ID],
                trace_size == 0 || all_zero(trace_id, 16) ? Py_NewRef(Py_None) : id_int(trace_id, 16)) < 0 ||
            set(record, slot[LOG_SPAN_ID], span_size == 0 || all_zero(span_id, 8) ? Py_NewRef(Py_None) : id_int(span_id, 8)) < 0 ||
            set(record, slot[LOG_TIME], PyLong_FromUnsignedLongLong(time ? time : observed)) < 0 ||
            set(record, slot[LOG_EVENT_NAME], Py_NewRef(event_name)) < 0 ||
            set(record, slot[LOG_ATTRIBUTES], Py_NewRef(attributes)) < 0 || set(record, slot[LOG_BODY], Py_NewRef(body)) < 0;
        if (failed)
            goto bail;
    }
    Py_DECREF(event_name);
    Py_DECREF(attributes);
    Py_DECREF(body);
    return record;
bail:
    PyErr_Clear();
    Py_XDECREF(event_name);
    Py_XDECREF(attributes);
    Py_XDECREF(body);
    Py_XDECREF(record);
    return NULL;
}

/* ``ScopeLogs``: its log records appended to ``out`` (the scope is checked, not read). */
static int scope_logs(const uint8_t *s, Py_ssize_t n, PyObject *resource, PyObject *out) {
    Cur c = cursor(s, n);
    Field f;
    int got, has_scope = 0;
    (void)resource;
    while ((got = next_field(&c, &f)) == 1) {
        PyObject *item;
        if (f.number == 1 && f.wire == LEN && !has_scope) {
            has_scope = 1;
            if ((item = scope_name(f.s, f.n)) == NULL)
                return BAIL;
            Py_DECREF(item);
        } else if (f.number == 3 && f.wire == LEN) {
            if (check_text(&f) < 0)
                return BAIL;
        } else if (f.number == 2 && f.wire == LEN) {
            if ((item = log_record(f.s, f.n)) == NULL)
                return BAIL;
            got = PyList_Append(out, item);
            Py_DECREF(item);
            if (got < 0)
                return BAIL;
        } else {
            return BAIL;
        }
    }
    return got == 0 ? 0 : BAIL;
}

static int resource_spans(const uint8_t *s, Py_ssize_t n, PyObject *out) {
    return resource_scopes(s, n, scope_spans, 1, out);
}

static int resource_logs(const uint8_t *s, Py_ssize_t n, PyObject *out) {
    return resource_scopes(s, n, scope_logs, 0, out);
}

/* An export request (field 1: each resource's), read by ``resource``: the list, or None when declined. */
static PyObject *decode_request(PyObject *data, int (*resource)(const uint8_t *, Py_ssize_t, PyObject *)) {
    Py_buffer view;
    Cur c;
    Field f;
    int got;
    PyObject *out;
    if (record_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_otlp_native.configure() was not called");
        return NULL;
    }
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) { /* not contiguous bytes: the upb path's to read */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    c = cursor((const uint8_t *)view.buf, view.len);
    if ((out = PyList_New(0)) == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    while ((got = next_field(&c, &f)) == 1) {
        if (f.number != 1 || f.wire != LEN || resource(f.s, f.n, out) < 0) {
            got = BAIL;
            break;
        }
    }
    PyBuffer_Release(&view);
    PyErr_Clear();
    if (got != 0) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static PyObject *decode_spans(PyObject *module, PyObject *data) {
    (void)module;
    return decode_request(data, resource_spans);
}

static PyObject *decode_logs(PyObject *module, PyObject *data) {
    (void)module;
    return decode_request(data, resource_logs);
}

/* The member descriptors of ``type``'s slots ``names``, into ``out`` (new references). */
static int slot_descriptors(PyTypeObject *type, const char **names, int count, PyObject **out) {
    for (int i = 0; i < count; i++) {
        PyObject *descriptor = PyObject_GetAttrString((PyObject *)type, names[i]);
        if (descriptor == NULL)
            return -1;
        if (!Py_IS_TYPE(descriptor, &PyMemberDescr_Type)) {
            PyErr_Format(PyExc_TypeError, "configure: %s.%s is not a slot", type->tp_name, names[i]);
            Py_DECREF(descriptor);
            return -1;
        }
        out[i] = descriptor;
    }
    return 0;
}

static PyObject *configure(PyObject *module, PyObject *args) {
    PyObject *kinds, *statuses;
    (void)module;
    if (record_type != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure: already configured");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "O!O!O!OO!O!:configure", &PyType_Type, &record_type, &PyType_Type, &event_type,
                          &PyType_Type, &log_type, &resource_metadata, &PyTuple_Type, &kinds, &PyTuple_Type, &statuses))
        return NULL;
    if (PyTuple_GET_SIZE(kinds) != 7 || PyTuple_GET_SIZE(statuses) != 4) {
        record_type = NULL;
        PyErr_SetString(PyExc_ValueError, "configure: 6 kind names and a default, 3 status names and a default");
        return NULL;
    }
    if (slot_descriptors(record_type, record_slot_names, RECORD_SLOTS, record_slots) < 0 ||
        slot_descriptors(event_type, event_slot_names, EVENT_SLOTS, event_slots) < 0 ||
        slot_descriptors(log_type, log_slot_names, LOG_SLOTS, log_slots) < 0) {
        record_type = NULL;
        return NULL;
    }
    Py_INCREF(record_type), Py_INCREF(event_type), Py_INCREF(log_type), Py_INCREF(resource_metadata);
    for (int i = 0; i < 6; i++)
        kind_names[i] = Py_NewRef(PyTuple_GET_ITEM(kinds, i));
    kind_default = Py_NewRef(PyTuple_GET_ITEM(kinds, 6));
    for (int i = 0; i < 3; i++)
        status_names[i] = Py_NewRef(PyTuple_GET_ITEM(statuses, i));
    status_default = Py_NewRef(PyTuple_GET_ITEM(statuses, 3));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_spans", decode_spans, METH_O,
     "Span records of an OTLP ExportTraceServiceRequest, or None when this decoder does not read it."},
    {"decode_logs", decode_logs, METH_O,
     "Log records of an OTLP ExportLogsServiceRequest, or None when this decoder does not read it."},
    {"configure", configure, METH_VARARGS,
     "configure(SpanRecord, SpanEvent, LogRecordData, resource_metadata, kinds, statuses): once, before decoding"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_otlp_native",
                                        "OTLP trace requests decoded in C (see formats/otlp.py).", -1, methods,
                                        NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__otlp_native(void) {
    return PyModule_Create(&module_def);
}
