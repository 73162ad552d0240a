/* The optional compiled record encoder: the records section of a Kafka record batch
 * (magic 2) written straight from the buffers of Arrow columns, the rows picked by index.
 * See accel.py and encode_arrow.py (RowSource, encode_rows), whose pure path writes the
 * same bytes.
 *
 * encode_section(rows, ts_delta, first_offset_delta,
 *                key_starts, key_lens, key_data,
 *                value_starts, value_lens, value_data,
 *                header_firsts, header_counts,
 *                hkey_starts, hkey_lens, hkey_data,
 *                hvalue_starts, hvalue_lens, hvalue_data)
 *
 * rows: int64 indices of the source rows to encode, in order (None: every source row, in
 * order); ts_delta: int64, one per encoded record (its timestamp minus the batch's first);
 * record i gets offset delta first_offset_delta + i. Per source row: *_starts the byte
 * position in *_data, *_lens the length (-1: null), int64 arrays; key_* None: every key
 * null. header_firsts / header_counts (int64 per source row, None: no headers) index the
 * flattened header arrays hkey_* / hvalue_* (header keys are never null).
 *
 * Returns the records section as bytes, or None when a record would be 2 GiB or more (the
 * pure path then raises its error). With a bytearray as the optional last argument
 * (``out``) the section is appended to it instead (one pass, no copy of the section: the
 * caller writes the batch header in front and its CRC in place) and the new length of
 * ``out`` is returned (None as above, ``out`` left as it was). Every index and length is
 * checked against the buffer it points into (ValueError): they come from the caller's
 * Arrow arrays, never from the wire, so a failed check is a bug in the caller.
 *
 * base_sizes(...) and murmur2(...) below serve the writer's sizing and key partitioning
 * the same way: loops over the same per-row buffers, equal to their numpy versions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t
zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int
varint_size(uint64_t u)
{
    int n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
put_varint(uint8_t *p, uint64_t u)
{
    while (u >= 0x80) {
        *p++ = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    *p++ = (uint8_t)u;
    return p;
}

/* A bytes-like argument (None allowed when `optional`): view->buf NULL for None. */
static int
get_view(PyObject *obj, Py_buffer *view, int optional, const char *name)
{
    if (obj == Py_None) {
        if (!optional) {
            PyErr_Format(PyExc_ValueError, "encode_section: %s may not be None", name);
            return -1;
        }
        memset(view, 0, sizeof(*view));
        return 0;
    }
    return PyObject_GetBuffer(obj, view, PyBUF_SIMPLE);
}

/* An int64 array argument of exactly `count` items (count < 0: any). */
static int
check_int64(Py_buffer *view, Py_ssize_t count, const char *name)
{
    if (view->buf == NULL)
        return 0;
    if (view->len % 8 || (count >= 0 && view->len / 8 != count)) {
        PyErr_Format(PyExc_ValueError, "encode_section: %s must hold %zd int64 values",
                     name, count);
        return -1;
    }
    return 0;
}

typedef struct {
    const int64_t *starts, *lens;
    const uint8_t *data;
    Py_ssize_t data_len;
} Column;

/* The length of row r of `c` (-1 null, also for a missing column), checked against its
 * data buffer. */
static inline int
column_len(const Column *c, int64_t r, int64_t *len)
{
    if (c->lens == NULL) {
        *len = -1;
        return 0;
    }
    int64_t l = c->lens[r];
    if (l < -1 || (l > 0 && (c->starts[r] < 0 || c->starts[r] > c->data_len - l))) {
        PyErr_SetString(PyExc_ValueError, "encode_section: a value lies outside its buffer");
        return -1;
    }
    *len = l;
    return 0;
}

static inline uint8_t *
put_bytes(uint8_t *p, const Column *c, int64_t r, int64_t len)
{
    p = put_varint(p, zigzag(len));
    if (len > 0) {
        memcpy(p, c->data + c->starts[r], (size_t)len);
        p += len;
    }
    return p;
}

enum { ROWS, TS, KS, KL, KD, VS, VL, VD, HF, HC, HKS, HKL, HKD, HVS, HVL, HVD, NVIEWS };

