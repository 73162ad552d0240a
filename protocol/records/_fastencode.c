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
 * pure path then raises its error). With a bytearray as the optional argument after
 * hvalue_data (``out``) the section is appended to it instead (one pass, no copy of the section: the
 * caller writes the batch header in front and its CRC in place) and the new length of
 * ``out`` is returned (None as above, ``out`` left as it was). With a CRC-32C value as the
 * optional argument after ``out`` (``crc``, None: none) the answer is a pair: the above and
 * the CRC-32C of ``crc`` continued over the section's bytes, computed while writing them
 * (the caller needs no second pass over the batch). Every index and length is
 * checked against the buffer it points into (ValueError): they come from the caller's
 * Arrow arrays, never from the wire, so a failed check is a bug in the caller.
 *
 * encode_records(parts, ts_delta, room, crc[, out]) below does the same for a whole batch whose
 * records come from several sources, allocating its buffer once at its final size.
 *
 * base_sizes(...) and murmur2(...) below serve the writer's sizing and key partitioning
 * the same way: loops over the same per-row buffers, equal to their numpy versions; so do
 * key_partitions(...), group_rows(...) and batch_stops(...): the writer's routing,
 * grouping and batch cutting of one input batch, one call each instead of many numpy ones;
 * crc32c(...) is the CRC-32C the encoder computes, equal to the crc32c package's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SSE42_CRC 1
#include <nmmintrin.h>
#endif

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as record batches v2 carry it.
 * The functions take and return the raw register (the caller inverts before and after).
 * Portable: slicing-by-8 over eight 256-entry tables; on x86-64 with SSE4.2 (checked at
 * import) the CPU's crc32 instruction, 8 bytes at a time. Both give the same value. */
static uint32_t crc_tables[8][256];

static void
crc_init_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_tables[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int t = 1; t < 8; t++)
            crc_tables[t][n] = (crc_tables[t - 1][n] >> 8) ^ crc_tables[0][crc_tables[t - 1][n] & 0xFF];
}

