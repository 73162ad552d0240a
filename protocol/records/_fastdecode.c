/* The optional compiled record decoder: the records sections of Kafka record batches
 * (magic 2) straight to the buffers of Arrow columns. See accel.py and decode_arrow.py.
 *
 * decode_sections(sections, base_offset, last_delta, base_timestamp, max_timestamp,
 *                 log_append, count, start_offset, end_offset, include_headers)
 *
 * The first seven arguments are lists, one item per batch: the records section (any
 * contiguous buffer) and the batch header fields. Every record of every batch is checked
 * as the pure path checks it (decode_arrow._decode_arena); records with start_offset <=
 * offset < end_offset (end_offset None: no bound) are kept.
 *
 * Returns None when anything is not as it must be (the caller then runs the pure path on
 * the same bytes, which raises the exact error), else the tuple
 *   (rows, key_offsets, key_validity, key_data, value_offsets, value_validity, value_data,
 *    offsets, timestamps_us, timestamp_types, headers)
 * of bytes objects (int32 Arrow offsets, LSB bitmaps or None when nothing is null, int64
 * offsets and microsecond timestamps, int32 timestamp types); headers is None when no kept
 * record has one (or include_headers is false), else
 *   (list_offsets, list_validity, hkey_offsets, hkey_data, hvalue_offsets,
 *    hvalue_validity, hvalue_data).
 *
 * Every read is bounds-checked against its section: a length from the input is never
 * trusted before it is compared with the bytes that are there.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Kafka timestamps are milliseconds, Spark's microseconds in an int64. */
#define MAX_MS (INT64_MAX / 1000)
#define MIN_MS (-(INT64_MAX / 1000))

typedef struct {
    int64_t offset, ts_ms;
    const uint8_t *base;     /* the record's section */
    int32_t key_start, key_len, value_start, value_len, hdr_pos, hdr_count, ts_type;
} Rec;

/* A zigzag varint of at most max_bytes bytes (5: 32 bits, 10: 64 bits) at *pos, before
 * end. 0 on success; -1 when it runs to end, is too long or overflows. */
static inline int
read_varint(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, int max_bytes, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && d[p] < 0x80) {  /* one byte: almost every field */
        uint64_t raw = d[p];
        *out = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
        *pos = p + 1;
        return 0;
    }
    uint64_t raw = 0;
    int limit_bits = max_bytes <= 5 ? 32 : 64;
    for (int i = 0, shift = 0; i < max_bytes; i++, shift += 7) {
        if (p >= end)
            return -1;
        uint64_t b = d[p++];
        uint64_t part = b & 0x7F;
        if (shift + 7 > limit_bits && (part >> (limit_bits - shift)) != 0)
            return -1;
        raw |= part << shift;
        if (b < 0x80) {
            *out = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
            *pos = p;
            return 0;
        }
    }
    return -1;
}

/* The records of one section; kept ones appended at recs[*kept]. 0, or -1 when the
 * section is not exactly `count` well-formed records. */
