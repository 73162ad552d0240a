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

#ifdef _MSC_VER
#include <intrin.h>
#endif

/* The index of the lowest set bit of x (not 0). */
static inline int
ctz64(uint64_t x)
{
#ifdef _MSC_VER
    unsigned long i;
    _BitScanForward64(&i, x);
    return (int)i;
#else
    return __builtin_ctzll(x);
#endif
}

/* A little-endian 8-byte load's value on any host. */
static inline uint64_t
le64(uint64_t x)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(x);
#else
    return x;
#endif
}

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

/* ---- Avro: records of primitives to Arrow buffers (kafka_common/avro/compiled.py) ----
 *
 * decode_avro(program, data, offsets, starts, valid, bad)
 *
 * program: int32 words written by compiled.py: the column count, then per column its
 *   storage (AS_*) and whether it has a validity bitmap; the step count, then per step (a
 *   writer field, in writer order) the column it fills (-1: read past), its conversion
 *   (CV_*), its union branch count (0: not a union) and its branches (one when not a
 *   union), each a wire code (W_*) and an argument (fixed: the size; enum: the writer's
 *   symbol count, then that many reader symbol indices, -1 for none).
 * data: the values' bytes; offsets: int64 row bounds in data (n + 1); starts: int64 bytes
 *   before each row's datum, or None; valid: uint8 per row (0: a null value), or None;
 * bad: writable uint8 per row, set to 1 for each corrupt row (as the NumPy path flags it).
 * Returns one (validity, values, offsets) tuple of bytes or None per column, or None when
 * the program or the bounds are not as they must be (the caller runs the NumPy path).
 *
 * Every read is checked against its row's end; a column's string bytes never outgrow the
 * input's bytes, and every other buffer is a few bytes per row.
 */
enum { W_ERROR, W_NULL, W_BOOL, W_V5, W_V10, W_FLOAT, W_DOUBLE, W_BYTES, W_FIXED, W_ENUM };
enum { CV_NONE, CV_BOOL, CV_I32, CV_I64, CV_MS, CV_F32, CV_F64, CV_BIN, CV_ENUM };
enum { AS_BOOL, AS_I32, AS_I64, AS_F32, AS_F64, AS_BIN };

static const int conv_store[] = {-1, AS_BOOL, AS_I32, AS_I64, AS_I64, AS_F32, AS_F64,
                                 AS_BIN, AS_I32};
static const int store_width[] = {0, 4, 8, 4, 8, 0};

typedef struct {
    int32_t wire, arg;
    const int32_t *map;
} ABranch;

/* the steps fast_step takes */
enum { F_NONE, F_V5_I32, F_V10_I64, F_V10_MS, F_DOUBLE, F_BOOL, F_BYTES };

typedef struct {
    int32_t col, conv, nbr, fast;
    const ABranch *br;
} AStep;

typedef struct {
    int32_t store, nullable;
    PyObject *valid_obj, *data_obj, *offs_obj;
    uint8_t *valid;
    char *data;
    int32_t *offs;
    Py_ssize_t len, cap;
} ACol;

typedef struct {
    int32_t ncols, nsteps;
    ACol *cols;
    AStep *steps;
    ABranch *branches;
} AProgram;

static int
wire_fits(int32_t wire, int32_t conv)
{
    if (conv == CV_NONE || wire == W_ERROR || wire == W_NULL)
        return wire >= W_ERROR && wire <= W_ENUM;
    switch (wire) {
    case W_BOOL:
        return conv == CV_BOOL;
    case W_V5:
    case W_V10:
        return conv >= CV_I32 && conv <= CV_F64;
    case W_FLOAT:
        return conv == CV_F32 || conv == CV_F64;
    case W_DOUBLE:
        return conv == CV_F64;
    case W_BYTES:
    case W_FIXED:
        return conv == CV_BIN;
    case W_ENUM:
        return conv == CV_ENUM;
    }
    return 0;
}