static uint32_t
crc_portable(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                             | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16
                      | (uint32_t)p[7] << 24;
        crc = crc_tables[7][lo & 0xFF] ^ crc_tables[6][(lo >> 8) & 0xFF]
              ^ crc_tables[5][(lo >> 16) & 0xFF] ^ crc_tables[4][lo >> 24]
              ^ crc_tables[3][hi & 0xFF] ^ crc_tables[2][(hi >> 8) & 0xFF]
              ^ crc_tables[1][(hi >> 16) & 0xFF] ^ crc_tables[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = crc_tables[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#ifdef HAVE_SSE42_CRC
/* The crc32 instruction takes 3 cycles and can start one a cycle: three streams of
 * CRC_STRIDE bytes run side by side, then the first two are shifted over the bytes that
 * follow them (crc_zeros: the register after CRC_STRIDE zero bytes, a linear map kept as
 * four byte tables, built at import) and combined. */
enum { CRC_STRIDE = 256 };
static uint32_t crc_zeros[4][256];

static uint32_t
crc_shift(uint32_t crc)
{
    return crc_zeros[0][crc & 0xFF] ^ crc_zeros[1][(crc >> 8) & 0xFF]
           ^ crc_zeros[2][(crc >> 16) & 0xFF] ^ crc_zeros[3][crc >> 24];
}

static void
crc_init_zeros(void)
{
    static const uint8_t zeros[CRC_STRIDE];
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            crc_zeros[k][b] = crc_portable(b << (8 * k), zeros, CRC_STRIDE);
}

__attribute__((target("sse4.2"))) static uint32_t
crc_sse42(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t word;
    while (n >= 3 * CRC_STRIDE) {
        uint64_t c0 = crc, c1 = 0, c2 = 0;
        for (const uint8_t *e = p + CRC_STRIDE; p < e; p += 8) {
            memcpy(&word, p, 8); /* unaligned, little-endian: x86 */
            c0 = _mm_crc32_u64(c0, word);
            memcpy(&word, p + CRC_STRIDE, 8);
            c1 = _mm_crc32_u64(c1, word);
            memcpy(&word, p + 2 * CRC_STRIDE, 8);
            c2 = _mm_crc32_u64(c2, word);
        }
        crc = crc_shift(crc_shift((uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 2 * CRC_STRIDE;
        n -= 3 * CRC_STRIDE;
    }
    uint64_t c = crc;
    for (; n >= 8; p += 8, n -= 8) {
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
    }
    crc = (uint32_t)c;
    while (n--)
        crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#endif

static uint32_t (*crc_update)(uint32_t, const uint8_t *, size_t) = crc_portable;

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
    if (len <= 0)
        return p;
    const uint8_t *src = c->data + c->starts[r];
    if (len >= 8 && len <= 16) { /* short keys: two overlapping words, no call to memcpy */
        uint64_t head, tail;
        memcpy(&head, src, 8);
        memcpy(&tail, src + len - 8, 8);
        memcpy(p, &head, 8);
        memcpy(p + len - 8, &tail, 8);
    } else {
        memcpy(p, src, (size_t)len);
    }
    return p + len;
}

/* A CRC-32C value argument (0 to 2**32 - 1). */
static int
crc_value(PyObject *obj, uint32_t *crc)
{
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    if (v > 0xFFFFFFFFull) {
        PyErr_SetString(PyExc_ValueError, "a CRC-32C value must fit in 32 bits");
        return -1;
    }
    *crc = (uint32_t)v;
    return 0;
}

enum { CRC_CHUNK = 8192 };

enum { ROWS, TS, KS, KL, KD, VS, VL, VD, HF, HC, HKS, HKL, HKD, HVS, HVL, HVD, NVIEWS };

static const char *view_names[NVIEWS] = {
    "rows", "ts_delta", "key_starts", "key_lens", "key_data", "value_starts",
    "value_lens", "value_data", "header_firsts", "header_counts", "hkey_starts",
    "hkey_lens", "hkey_data", "hvalue_starts", "hvalue_lens", "hvalue_data"};

/* The rows of one source to encode: its buffers, checked against each other. */
typedef struct {
    Py_buffer v[NVIEWS];
    int got;
    Py_ssize_t n, sources, flat;
    int has_headers;
    const int64_t *rows, *ts, *hfirst, *hcount;
    Column key, value, hkey, hvalue;
} Part;

static void
part_close(Part *pt)
{
    for (int j = 0; j < pt->got; j++)
        PyBuffer_Release(&pt->v[j]); /* a view of None has no obj: nothing to release */
    pt->got = 0;
}

/* Takes views of objs (in enum order) and checks their shapes; on error releases them. */
static int
part_open(Part *pt, PyObject *const *objs)
{
    static const int optional[NVIEWS] = {1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    Py_buffer *v = pt->v;
    const char *const *names = view_names;
    for (pt->got = 0; pt->got < NVIEWS; pt->got++)
        if (get_view(objs[pt->got], &v[pt->got], optional[pt->got], names[pt->got]))
            goto fail;
    Py_ssize_t n = pt->n = v[TS].len / 8;
    Py_ssize_t sources = pt->sources = v[VL].len / 8;
    Py_ssize_t flat = pt->flat = v[HKL].buf ? v[HKL].len / 8 : 0;
    int has_keys = v[KL].buf != NULL, has_headers = pt->has_headers = v[HC].buf != NULL;
    if (check_int64(&v[TS], -1, names[TS]) || check_int64(&v[ROWS], n, names[ROWS])
            || check_int64(&v[VS], sources, names[VS]) || check_int64(&v[VL], sources, names[VL]))
        goto fail;
    if (has_keys && (v[KS].buf == NULL || check_int64(&v[KS], sources, names[KS])
                     || check_int64(&v[KL], sources, names[KL]))) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "encode_section: key_starts missing");
        goto fail;
    }
    if (has_headers) {
        if (v[HF].buf == NULL || v[HKS].buf == NULL || v[HVS].buf == NULL
                || v[HVL].buf == NULL || v[HKD].buf == NULL || v[HVD].buf == NULL) {
            PyErr_SetString(PyExc_ValueError, "encode_section: header arrays missing");
            goto fail;
        }
        if (check_int64(&v[HF], sources, names[HF]) || check_int64(&v[HC], sources, names[HC])
                || check_int64(&v[HKS], flat, names[HKS]) || check_int64(&v[HKL], flat, names[HKL])
                || check_int64(&v[HVS], flat, names[HVS]) || check_int64(&v[HVL], flat, names[HVL]))
            goto fail;
    }
    if (v[ROWS].buf == NULL && n != sources) {
        PyErr_SetString(PyExc_ValueError, "encode_section: without rows, ts_delta needs one "
                        "value per source row");
        goto fail;
    }
    pt->rows = v[ROWS].buf;
    pt->ts = v[TS].buf;
    pt->hfirst = v[HF].buf;
    pt->hcount = v[HC].buf;
    pt->key = (Column){v[KS].buf, has_keys ? v[KL].buf : NULL, v[KD].buf, v[KD].len};
    pt->value = (Column){v[VS].buf, v[VL].buf, v[VD].buf, v[VD].len};
    pt->hkey = (Column){v[HKS].buf, v[HKL].buf, v[HKD].buf, v[HKD].len};
    pt->hvalue = (Column){v[HVS].buf, v[HVL].buf, v[HVD].buf, v[HVD].len};
    return 0;
fail:
    part_close(pt);
    return -1;
}

/* First pass: every record's body size into bodies[], all checks; adds the section's
 * bytes to *total. Returns 0, -1 on error (exception set) or 1 when a record would be
 * 2 GiB or more. */
static int
part_sizes(const Part *pt, int64_t first_offset, int64_t *bodies, int64_t *total)
{
    for (Py_ssize_t i = 0; i < pt->n; i++) {
        int64_t r = pt->rows ? pt->rows[i] : i;
        if (r < 0 || r >= pt->sources) {
            PyErr_SetString(PyExc_ValueError, "encode_section: a row index is out of range");
            return -1;
        }
        int64_t kl, vl;
        if (column_len(&pt->key, r, &kl) || column_len(&pt->value, r, &vl))
            return -1;
        int64_t body = 1 + varint_size(zigzag(pt->ts[i]))
                       + varint_size(zigzag(first_offset + i)) + varint_size(zigzag(kl))
                       + (kl > 0 ? kl : 0) + varint_size(zigzag(vl)) + (vl > 0 ? vl : 0);
        int64_t hc = 0;
        if (pt->has_headers) {
            hc = pt->hcount[r];
            int64_t h0 = pt->hfirst[r];
            if (hc < 0 || h0 < 0 || h0 > pt->flat - hc) {
                PyErr_SetString(PyExc_ValueError, "encode_section: headers out of range");
                return -1;
            }
            for (int64_t h = h0; h < h0 + hc; h++) {
                int64_t hkl, hvl;
                if (column_len(&pt->hkey, h, &hkl) || column_len(&pt->hvalue, h, &hvl))
                    return -1;
                if (hkl < 0) {
                    PyErr_SetString(PyExc_ValueError, "encode_section: a header key is null");
                    return -1;
                }
                body += varint_size(zigzag(hkl)) + hkl + varint_size(zigzag(hvl))
                        + (hvl > 0 ? hvl : 0);
            }
        }
        body += varint_size(zigzag(hc));
        if (body >= ((int64_t)1 << 31))
            return 1;
        bodies[i] = body;
        *total += varint_size(zigzag(body)) + body;
    }
    return 0;
}

/* The running CRC-32C of the bytes written: `from` is where the bytes not yet in `reg`
 * (the raw register) start. */
typedef struct {
    int on;
    uint32_t reg;
    const uint8_t *from;
} Crc;

/* Second pass: the bytes, in wire order, from p; returns the end. With crc->on their
 * CRC-32C every few KiB, while the bytes just written are still in the CPU's cache. */
static uint8_t *
part_write(const Part *pt, int64_t first_offset, const int64_t *bodies, uint8_t *p, Crc *crc)
{
    for (Py_ssize_t i = 0; i < pt->n; i++) {
        int64_t r = pt->rows ? pt->rows[i] : i;
        int64_t kl = pt->key.lens ? pt->key.lens[r] : -1, vl = pt->value.lens[r];
        p = put_varint(p, zigzag(bodies[i]));
        *p++ = 0; /* attributes */
        p = put_varint(p, zigzag(pt->ts[i]));
        p = put_varint(p, zigzag(first_offset + i));
        p = put_bytes(p, &pt->key, r, kl);
        p = put_bytes(p, &pt->value, r, vl);
        int64_t hc = pt->has_headers ? pt->hcount[r] : 0;
        p = put_varint(p, zigzag(hc));
        for (int64_t h = hc ? pt->hfirst[r] : 0, e = h + hc; h < e; h++) {
            p = put_bytes(p, &pt->hkey, h, pt->hkey.lens[h]);
            p = put_bytes(p, &pt->hvalue, h, pt->hvalue.lens[h]);
        }
        if (crc->on && p - crc->from >= CRC_CHUNK) {
            crc->reg = crc_update(crc->reg, crc->from, (size_t)(p - crc->from));
            crc->from = p;
        }
    }
    if (crc->on) {
        crc->reg = crc_update(crc->reg, crc->from, (size_t)(p - crc->from));
        crc->from = p;
    }
    return p;
}

static PyObject *
encode_section(PyObject *self, PyObject *args)
{
    PyObject *objs[NVIEWS];
    PyObject *out = NULL, *crc_obj = Py_None;
    long long first_offset;
    if (!PyArg_ParseTuple(args, "OOLOOOOOOOOOOOOOO|OO", &objs[ROWS], &objs[TS], &first_offset,
                          &objs[KS], &objs[KL], &objs[KD], &objs[VS], &objs[VL], &objs[VD],
                          &objs[HF], &objs[HC], &objs[HKS], &objs[HKL], &objs[HKD],
                          &objs[HVS], &objs[HVL], &objs[HVD], &out, &crc_obj))
        return NULL;
    if (out == Py_None)
        out = NULL;
    Crc crc = {crc_obj != Py_None, 0, NULL};
    if (crc.on && crc_value(crc_obj, &crc.reg))
        return NULL;
    if (out != NULL && !PyByteArray_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "encode_section: out must be a bytearray");
        return NULL;
    }
    Part pt;
    if (part_open(&pt, objs))
        return NULL;
    PyObject *result = NULL;
    int64_t total = 0;
    int64_t *bodies = PyMem_Malloc((pt.n ? pt.n : 1) * sizeof(int64_t));
    if (!bodies) {
        PyErr_NoMemory();
        goto done;
    }
    int sized = part_sizes(&pt, first_offset, bodies, &total);
    if (sized) {
        result = sized > 0 ? Py_NewRef(Py_None) : NULL;
        goto done;
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
    crc.reg = ~crc.reg;
    crc.from = p;
    part_write(&pt, first_offset, bodies, p, &crc);
    if (crc.on)
        result = Py_BuildValue("(Nk)", result, (unsigned long)~crc.reg);
done:
    part_close(&pt);
    PyMem_Free(bodies);
    return result;
}

/* encode_records(parts, ts_delta, room, crc[, out])
 *
 * The records of a whole batch in one call: ``parts`` a list of tuples, each
 * ``(rows, key_starts, ..., hvalue_data)`` (encode_section's arguments without ts_delta
 * and first_offset_delta), their records in order; ``ts_delta`` one value per record of
 * all parts. Answers ``(out, crc)``: a new bytearray of ``room`` bytes (left for the
 * caller's batch header, not initialised) followed by the records section, allocated once
 * at its final size, and the CRC-32C of ``crc`` continued over the section (computed
 * while writing it; ``crc`` None: none, and None in its place); None when a record would
 * be 2 GiB or more. With a bytearray as the optional fifth argument (``out``) it is
 * resized and written into instead of a new one (a new one when it cannot be resized, as
 * while a view of it is held), and answered as ``out``. */
static PyObject *
encode_records(PyObject *self, PyObject *args)
{
    PyObject *parts, *ts_obj, *crc_obj, *reuse = Py_None;
    Py_ssize_t room;
    if (!PyArg_ParseTuple(args, "O!OnO|O", &PyList_Type, &parts, &ts_obj, &room, &crc_obj,
                          &reuse))
        return NULL;
    if (reuse != Py_None && !PyByteArray_Check(reuse)) {
        PyErr_SetString(PyExc_TypeError, "encode_records: out must be a bytearray");
        return NULL;
    }
    Crc crc = {crc_obj != Py_None, 0, NULL};
    if (crc.on && crc_value(crc_obj, &crc.reg))
        return NULL;
    if (room < 0) {
        PyErr_SetString(PyExc_ValueError, "encode_records: room must not be negative");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(parts);
    Py_buffer ts_view;
    if (PyObject_GetBuffer(ts_obj, &ts_view, PyBUF_SIMPLE))
        return NULL;
    Part *pts = PyMem_Calloc(count ? count : 1, sizeof(Part));
    int64_t *bodies = PyMem_Malloc((ts_view.len / 8 + 1) * sizeof(int64_t));
    PyObject *result = NULL, *ts_part = NULL;
    Py_ssize_t opened = 0, at = 0;
    int64_t total = 0;
    if (!pts || !bodies) {
        PyErr_NoMemory();
        goto done;
    }
    if (check_int64(&ts_view, -1, "ts_delta"))
        goto done;
    for (; opened < count; opened++) {
        PyObject *item = PyList_GET_ITEM(parts, opened);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != NVIEWS - 1) {
            PyErr_Format(PyExc_TypeError, "encode_records: a part must be a tuple of %d items",
                         NVIEWS - 1);
            goto done;
        }
        PyObject *objs[NVIEWS];
        objs[ROWS] = PyTuple_GET_ITEM(item, 0);
        for (int j = TS + 1; j < NVIEWS; j++)
            objs[j] = PyTuple_GET_ITEM(item, j - 1);
        /* the part's record count: its row indices, or (None) every row of its source */
        Py_buffer counted;
        if (PyObject_GetBuffer(objs[ROWS] == Py_None ? objs[VL] : objs[ROWS], &counted,
                               PyBUF_SIMPLE))
            goto done;
        Py_ssize_t rows = counted.len / 8;
        PyBuffer_Release(&counted);
        if (rows > ts_view.len / 8 - at) {
            PyErr_SetString(PyExc_ValueError, "encode_records: ts_delta is too short");
            goto done;
        }
        ts_part = PyMemoryView_FromMemory((char *)ts_view.buf + 8 * at, 8 * rows, PyBUF_READ);
        if (!ts_part)
            goto done;
        objs[TS] = ts_part;
        int failed = part_open(&pts[opened], objs);
        Py_CLEAR(ts_part); /* the part holds its own view of it */
        if (failed)
            goto done;
        int sized = part_sizes(&pts[opened], at, bodies + at, &total);
        at += rows;
        if (sized) {
            opened++;
            result = sized > 0 ? Py_NewRef(Py_None) : NULL;
            goto done;
        }
    }
    if (at != ts_view.len / 8) {
        PyErr_SetString(PyExc_ValueError, "encode_records: ts_delta is longer than the rows");
        goto done;
    }
    PyObject *out = NULL;
    if (reuse != Py_None) {
        if (PyByteArray_Resize(reuse, room + (Py_ssize_t)total) == 0)
            out = Py_NewRef(reuse);
        else
            PyErr_Clear(); /* a view of it is still held: a new buffer instead */
    }
    if (!out)
        out = PyByteArray_FromStringAndSize(NULL, room + (Py_ssize_t)total);
    if (!out)
        goto done;
    uint8_t *p = (uint8_t *)PyByteArray_AS_STRING(out) + room;
    crc.reg = ~crc.reg;
    crc.from = p;
    at = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        p = part_write(&pts[k], at, bodies + at, p, &crc);
        at += pts[k].n;
    }
    if (crc.on)
        result = Py_BuildValue("(Nk)", out, (unsigned long)~crc.reg);
    else
        result = Py_BuildValue("(NO)", out, Py_None);
done:
    for (Py_ssize_t k = 0; k < opened; k++)
        part_close(&pts[k]);
    PyBuffer_Release(&ts_view);
    PyMem_Free(pts);
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

/* Java's Utils.murmur2 of `len` bytes at `d`. */
static uint32_t
murmur2_of(const uint8_t *d, int64_t len)
{
    const uint32_t m = 0x5bd1e995;
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
    return h;
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
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t len;
        if (column_len(&c, i, &len)) {
            Py_CLEAR(result);
            goto done;
        }
        out[i] = murmur2_of(len > 0 ? c.data + c.starts[i] : NULL, len < 0 ? 0 : len);
    }
done:
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&v[j]);
    return result;
}

/* An int32 array argument of exactly `count` items (None allowed when `optional`). */
static int
get_int32(PyObject *obj, Py_buffer *view, Py_ssize_t count, int optional, const char *name)
{
    if (get_view(obj, view, optional, name))
        return -1;
    if (view->buf != NULL && view->len != 4 * count) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd int32 values", name, count);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* key_partitions(starts, lens, data, codes, counts)
 *
 * Each row's partition under Kafka's default rule for a keyed record,
 * toPositive(murmur2(key)) % counts[codes[i]], as int32 values in a bytearray; -1 for a
 * row whose key is null (length -1). starts / lens / data: the keys as for murmur2; codes:
 * int32 per row, the row's topic as an index into counts (None: every row topic 0);
 * counts: int64 per topic, each positive (the topic's partitions). */
static PyObject *
key_partitions(PyObject *self, PyObject *args)
{
    PyObject *objs[5];
    if (!PyArg_ParseTuple(args, "OOOOO", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4]))
        return NULL;
    static const char *names[5] = {"starts", "lens", "data", "codes", "counts"};
    Py_buffer v[5];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 3; got++)
        if (get_view(objs[got], &v[got], got == 2, names[got]))
            goto done;
    Py_ssize_t n = v[1].len / 8;
    if (check_int64(&v[0], n, names[0]) || check_int64(&v[1], n, names[1]))
        goto done;
    if (get_int32(objs[3], &v[3], n, 1, names[3]))
        goto done;
    got++;
    if (get_view(objs[4], &v[4], 0, names[4]))
        goto done;
    got++;
    Py_ssize_t topics = v[4].len / 8;
    if (check_int64(&v[4], -1, names[4]) || topics < 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "key_partitions: counts is empty");
        goto done;
    }
    const int32_t *codes = v[3].buf;
    const int64_t *counts = v[4].buf;
    for (Py_ssize_t t = 0; t < topics; t++)
        if (counts[t] < 1 || counts[t] > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "key_partitions: a partition count is out of range");
            goto done;
        }
    Column c = {v[0].buf, v[1].buf, v[2].buf, v[2].len};
    result = PyByteArray_FromStringAndSize(NULL, n * 4);
    if (!result)
        goto done;
    int32_t *out = (int32_t *)PyByteArray_AS_STRING(result);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t len, code = codes ? codes[i] : 0;
        if (column_len(&c, i, &len) || code < 0 || code >= topics) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "key_partitions: a topic code is out of range");
            Py_CLEAR(result);
            goto done;
        }
        if (len < 0) {
            out[i] = -1;
            continue;
        }
        uint32_t h = murmur2_of(len ? c.data + c.starts[i] : NULL, len) & 0x7FFFFFFFu;
        out[i] = (int32_t)(h % (uint32_t)counts[code]);
    }