static int
walk_section(const uint8_t *d, Py_ssize_t size, int64_t count, int64_t base_offset,
             int64_t last_delta, int64_t base_ts, int64_t max_ts, int log_append,
             int64_t start_offset, int has_end, int64_t end_offset, Rec *recs,
             Py_ssize_t *kept, int64_t *header_total)
{
    Py_ssize_t p = 0;
    int64_t prev_delta = -1;
    for (int64_t i = 0; i < count; i++) {
        int64_t length, ts_delta, offset_delta, key_len, value_len;
        /* the length prefix: as the pure walk, up to 5 bytes, any value below 6 refused */
        Py_ssize_t q = p;
        uint64_t raw = 0;
        int shift = 0;
        for (;;) {
            if (q >= size || shift > 28)
                return -1;
            uint64_t b = d[q++];
            raw |= (b & 0x7F) << shift;
            shift += 7;
            if (b < 0x80)
                break;
        }
        length = (int64_t)((raw >> 1) ^ (0 - (raw & 1)));
        if (length < 6 || length > size - q)
            return -1;
        Py_ssize_t end = q + length;
        Py_ssize_t pos = q + 1;  /* the attributes byte, unused */
        if (read_varint(d, &pos, end, 10, &ts_delta) || read_varint(d, &pos, end, 5, &offset_delta))
            return -1;
        if (read_varint(d, &pos, end, 5, &key_len) || key_len < -1)
            return -1;
        Py_ssize_t key_start = pos;
        if (key_len > 0) {
            if (key_len > end - pos)
                return -1;
            pos += key_len;
        }
        if (read_varint(d, &pos, end, 5, &value_len) || value_len < -1)
            return -1;
        Py_ssize_t value_start = pos;
        if (value_len > 0) {
            if (value_len > end - pos)
                return -1;
            pos += value_len;
        }
        int64_t hdr_count = 0;
        Py_ssize_t hdr_pos = pos;
        if (!(pos == end - 1 && d[pos] == 0)) {
            if (read_varint(d, &pos, end, 5, &hdr_count) || hdr_count < 0
                    || hdr_count * 2 > end - pos)
                return -1;
            hdr_pos = pos;
            for (int64_t h = 0; h < hdr_count; h++) {
                int64_t kl = 0, vl = 0;
                if (read_varint(d, &pos, end, 5, &kl) || kl < 0 || kl > end - pos)
                    return -1;
                pos += kl;
                if (read_varint(d, &pos, end, 5, &vl) || vl < -1)
                    return -1;
                if (vl > 0) {
                    if (vl > end - pos)
                        return -1;
                    pos += vl;
                }
            }
            if (pos != end)
                return -1;
        }
        if (offset_delta < 0 || offset_delta > last_delta)
            return -1;
        if (i > 0 && offset_delta <= prev_delta)
            return -1;
        prev_delta = offset_delta;
        /* numpy's int64 arithmetic wraps: so does this (as unsigned) */
        int64_t offset = (int64_t)((uint64_t)base_offset + (uint64_t)offset_delta);
        if (offset >= start_offset && (!has_end || offset < end_offset)) {
            int64_t ts = log_append ? max_ts : (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta);
            if (ts > MAX_MS || ts < MIN_MS)
                return -1;
            Rec *r = &recs[(*kept)++];
            r->offset = offset;
            r->ts_ms = ts;
            r->base = d;
            r->key_start = (int32_t)key_start;
            r->key_len = (int32_t)key_len;
            r->value_start = (int32_t)value_start;
            r->value_len = (int32_t)value_len;
            r->hdr_pos = (int32_t)hdr_pos;
            r->hdr_count = (int32_t)hdr_count;
            r->ts_type = log_append;
            *header_total += hdr_count;
        }
        p = end;
    }
    return p == size ? 0 : -1;
}

static PyObject *
new_bytes(Py_ssize_t size, char **data)
{
    PyObject *b = PyBytes_FromStringAndSize(NULL, size);
    if (b != NULL)
        *data = PyBytes_AS_STRING(b);
    return b;
}

/* A zeroed LSB bitmap for n items. */
static PyObject *
new_bitmap(Py_ssize_t n, uint8_t **data)
{
    char *raw;
    PyObject *b = new_bytes((n + 7) / 8, &raw);
    if (b != NULL) {
        memset(raw, 0, (n + 7) / 8);
        *data = (uint8_t *)raw;
    }
    return b;
}

/* Headers of the kept records into Arrow buffers (all already checked by walk_section). */
static PyObject *
build_headers(const Rec *recs, Py_ssize_t n, int64_t total)
{
    /* first the sizes of the key and value data */
    Py_ssize_t key_bytes = 0, value_bytes = 0, list_nulls = 0, value_nulls = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Rec *r = &recs[i];
        Py_ssize_t pos = r->hdr_pos;
        if (r->hdr_count == 0)
            list_nulls++;
        for (int32_t h = 0; h < r->hdr_count; h++) {
            int64_t kl = 0, vl = 0;
            read_varint(r->base, &pos, PY_SSIZE_T_MAX, 5, &kl);
            pos += kl;
            key_bytes += kl;
            read_varint(r->base, &pos, PY_SSIZE_T_MAX, 5, &vl);
            if (vl > 0) {
                pos += vl;
                value_bytes += vl;
            } else if (vl < 0) {
                value_nulls++;
            }
        }
    }
    if (key_bytes > INT32_MAX || value_bytes > INT32_MAX || total > INT32_MAX)
        Py_RETURN_NONE;
    char *lo_c = NULL, *ko_c = NULL, *kd = NULL, *vo_c = NULL, *vd = NULL;
    uint8_t *lv = NULL, *vv = NULL;
    PyObject *list_offsets = new_bytes((n + 1) * 4, &lo_c);
    PyObject *list_valid = list_nulls ? new_bitmap(n, &lv) : (Py_INCREF(Py_None), Py_None);
    PyObject *key_offsets = new_bytes((total + 1) * 4, &ko_c);
    PyObject *key_data = new_bytes(key_bytes, &kd);
    PyObject *value_offsets = new_bytes((total + 1) * 4, &vo_c);
    PyObject *value_valid = value_nulls ? new_bitmap(total, &vv) : (Py_INCREF(Py_None), Py_None);
    PyObject *value_data = new_bytes(value_bytes, &vd);
    if (!list_offsets || !list_valid || !key_offsets || !key_data || !value_offsets
            || !value_valid || !value_data) {
        Py_XDECREF(list_offsets); Py_XDECREF(list_valid); Py_XDECREF(key_offsets);
        Py_XDECREF(key_data); Py_XDECREF(value_offsets); Py_XDECREF(value_valid);
        Py_XDECREF(value_data);
        return NULL;
    }
    int32_t *lo = (int32_t *)lo_c, *ko = (int32_t *)ko_c, *vo = (int32_t *)vo_c;
    int32_t entries = 0, kpos = 0, vpos = 0;
    lo[0] = 0;
    ko[0] = 0;
    vo[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Rec *r = &recs[i];
        Py_ssize_t pos = r->hdr_pos;
        if (r->hdr_count && lv)
            lv[i >> 3] |= (uint8_t)(1 << (i & 7));
        for (int32_t h = 0; h < r->hdr_count; h++) {
            int64_t kl = 0, vl = 0;
            read_varint(r->base, &pos, PY_SSIZE_T_MAX, 5, &kl);
            memcpy(kd + kpos, r->base + pos, (size_t)kl);
            pos += kl;
            kpos += (int32_t)kl;
            read_varint(r->base, &pos, PY_SSIZE_T_MAX, 5, &vl);
            if (vl >= 0) {
                memcpy(vd + vpos, r->base + pos, (size_t)vl);
                pos += vl;
                vpos += (int32_t)vl;
                if (vv)
                    vv[entries >> 3] |= (uint8_t)(1 << (entries & 7));
            }
            entries++;
            ko[entries] = kpos;
            vo[entries] = vpos;
        }
        lo[i + 1] = entries;
    }
    return Py_BuildValue("(NNNNNNN)", list_offsets, list_valid, key_offsets, key_data,
                         value_offsets, value_valid, value_data);
}