/* The program's words into p (arrays owned by p). 0, or -1 when they are not a program. */
static int
parse_program(const int32_t *w, Py_ssize_t nw, AProgram *p)
{
    Py_ssize_t k = 0, nb = 0;
#define NEXT(x) do { if (k >= nw) return -1; (x) = w[k++]; } while (0)
    NEXT(p->ncols);
    if (p->ncols < 0 || p->ncols > nw)
        return -1;
    p->cols = PyMem_Calloc(p->ncols ? p->ncols : 1, sizeof(ACol));
    if (!p->cols)
        return -1;
    for (int32_t c = 0; c < p->ncols; c++) {
        NEXT(p->cols[c].store);
        NEXT(p->cols[c].nullable);
        if (p->cols[c].store < AS_BOOL || p->cols[c].store > AS_BIN)
            return -1;
    }
    NEXT(p->nsteps);
    if (p->nsteps < 0 || p->nsteps > nw)
        return -1;
    p->steps = PyMem_Calloc(p->nsteps ? p->nsteps : 1, sizeof(AStep));
    p->branches = PyMem_Calloc(nw ? nw : 1, sizeof(ABranch));
    if (!p->steps || !p->branches)
        return -1;
    for (int32_t s = 0; s < p->nsteps; s++) {
        AStep *st = &p->steps[s];
        NEXT(st->col);
        NEXT(st->conv);
        NEXT(st->nbr);
        if (st->col < -1 || st->col >= p->ncols || st->conv < CV_NONE || st->conv > CV_ENUM
                || st->nbr < 0 || st->nbr > nw - k || (st->col >= 0) != (st->conv != CV_NONE))
            return -1;
        if (st->col >= 0 && conv_store[st->conv] != p->cols[st->col].store)
            return -1;
        st->br = &p->branches[nb];
        for (int32_t i = 0; i < (st->nbr ? st->nbr : 1); i++) {
            ABranch *b = &p->branches[nb++];
            NEXT(b->wire);
            NEXT(b->arg);
            if (!wire_fits(b->wire, st->conv) || b->arg < 0)
                return -1;
            if (b->wire == W_ENUM) {
                if (b->arg > nw - k)
                    return -1;
                b->map = &w[k];
                k += b->arg;
            }
        }
    }
#undef NEXT
    for (int32_t s = 0; s < p->nsteps; s++) {
        AStep *st = &p->steps[s];
        int32_t wire = st->br[0].wire;
        if (st->nbr || st->col < 0 || p->cols[st->col].nullable)
            continue;
        if (wire == W_V5 && st->conv == CV_I32)
            st->fast = F_V5_I32;
        else if (wire == W_V10 && st->conv == CV_I64)
            st->fast = F_V10_I64;
        else if (wire == W_V10 && st->conv == CV_MS)
            st->fast = F_V10_MS;
        else if (wire == W_DOUBLE && st->conv == CV_F64)
            st->fast = F_DOUBLE;
        else if (wire == W_BOOL && st->conv == CV_BOOL)
            st->fast = F_BOOL;
        else if (wire == W_BYTES && st->conv == CV_BIN)
            st->fast = F_BYTES;
    }
    return k == nw ? 0 : -1;
}

/* A column's buffers for n rows, zeroed (bitmaps and values) and with offsets[0] = 0; a
 * string column's bytes start with an equal share of the input's (nbin string columns). */
static int
alloc_column(ACol *c, Py_ssize_t n, Py_ssize_t data_len, Py_ssize_t nbin)
{
    char *raw = NULL;
    if (c->nullable) {
        c->valid_obj = new_bitmap(n, &c->valid);
        if (!c->valid_obj)
            return -1;
    }
    if (c->store == AS_BOOL) {
        c->data_obj = new_bitmap(n, (uint8_t **)&c->data);
        return c->data_obj ? 0 : -1;
    }
    if (c->store != AS_BIN) {
        c->data_obj = new_bytes(n * store_width[c->store], &c->data);
        if (c->data_obj)
            memset(c->data, 0, (size_t)(n * store_width[c->store]));
        return c->data_obj ? 0 : -1;
    }
    c->offs_obj = new_bytes((n + 1) * 4, &raw);
    if (!c->offs_obj)
        return -1;
    c->offs = (int32_t *)raw;
    c->offs[0] = 0;
    c->cap = data_len / nbin + 4096 < data_len ? data_len / nbin + 4096 : data_len;
    c->data_obj = new_bytes(c->cap, &c->data);
    return c->data_obj ? 0 : -1;
}

/* Append len bytes to a string column; its capacity grows by doubling, never past limit
 * (the input's size, which bounds what a column can hold). */
static int
append_bytes(ACol *c, const uint8_t *src, Py_ssize_t len, Py_ssize_t limit)
{
    if (len > c->cap - c->len) {
        Py_ssize_t cap = c->cap * 2 > c->len + len ? c->cap * 2 : c->len + len;
        if (cap > limit)
            cap = limit;
        if (cap < c->len + len) {
            PyErr_SetString(PyExc_ValueError, "decode_avro: a column outgrew its input");
            return -1;
        }
        if (_PyBytes_Resize(&c->data_obj, cap))
            return -1;
        c->data = PyBytes_AS_STRING(c->data_obj);
        c->cap = cap;
    }
    memcpy(c->data + c->len, src, (size_t)len);
    c->len += len;
    return 0;
}