done:
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&v[j]);
    return result;
}

/* group_rows(partition, codes, sizes, base_sizes)
 *
 * The rows grouped by (topic code, partition), ascending, each group's rows in their
 * order (a stable counting sort, as numpy's stable argsort of code << 32 | partition):
 * answers (order, grouped, groups): order the int64 row indices group after group and
 * grouped base_sizes in that order (bytearrays), groups a list of (code, partition, start,
 * stop, size) tuples, rows [start, stop) of order, size the sum of their sizes. None when
 * codes x partitions are many more buckets than rows (the caller sorts instead).
 * partition: int32 per row, each >= 0; codes: int32 per row, each >= 0, or None (one
 * topic); sizes, base_sizes: int64 per row. */
static PyObject *
group_rows(PyObject *self, PyObject *args)
{
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3]))
        return NULL;
    static const char *names[4] = {"partition", "codes", "sizes", "base_sizes"};
    Py_buffer v[4];
    memset(v, 0, sizeof(v)); /* a view never taken has no obj: releasing it does nothing */
    PyObject *result = NULL, *order = NULL, *grouped = NULL, *groups = NULL;
    int64_t *next = NULL, *sums = NULL;
    if (get_view(objs[2], &v[2], 0, names[2]))
        goto done;
    Py_ssize_t n = v[2].len / 8;
    if (check_int64(&v[2], n, names[2]) || get_view(objs[3], &v[3], 0, names[3])
            || check_int64(&v[3], n, names[3]) || get_int32(objs[0], &v[0], n, 0, names[0])
            || get_int32(objs[1], &v[1], n, 1, names[1]))
        goto done;
    const int32_t *part = v[0].buf, *codes = v[1].buf;
    const int64_t *sizes = v[2].buf, *base = v[3].buf;
    int64_t top_part = 0, top_code = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (part[i] < 0 || (codes && codes[i] < 0)) {
            PyErr_SetString(PyExc_ValueError, "group_rows: a partition or code is negative");
            goto done;
        }
        if (part[i] > top_part)
            top_part = part[i];
        if (codes && codes[i] > top_code)
            top_code = codes[i];
    }
    int64_t width = top_part + 1, buckets = (top_code + 1) * width;
    if (buckets > 2 * (int64_t)n + 4096) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    next = PyMem_Calloc((size_t)buckets, sizeof(int64_t));
    sums = PyMem_Calloc((size_t)buckets, sizeof(int64_t));
    order = PyByteArray_FromStringAndSize(NULL, n * 8);
    grouped = PyByteArray_FromStringAndSize(NULL, n * 8);
    groups = PyList_New(0);
    if (!next || !sums || !order || !grouped || !groups) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t b = (codes ? codes[i] : 0) * width + part[i];
        next[b]++;
        sums[b] += sizes[i];
    }
    int64_t at = 0;
    for (int64_t b = 0; b < buckets; b++) {
        int64_t count = next[b];
        if (!count)
            continue;
        PyObject *g = Py_BuildValue("(LLLLL)", (long long)(b / width), (long long)(b % width),
                                    (long long)at, (long long)(at + count), (long long)sums[b]);
        if (!g || PyList_Append(groups, g)) {
            Py_XDECREF(g);
            goto done;
        }
        Py_DECREF(g);
        next[b] = at;
        at += count;
    }
    int64_t *o = (int64_t *)PyByteArray_AS_STRING(order);
    int64_t *gb = (int64_t *)PyByteArray_AS_STRING(grouped);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t slot = next[(codes ? codes[i] : 0) * width + part[i]]++;
        o[slot] = i;
        gb[slot] = base[i];
    }
    result = Py_BuildValue("(OOO)", order, grouped, groups);