static PyObject *
encode_section(PyObject *self, PyObject *args)
{
    static const char *names[NVIEWS] = {
        "rows", "ts_delta", "key_starts", "key_lens", "key_data", "value_starts",
        "value_lens", "value_data", "header_firsts", "header_counts", "hkey_starts",
        "hkey_lens", "hkey_data", "hvalue_starts", "hvalue_lens", "hvalue_data"};
    static const int optional[NVIEWS] = {1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    PyObject *objs[NVIEWS];
    PyObject *out = NULL;
    long long first_offset;
    if (!PyArg_ParseTuple(args, "OOLOOOOOOOOOOOOOO|O", &objs[ROWS], &objs[TS], &first_offset,
                          &objs[KS], &objs[KL], &objs[KD], &objs[VS], &objs[VL], &objs[VD],
                          &objs[HF], &objs[HC], &objs[HKS], &objs[HKL], &objs[HKD],
                          &objs[HVS], &objs[HVL], &objs[HVD], &out))
        return NULL;
    if (out == Py_None)
        out = NULL;
    if (out != NULL && !PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "encode_section: out must be a bytearray");
        return NULL;
    }
    Py_buffer v[NVIEWS];
    int got = 0;
    PyObject *result = NULL;
    int64_t *bodies = NULL;
    for (; got < NVIEWS; got++)
        if (get_view(objs[got], &v[got], optional[got], names[got]))
            goto done;
    Py_ssize_t n = v[TS].len / 8;
    Py_ssize_t sources = v[VL].len / 8;
    Py_ssize_t flat = v[HKL].buf ? v[HKL].len / 8 : 0;
    int has_keys = v[KL].buf != NULL, has_headers = v[HC].buf != NULL;
    if (check_int64(&v[TS], -1, names[TS]) || check_int64(&v[ROWS], n, names[ROWS])
            || check_int64(&v[VS], sources, names[VS]) || check_int64(&v[VL], sources, names[VL]))
        goto done;
    if (has_keys && (v[KS].buf == NULL || check_int64(&v[KS], sources, names[KS])
                     || check_int64(&v[KL], sources, names[KL]))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "encode_section: key_starts missing");
        goto done;
    }
    if (has_headers) {
        if (v[HF].buf == NULL || v[HKS].buf == NULL || v[HVS].buf == NULL
                || v[HVL].buf == NULL || v[HKD].buf == NULL || v[HVD].buf == NULL) {
            PyErr_SetString(PyExc_ValueError, "encode_section: header arrays missing");
            goto done;
        }
        if (check_int64(&v[HF], sources, names[HF]) || check_int64(&v[HC], sources, names[HC])
                || check_int64(&v[HKS], flat, names[HKS]) || check_int64(&v[HKL], flat, names[HKL])
                || check_int64(&v[HVS], flat, names[HVS]) || check_int64(&v[HVL], flat, names[HVL]))
            goto done;
    }
    if (v[ROWS].buf == NULL && n != sources) {
        PyErr_SetString(PyExc_ValueError, "encode_section: without rows, ts_delta needs one "
                        "value per source row");
        goto done;
    }
    const int64_t *rows = v[ROWS].buf, *ts = v[TS].buf;
    const int64_t *hfirst = v[HF].buf, *hcount = v[HC].buf;
    Column key = {v[KS].buf, v[KL].buf, v[KD].buf, v[KD].len};
    Column value = {v[VS].buf, v[VL].buf, v[VD].buf, v[VD].len};
    Column hkey = {v[HKS].buf, v[HKL].buf, v[HKD].buf, v[HKD].len};
    Column hvalue = {v[HVS].buf, v[HVL].buf, v[HVD].buf, v[HVD].len};
    if (!has_keys)
        key.lens = NULL;

    bodies = PyMem_Malloc((n ? n : 1) * sizeof(int64_t));
    if (!bodies) {
        PyErr_NoMemory();
        goto done;
    }
    /* First pass: every record's body size, all checks. */
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t r = rows ? rows[i] : i;
        if (r < 0 || r >= sources) {
            PyErr_SetString(PyExc_ValueError, "encode_section: a row index is out of range");
            goto done;
        }
        int64_t kl, vl;
        if (column_len(&key, r, &kl) || column_len(&value, r, &vl))
            goto done;
        int64_t body = 1 + varint_size(zigzag(ts[i])) + varint_size(zigzag(first_offset + i))
                       + varint_size(zigzag(kl)) + (kl > 0 ? kl : 0)
                       + varint_size(zigzag(vl)) + (vl > 0 ? vl : 0);
        int64_t hc = 0;
        if (has_headers) {
            hc = hcount[r];
            int64_t h0 = hfirst[r];
            if (hc < 0 || h0 < 0 || h0 > flat - hc) {
                PyErr_SetString(PyExc_ValueError, "encode_section: headers out of range");
                goto done;
            }
            for (int64_t h = h0; h < h0 + hc; h++) {
                int64_t hkl, hvl;
                if (column_len(&hkey, h, &hkl) || column_len(&hvalue, h, &hvl))
                    goto done;
                if (hkl < 0) {
                    PyErr_SetString(PyExc_ValueError, "encode_section: a header key is null");
                    goto done;
                }
                body += varint_size(zigzag(hkl)) + hkl + varint_size(zigzag(hvl))
                        + (hvl > 0 ? hvl : 0);
            }
        }
        body += varint_size(zigzag(hc));
        if (body >= ((int64_t)1 << 31)) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        bodies[i] = body;
        total += varint_size(zigzag(body)) + body;
    }
    uint8_t *p;
    if (out != NULL) {
        Py_ssize_t at = PyByteArray_GET_SIZE(out);
        if (PyByteArray_Resize(out, at + (Py_ssize_t)total) < 0)
            goto done;
        result = PyLong_FromSsize_t(at + (Py_ssize_t)total);
        if (!result)
            goto done;
        p = (uint8_t *)PyByteArray_AS_STRING(out) + at;
    } else {
        result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
        if (!result)
            goto done;
        p = (uint8_t *)PyBytes_AS_STRING(result);
    }
    /* Second pass: the bytes, in wire order. */
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t r = rows ? rows[i] : i;
        int64_t kl = key.lens ? key.lens[r] : -1, vl = value.lens[r];
        p = put_varint(p, zigzag(bodies[i]));
        *p++ = 0; /* attributes */
        p = put_varint(p, zigzag(ts[i]));
        p = put_varint(p, zigzag(first_offset + i));
        p = put_bytes(p, &key, r, kl);
        p = put_bytes(p, &value, r, vl);
        int64_t hc = has_headers ? hcount[r] : 0;
        p = put_varint(p, zigzag(hc));
        for (int64_t h = hc ? hfirst[r] : 0, e = h + hc; h < e; h++) {
            p = put_bytes(p, &hkey, h, hkey.lens[h]);
            p = put_bytes(p, &hvalue, h, hvalue.lens[h]);
        }
    }