/* One value of a step's wire format at *p, before e. */
typedef struct {
    int64_t v;
    uint32_t bits32;
    uint64_t bits64;
    Py_ssize_t at, len;
} AValue;

/* Reads the step's value (its union branch first); 1: null, 0: read, -1: corrupt. */
static int
read_value(const AStep *st, const uint8_t *d, Py_ssize_t *pos, Py_ssize_t e, int32_t *wire,
           AValue *out)
{
    Py_ssize_t p = *pos;
    const ABranch *b = st->br;
    if (st->nbr > 0) {
        int64_t k;
        if (read_varint(d, &p, e, 5, &k) || k < 0 || k >= st->nbr)
            return -1;
        b = &st->br[k];
    }
    *wire = b->wire;
    switch (b->wire) {
    case W_ERROR:
        return -1;
    case W_NULL:
        *pos = p;
        return 1;
    case W_BOOL:
        if (e - p < 1)
            return -1;
        out->v = d[p] == 1;
        p += 1;
        break;
    case W_V5:
    case W_V10:
        if (read_varint(d, &p, e, b->wire == W_V5 ? 5 : 10, &out->v))
            return -1;
        break;
    case W_FLOAT:
        if (e - p < 4)
            return -1;
        memcpy(&out->bits32, d + p, 4);
        p += 4;
        break;
    case W_DOUBLE:
        if (e - p < 8)
            return -1;
        memcpy(&out->bits64, d + p, 8);
        p += 8;
        break;
    case W_BYTES:
        if (read_varint(d, &p, e, 10, &out->v) || out->v < 0 || out->v > e - p)
            return -1;
        out->at = p;
        out->len = (Py_ssize_t)out->v;
        p += out->len;
        break;
    case W_FIXED:
        if (b->arg > e - p)
            return -1;
        out->at = p;
        out->len = b->arg;
        p += b->arg;
        break;
    case W_ENUM:
        if (read_varint(d, &p, e, 5, &out->v) || out->v < 0 || out->v >= b->arg
                || b->map[out->v] < 0)
            return -1;
        out->v = b->map[out->v];
        break;
    }
    *pos = p;
    return 0;
}

/* Stores a value read into row i of the step's column; -1 when it cannot be (corrupt),
 * -2 on a Python error. */
static int
store_value(const AStep *st, ACol *c, Py_ssize_t i, int32_t wire, const AValue *x,
            const uint8_t *d, Py_ssize_t limit)
{
    int is_int = wire == W_V5 || wire == W_V10;
    switch (st->conv) {
    case CV_BOOL:
        if (x->v)
            c->data[i >> 3] |= (char)(1 << (i & 7));
        break;
    case CV_I32:
    case CV_ENUM:
        ((int32_t *)c->data)[i] = (int32_t)x->v;
        break;
    case CV_I64:
        ((int64_t *)c->data)[i] = x->v;
        break;
    case CV_MS: /* as the NumPy path: |v| beyond the microsecond range (abs(min) wraps) */
        if (x->v != INT64_MIN && (x->v > MAX_MS || x->v < -MAX_MS))
            return -1;
        ((int64_t *)c->data)[i] = (int64_t)((uint64_t)x->v * 1000u);
        break;
    case CV_F32:
        if (is_int)
            ((float *)c->data)[i] = (float)x->v;
        else
            memcpy(c->data + 4 * i, &x->bits32, 4);
        break;
    case CV_F64:
        if (is_int) {
            ((double *)c->data)[i] = (double)x->v;
        } else if (wire == W_FLOAT) {
            float f;
            memcpy(&f, &x->bits32, 4);
            ((double *)c->data)[i] = (double)f;
        } else {
            memcpy(c->data + 8 * i, &x->bits64, 8);
        }
        break;
    case CV_BIN:
        if (append_bytes(c, d + x->at, x->len, limit))
            return -2;
        c->offs[i + 1] = (int32_t)c->len;
        break;
    }
    if (c->valid)
        c->valid[i >> 3] |= (uint8_t)(1 << (i & 7));
    return 0;
}