/* Keys or values of the kept records: offsets, validity (None when none is null), data. */
static int
build_binary(const Rec *recs, Py_ssize_t n, int values, PyObject **offsets_out,
             PyObject **valid_out, PyObject **data_out)
{
    Py_ssize_t bytes = 0, nulls = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t len = values ? recs[i].value_len : recs[i].key_len;
        if (len < 0)
            nulls++;
        else
            bytes += len;
    }
    if (bytes > INT32_MAX)
        return 1;
    char *oc = NULL, *data = NULL;
    uint8_t *valid = NULL;
    PyObject *offsets = new_bytes((n + 1) * 4, &oc);
    PyObject *validity = nulls ? new_bitmap(n, &valid) : (Py_INCREF(Py_None), Py_None);
    PyObject *blob = new_bytes(bytes, &data);
    if (!offsets || !validity || !blob) {
        Py_XDECREF(offsets); Py_XDECREF(validity); Py_XDECREF(blob);
        return -1;
    }
    int32_t *o = (int32_t *)oc;
    int32_t at = 0;
    o[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Rec *r = &recs[i];
        int32_t start = values ? r->value_start : r->key_start;
        int32_t len = values ? r->value_len : r->key_len;
        if (len >= 0) {
            memcpy(data + at, r->base + start, (size_t)len);
            at += len;
            if (valid)
                valid[i >> 3] |= (uint8_t)(1 << (i & 7));
        }
        o[i + 1] = at;
    }
    *offsets_out = offsets;
    *valid_out = validity;
    *data_out = blob;
    return 0;
}

static int
list_int64(PyObject *list, Py_ssize_t i, int64_t *out)
{
    long long v = PyLong_AsLongLong(PyList_GET_ITEM(list, i));
    if (v == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)v;
    return 0;
}