done:
    Py_XDECREF(order);
    Py_XDECREF(grouped);
    Py_XDECREF(groups);
    PyMem_Free(next);
    PyMem_Free(sums);
    for (int j = 0; j < 4; j++)
        PyBuffer_Release(&v[j]);
    return result;
}

/* batch_stops(base_sizes, extra, budget)
 *
 * Where rows are cut into record batches (encode_arrow.split_for_batch_size with
 * base_sizes): each row's size bound is body + the varint size of body, body its base size
 * plus `extra`; every range takes as many rows as fit in `budget` bytes, at least one.
 * Answers the list of the ranges' ends. */
static PyObject *
batch_stops(PyObject *self, PyObject *args)
{
    PyObject *obj;
    long long extra, budget;
    if (!PyArg_ParseTuple(args, "OLL", &obj, &extra, &budget))
        return NULL;
    Py_buffer view;
    if (get_view(obj, &view, 0, "base_sizes"))
        return NULL;
    PyObject *stops = NULL;
    if (check_int64(&view, -1, "base_sizes"))
        goto done;
    const int64_t *base = view.buf;
    Py_ssize_t n = view.len / 8, start = 0;
    int64_t used = 0;
    stops = PyList_New(0);
    if (!stops)
        goto done;
    for (Py_ssize_t i = 0; i <= n; i++) {
        int64_t size = 0;
        if (i < n) {
            int64_t body = base[i] + extra;
            if (body < 0) {
                PyErr_SetString(PyExc_ValueError, "batch_stops: a size is negative");
                Py_CLEAR(stops);
                goto done;
            }
            size = body + varint_size(zigzag(body));
        }
        if (i == n ? i > start : (i > start && used + size > budget)) {
            PyObject *stop = PyLong_FromSsize_t(i);
            if (!stop || PyList_Append(stops, stop)) {
                Py_XDECREF(stop);
                Py_CLEAR(stops);
                goto done;
            }
            Py_DECREF(stop);
            start = i;
            used = 0;
        }
        used += size;
    }
done:
    PyBuffer_Release(&view);
    return stops;
}