/* read_varint with the same answers, faster: when 8 bytes of the buffer (size limit) are
 * there, a varint of up to 8 bytes is found and packed from one 8-byte load. */
static inline int
read_varint_fast(const uint8_t *d, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t limit,
                 int max_bytes, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (limit - p >= 8) {
        uint64_t x;
        memcpy(&x, d + p, 8);
        x = le64(x);
        uint64_t stop = ~x & 0x8080808080808080ULL;
        if (stop) {
            int len = (ctz64(stop) >> 3) + 1;
            if (len > end - p || len > max_bytes)
                return -1;
            if (len < 8)
                x &= (1ULL << (8 * len)) - 1;
            x &= 0x7F7F7F7F7F7F7F7FULL;
            x = (x & 0x007F007F007F007FULL) | ((x & 0x7F007F007F007F00ULL) >> 1);
            x = (x & 0x00003FFF00003FFFULL) | ((x & 0x3FFF00003FFF0000ULL) >> 2);
            x = (x & 0x000000000FFFFFFFULL) | ((x & 0x0FFFFFFF00000000ULL) >> 4);
            if (max_bytes <= 5 && (x >> 32) != 0)
                return -1;  /* beyond 32 bits */
            *out = (int64_t)((x >> 1) ^ (0 - (x & 1)));
            *pos = p + len;
            return 0;
        }
    }
    return read_varint(d, pos, end, max_bytes, out);
}

/* The common steps (one value, no union, a column without nulls) in one switch: 0, 1 when
 * corrupt, -1 on a Python error, 2 when the step is not one of them. */
static inline int
fast_step(const AStep *st, ACol *c, const uint8_t *d, Py_ssize_t *pos, Py_ssize_t e,
          Py_ssize_t i, Py_ssize_t limit)
{
    Py_ssize_t p = *pos;
    int64_t v;
    switch (st->fast) {
    case F_V5_I32:
    case F_V10_I64:
    case F_V10_MS:
        if (read_varint_fast(d, &p, e, limit, st->fast == F_V5_I32 ? 5 : 10, &v))
            return 1;
        if (st->fast == F_V5_I32) {
            ((int32_t *)c->data)[i] = (int32_t)v;
        } else if (st->fast == F_V10_I64) {
            ((int64_t *)c->data)[i] = v;
        } else {
            if (v != INT64_MIN && (v > MAX_MS || v < -MAX_MS))
                return 1;
            ((int64_t *)c->data)[i] = (int64_t)((uint64_t)v * 1000u);
        }
        break;
    case F_DOUBLE:
        if (e - p < 8)
            return 1;
        memcpy(c->data + 8 * i, d + p, 8);
        p += 8;
        break;
    case F_BOOL:
        if (e - p < 1)
            return 1;
        if (d[p] == 1)
            c->data[i >> 3] |= (char)(1 << (i & 7));
        p += 1;
        break;
    case F_BYTES:
        if (read_varint_fast(d, &p, e, limit, 10, &v) || v < 0 || v > e - p)
            return 1;
        if (append_bytes(c, d + p, (Py_ssize_t)v, limit))
            return -1;
        c->offs[i + 1] = (int32_t)c->len;
        p += (Py_ssize_t)v;
        break;
    default:
        return 2;
    }
    *pos = p;
    return 0;
}

/* Row i, its datum in d[p:e]: 0, 1 when corrupt, -1 on a Python error. */
static int
decode_row(const AProgram *pr, const uint8_t *d, Py_ssize_t p, Py_ssize_t e, Py_ssize_t i,
           Py_ssize_t limit)
{
    for (int32_t s = 0; s < pr->nsteps; s++) {
        const AStep *st = &pr->steps[s];
        if (st->fast) {
            int f = fast_step(st, &pr->cols[st->col], d, &p, e, i, limit);
            if (f != 2) {
                if (f)
                    return f;
                continue;
            }
        }
        AValue x = {0, 0, 0, 0, 0};
        int32_t wire = W_ERROR;
        int r = read_value(st, d, &p, e, &wire, &x);
        if (r < 0)
            return 1;
        if (r > 0 || st->col < 0)
            continue;
        r = store_value(st, &pr->cols[st->col], i, wire, &x, d, limit);
        if (r == -1)
            return 1;
        if (r < 0)
            return -1;
    }
    return 0;
}

static int64_t
load_i64(const char *base, Py_ssize_t i)
{
    int64_t v;
    memcpy(&v, base + 8 * i, 8);
    return v;
}