static PyObject *
decode_sections(PyObject *self, PyObject *args)
{
    PyObject *sections, *base_offsets, *last_deltas, *base_tss, *max_tss, *log_appends, *counts;
    long long start_offset;
    PyObject *end_obj;
    int include_headers;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O!O!LOp", &PyList_Type, &sections, &PyList_Type,
                          &base_offsets, &PyList_Type, &last_deltas, &PyList_Type, &base_tss,
                          &PyList_Type, &max_tss, &PyList_Type, &log_appends, &PyList_Type,
                          &counts, &start_offset, &end_obj, &include_headers))
        return NULL;
    Py_ssize_t nb = PyList_GET_SIZE(sections);
    if (PyList_GET_SIZE(base_offsets) != nb || PyList_GET_SIZE(last_deltas) != nb
            || PyList_GET_SIZE(base_tss) != nb || PyList_GET_SIZE(max_tss) != nb
            || PyList_GET_SIZE(log_appends) != nb || PyList_GET_SIZE(counts) != nb) {
        PyErr_SetString(PyExc_ValueError, "decode_sections: lists of different lengths");
        return NULL;
    }
    int has_end = end_obj != Py_None;
    long long end_offset = 0;
    if (has_end) {
        end_offset = PyLong_AsLongLong(end_obj);
        if (end_offset == -1 && PyErr_Occurred())
            return NULL;
    }
    int64_t total = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        int64_t c;
        if (list_int64(counts, b, &c))
            return NULL;
        if (c < 0)
            Py_RETURN_NONE;
        total += c;
        if (total > INT32_MAX)
            Py_RETURN_NONE;
    }
    Py_buffer *views = PyMem_Calloc(nb ? nb : 1, sizeof(Py_buffer));
    Rec *recs = NULL;
    int64_t *meta = PyMem_Malloc((nb ? nb : 1) * 6 * sizeof(int64_t));
    PyObject *result = NULL;
    Py_ssize_t got = 0, kept = 0;
    if (!views || !meta) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nb; got++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(sections, got), &views[got], PyBUF_SIMPLE))
            goto done;
        if (views[got].len > INT32_MAX) {
            got++;
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    int64_t header_total = 0;
    for (Py_ssize_t b = 0; b < nb; b++) {
        int64_t *m = &meta[6 * b];
        if (list_int64(base_offsets, b, &m[0]) || list_int64(last_deltas, b, &m[1])
                || list_int64(base_tss, b, &m[2]) || list_int64(max_tss, b, &m[3])
                || list_int64(log_appends, b, &m[4]) || list_int64(counts, b, &m[5]))
            goto done;
    }
    /* The GIL stays held: no other thread may change the bytes between the checks and the
     * copies (the copies trust what the checks saw). A record takes 7 bytes at least: a
     * count beyond that is refused before the per-record table is allocated. */
    int bad = 0;
    for (Py_ssize_t b = 0; b < nb && !bad; b++)
        bad = meta[6 * b + 5] > views[b].len / 7;
    if (!bad) {
        recs = PyMem_Malloc((total ? total : 1) * sizeof(Rec));
        if (!recs) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (Py_ssize_t b = 0; b < nb && !bad; b++) {
        const int64_t *m = &meta[6 * b];
        bad = walk_section((const uint8_t *)views[b].buf, views[b].len, m[5], m[0], m[1], m[2],
                           m[3], m[4] != 0, start_offset, has_end, end_offset, recs, &kept,
                           &header_total);
    }
    if (bad) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    {
        PyObject *ko = NULL, *kv = NULL, *kd = NULL, *vo = NULL, *vv = NULL, *vd = NULL;
        PyObject *offsets = NULL, *stamps = NULL, *types = NULL, *headers = NULL;
        int r1 = build_binary(recs, kept, 0, &ko, &kv, &kd);
        if (r1 < 0)
            goto done;
        int r2 = r1 ? 1 : build_binary(recs, kept, 1, &vo, &vv, &vd);
        if (r1 || r2) {
            Py_XDECREF(ko); Py_XDECREF(kv); Py_XDECREF(kd);
            if (r2 < 0)
                goto done;
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        char *oc = NULL, *sc = NULL, *tc = NULL;
        offsets = new_bytes(kept * 8, &oc);
        stamps = new_bytes(kept * 8, &sc);
        types = new_bytes(kept * 4, &tc);
        if (include_headers && header_total)
            headers = build_headers(recs, kept, header_total);
        else {
            headers = Py_None;
            Py_INCREF(headers);
        }
        if (!offsets || !stamps || !types || !headers) {
            Py_XDECREF(ko); Py_XDECREF(kv); Py_XDECREF(kd); Py_XDECREF(vo); Py_XDECREF(vv);
            Py_XDECREF(vd); Py_XDECREF(offsets); Py_XDECREF(stamps); Py_XDECREF(types);
            Py_XDECREF(headers);
            goto done;
        }
        int64_t *o = (int64_t *)oc, *s = (int64_t *)sc;
        int32_t *t = (int32_t *)tc;
        Py_ssize_t i;
        for (i = 0; i < kept; i++) {
            o[i] = recs[i].offset;
            s[i] = recs[i].ts_ms * 1000;
            t[i] = recs[i].ts_type;
        }
        result = Py_BuildValue("(nNNNNNNNNNN)", kept, ko, kv, kd, vo, vv, vd, offsets, stamps,
                               types, headers);
    }
done:
    for (Py_ssize_t b = 0; b < got; b++)
        PyBuffer_Release(&views[b]);
    PyMem_Free(views);
    PyMem_Free(recs);
    PyMem_Free(meta);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_sections", decode_sections, METH_VARARGS,
     "Kafka records sections to Arrow buffers, or None when the pure path must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastdecode",
    "The optional compiled record decoder of protocol.records (see accel.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastdecode(void)
{
    return PyModule_Create(&module);
}