/* crc32c(data, value=0, portable=False)
 *
 * CRC-32C of a bytes-like ``data`` continuing from ``value`` (the crc32c package's
 * convention); ``portable``: with the table code even where the CPU instruction is used. */
static PyObject *
crc32c(PyObject *self, PyObject *args)
{
    Py_buffer view;
    PyObject *value = NULL;
    int portable = 0;
    uint32_t crc = 0;
    if (!PyArg_ParseTuple(args, "y*|Op", &view, &value, &portable))
        return NULL;
    if (value != NULL && crc_value(value, &crc)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *data = view.buf;
    size_t len = (size_t)view.len;
    Py_BEGIN_ALLOW_THREADS
    crc = ~(portable ? crc_portable : crc_update)(~crc, data, len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"encode_section", encode_section, METH_VARARGS,
     "Rows of Arrow buffers, picked by index, to the records section of a record batch."},
    {"base_sizes", base_sizes, METH_VARARGS,
     "Each row's record size without its length prefix and deltas (int64 bytes)."},
    {"murmur2", murmur2, METH_VARARGS, "Java's Utils.murmur2 of every value (uint32 bytes)."},
    {"encode_records", encode_records, METH_VARARGS,
     "The records of a whole batch, from several parts, with their CRC-32C."},
    {"crc32c", crc32c, METH_VARARGS, "CRC-32C of data, continuing from value."},
    {"key_partitions", key_partitions, METH_VARARGS,
     "Kafka's default partition of every keyed row (int32 bytearray, -1 for null keys)."},
    {"group_rows", group_rows, METH_VARARGS,
     "Rows grouped by (topic code, partition), stably, with each group's size."},
    {"batch_stops", batch_stops, METH_VARARGS,
     "The ends of the row ranges that each fit in one record batch."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastencode",
    "The optional compiled record encoder of protocol.records (see accel.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastencode(void)
{
    crc_init_tables();
    int hardware = 0;
#ifdef HAVE_SSE42_CRC
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_init_zeros();
        crc_update = crc_sse42;
        hardware = 1;
    }
#endif
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "CRC32C_HARDWARE", hardware) < 0)
        Py_CLEAR(m);
    return m;
}