/* Checks the row bounds: offsets rising within data, starts not negative. */
static int
bounds_ok(const Py_buffer *off, const Py_buffer *starts, Py_ssize_t n, Py_ssize_t data_len)
{
    int64_t prev = 0;
    for (Py_ssize_t i = 0; i <= n; i++) {
        int64_t o = load_i64(off->buf, i);
        if (o < prev || o > data_len)
            return 0;
        prev = o;
        if (i < n && starts && load_i64(starts->buf, i) < 0)
            return 0;
    }
    return 1;
}

static PyObject *
avro_columns(AProgram *pr, const Py_buffer *data, const Py_buffer *off, const Py_buffer *starts,
             const Py_buffer *valid, uint8_t *bad, Py_ssize_t n)
{
    const uint8_t *d = data->buf;
    const uint8_t *ok = valid ? valid->buf : NULL;
    Py_ssize_t nbin = 0;
    for (int32_t c = 0; c < pr->ncols; c++)
        nbin += pr->cols[c].store == AS_BIN;
    for (int32_t c = 0; c < pr->ncols; c++)
        if (alloc_column(&pr->cols[c], n, data->len, nbin))
            return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        for (int32_t c = 0; c < pr->ncols; c++)
            if (pr->cols[c].offs)
                pr->cols[c].offs[i + 1] = (int32_t)pr->cols[c].len;
        if (ok && !ok[i])
            continue;
        int64_t b = load_i64(off->buf, i), e = load_i64(off->buf, i + 1);
        int64_t skip = starts ? load_i64(starts->buf, i) : 0;
        if (skip > e - b) { /* the header is longer than the value */
            bad[i] = 1;
            continue;
        }
        int r = decode_row(pr, d, (Py_ssize_t)(b + skip), (Py_ssize_t)e, i, data->len);
        if (r < 0)
            return NULL;
        if (r)
            bad[i] = 1;
    }
    PyObject *out = PyList_New(pr->ncols);
    if (!out)
        return NULL;
    for (int32_t c = 0; c < pr->ncols; c++) {
        ACol *col = &pr->cols[c];
        if (col->store == AS_BIN && _PyBytes_Resize(&col->data_obj, col->len)) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject *t = PyTuple_Pack(3, col->valid_obj ? col->valid_obj : Py_None, col->data_obj,
                                   col->offs_obj ? col->offs_obj : Py_None);
        if (!t) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, c, t);
    }
    return out;
}

static PyObject *
decode_avro(PyObject *self, PyObject *args)
{
    PyObject *objs[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5]))
        return NULL;
    Py_buffer views[6];
    int got[6] = {0, 0, 0, 0, 0, 0};
    AProgram pr = {0, 0, NULL, NULL, NULL};
    PyObject *result = NULL;
    for (int j = 0; j < 6; j++) {
        if (objs[j] == Py_None && (j == 3 || j == 4))
            continue;
        if (PyObject_GetBuffer(objs[j], &views[j], j == 5 ? PyBUF_WRITABLE : PyBUF_SIMPLE))
            goto done;
        got[j] = 1;
    }
    Py_ssize_t n = views[5].len;
    if (views[0].len % 4 || views[2].len != 8 * (n + 1) || views[1].len > INT32_MAX
            || (got[3] && views[3].len != 8 * n) || (got[4] && views[4].len != n)
            || !bounds_ok(&views[2], got[3] ? &views[3] : NULL, n, views[1].len)
            || parse_program(views[0].buf, views[0].len / 4, &pr)) {
        if (PyErr_Occurred())
            goto done;
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = avro_columns(&pr, &views[1], &views[2], got[3] ? &views[3] : NULL,
                          got[4] ? &views[4] : NULL, views[5].buf, n);
done:
    for (int32_t c = 0; pr.cols && c < pr.ncols; c++) {
        Py_XDECREF(pr.cols[c].valid_obj);
        Py_XDECREF(pr.cols[c].data_obj);
        Py_XDECREF(pr.cols[c].offs_obj);
    }
    PyMem_Free(pr.cols);
    PyMem_Free(pr.steps);
    PyMem_Free(pr.branches);
    for (int j = 0; j < 6; j++)
        if (got[j])
            PyBuffer_Release(&views[j]);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_sections", decode_sections, METH_VARARGS,
     "Kafka records sections to Arrow buffers, or None when the pure path must decide."},
    {"decode_avro", decode_avro, METH_VARARGS,
     "Avro records of primitives to Arrow buffers, or None when the NumPy path must."},
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