done:
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&v[j]);  /* a view of None has no obj: nothing to release */
    PyMem_Free(bodies);
    return result;
}

/* base_sizes(key_lens, value_lens, header_firsts, header_counts, hkey_lens, hvalue_lens)
 *
 * Each source row's record size without its length prefix and its timestamp and offset
 * deltas (what ``encode_arrow.record_base_sizes`` computes), as bytes holding int64
 * values. Arguments as for encode_section; key_lens None: null keys; the header arrays
 * None: no headers. */
static PyObject *
base_sizes(PyObject *self, PyObject *args)
{
    static const char *names[6] = {"key_lens", "value_lens", "header_firsts",
                                   "header_counts", "hkey_lens", "hvalue_lens"};
    static const int optional[6] = {1, 0, 1, 1, 1, 1};
    PyObject *objs[6];
    if (!PyArg_ParseTuple(args, "OOOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &objs[5]))
        return NULL;
    Py_buffer v[6];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 6; got++)
        if (get_view(objs[got], &v[got], optional[got], names[got]))
            goto done;
    Py_ssize_t n = v[1].len / 8;
    Py_ssize_t flat = v[4].buf ? v[4].len / 8 : 0;
    int has_headers = v[3].buf != NULL;
    if (check_int64(&v[0], n, names[0]) || check_int64(&v[1], n, names[1])
            || check_int64(&v[2], n, names[2]) || check_int64(&v[3], n, names[3])
            || check_int64(&v[4], flat, names[4]) || check_int64(&v[5], flat, names[5]))
        goto done;
    if (has_headers && (v[2].buf == NULL || v[4].buf == NULL || v[5].buf == NULL)) {
        PyErr_SetString(PyExc_ValueError, "base_sizes: header arrays missing");
        goto done;
    }
    const int64_t *kl = v[0].buf, *vl = v[1].buf, *hf = v[2].buf, *hc = v[3].buf;
    const int64_t *hkl = v[4].buf, *hvl = v[5].buf;
    result = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!result)
        goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t k = kl ? kl[i] : -1, val = vl[i];
        int64_t size = 1 + varint_size(zigzag(k)) + (k > 0 ? k : 0)
                       + varint_size(zigzag(val)) + (val > 0 ? val : 0);
        int64_t count = has_headers ? hc[i] : 0;
        if (count) {
            int64_t h0 = hf[i];
            if (count < 0 || h0 < 0 || h0 > flat - count) {
                Py_CLEAR(result);
                PyErr_SetString(PyExc_ValueError, "base_sizes: headers out of range");
                goto done;
            }
            for (int64_t h = h0; h < h0 + count; h++)
                size += varint_size(zigzag(hkl[h])) + (hkl[h] > 0 ? hkl[h] : 0)
                        + varint_size(zigzag(hvl[h])) + (hvl[h] > 0 ? hvl[h] : 0);
        }
        out[i] = size + varint_size(zigzag(count));
    }
done:
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&v[j]);
    return result;
}

/* murmur2(starts, lens, data)
 *
 * Java's Utils.murmur2 (32-bit MurmurHash2, seed 0x9747b28c) of every value, as bytes
 * holding uint32 values; a null value (length -1) hashes as an empty one. starts / lens:
 * int64 per value, data: the values' bytes. */
static PyObject *
murmur2(PyObject *self, PyObject *args)
{
    PyObject *objs[3];
    if (!PyArg_ParseTuple(args, "OOO", &objs[0], &objs[1], &objs[2]))
        return NULL;
    Py_buffer v[3];
    int got = 0;
    PyObject *result = NULL;
    static const char *names[3] = {"starts", "lens", "data"};
    for (; got < 3; got++)
        if (get_view(objs[got], &v[got], got == 2, names[got]))
            goto done;
    Py_ssize_t n = v[1].len / 8;
    if (check_int64(&v[0], n, names[0]) || check_int64(&v[1], n, names[1]))
        goto done;
    Column c = {v[0].buf, v[1].buf, v[2].buf, v[2].len};
    result = PyBytes_FromStringAndSize(NULL, n * 4);
    if (!result)
        goto done;
    uint32_t *out = (uint32_t *)PyBytes_AS_STRING(result);
    const uint32_t m = 0x5bd1e995;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t len;
        if (column_len(&c, i, &len)) {
            Py_CLEAR(result);
            goto done;
        }
        if (len < 0)
            len = 0;
        const uint8_t *d = len ? c.data + c.starts[i] : NULL;
        uint32_t h = 0x9747b28cu ^ (uint32_t)len;
        int64_t words = len / 4;
        for (int64_t w = 0; w < words; w++) {
            const uint8_t *p = d + 4 * w;
            uint32_t k = (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16)
                         | ((uint32_t)p[3] << 24);
            k *= m;
            k ^= k >> 24;
            k *= m;
            h *= m;
            h ^= k;
        }
        const uint8_t *tail = len ? d + (len & ~(int64_t)3) : NULL;
        switch (len % 4) {
        case 3:
            h ^= (uint32_t)tail[2] << 16;
            /* fall through */
        case 2:
            h ^= (uint32_t)tail[1] << 8;
            /* fall through */
        case 1:
            h ^= tail[0];
            h *= m;
        }
        h ^= h >> 13;
        h *= m;
        h ^= h >> 15;
        out[i] = h;
    }
done:
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&v[j]);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_section", encode_section, METH_VARARGS,
     "Rows of Arrow buffers, picked by index, to the records section of a record batch."},
    {"base_sizes", base_sizes, METH_VARARGS,
     "Each row's record size without its length prefix and deltas (int64 bytes)."},
    {"murmur2", murmur2, METH_VARARGS, "Java's Utils.murmur2 of every value (uint32 bytes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastencode",
    "The optional compiled record encoder of protocol.records (see accel.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastencode(void)
{
    return PyModule_Create(&module);
}
