/* TensorBoard event files (see tfevents.h): CRC32C, the TFRecord frame, the Event and
 * Summary.Value protobufs, and the appending writer. */
#include "base/tfevents.h"

#include "base/fileio.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- CRC32C ------------------------------------------------------------------- */

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t pl_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

uint32_t pl_tfevents_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

/* ---- protobuf ------------------------------------------------------------------ */

typedef struct pb {
    uint8_t *p;
    size_t n, cap;
    int over; /* something did not fit */
} pb;

static void pb_byte(pb *b, uint8_t v)
{
    if (b->n < b->cap)
        b->p[b->n] = v;
    else
        b->over = 1;
    b->n++;
}

static void pb_varint(pb *b, uint64_t v)
{
    while (v >= 0x80) {
        pb_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pb_byte(b, (uint8_t)v);
}

static void pb_fixed(pb *b, uint64_t v, int bytes) /* little-endian */
{
    for (int i = 0; i < bytes; i++)
        pb_byte(b, (uint8_t)(v >> (8 * i)));
}

static void pb_bytes(pb *b, const void *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pb_byte(b, ((const uint8_t *)s)[i]);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Event's wall_time (field 1, fixed64) and step (field 2, varint; absent when 0). */
static void event_head(pb *b, double wall_time, int64_t step)
{
    uint64_t bits;
    memcpy(&bits, &wall_time, sizeof bits);
    pb_byte(b, 0x09);
    pb_fixed(b, bits, 8);
    if (step != 0) {
        pb_byte(b, 0x10);
        pb_varint(b, (uint64_t)step); /* int64: a negative step is ten bytes, as protobuf */
    }
}

size_t pl_tfevents_encode_version(uint8_t *buf, size_t cap, double wall_time)
{
    static const char version[] = "brain.Event:2";
    pb b = {buf, 0, cap, 0};
    event_head(&b, wall_time, 0);
    pb_byte(&b, 0x1a); /* file_version, field 3, length-delimited */
    pb_varint(&b, sizeof version - 1);
    pb_bytes(&b, version, sizeof version - 1);
    return b.over ? 0 : b.n;
}

size_t pl_tfevents_encode_scalar(uint8_t *buf, size_t cap, double wall_time, int64_t step,
                                 const char *tag, float value)
{
    size_t tl = strlen(tag);
    if (tl > 4095)
        return 0;
    size_t value_len = 1 + varint_len(tl) + tl + 1 + 4;   /* Summary.Value */
    size_t summary_len = 1 + varint_len(value_len) + value_len; /* Summary {value} */
    uint32_t vbits;
    memcpy(&vbits, &value, sizeof vbits);
    pb b = {buf, 0, cap, 0};
    event_head(&b, wall_time, step);
    pb_byte(&b, 0x2a); /* Event.summary, field 5 */
    pb_varint(&b, summary_len);
    pb_byte(&b, 0x0a); /* Summary.value, field 1 (repeated) */
    pb_varint(&b, value_len);
    pb_byte(&b, 0x0a); /* Summary.Value.tag, field 1 */
    pb_varint(&b, tl);
    pb_bytes(&b, tag, tl);
    pb_byte(&b, 0x15); /* Summary.Value.simple_value, field 2, fixed32 */
    pb_fixed(&b, vbits, 4);
    return b.over ? 0 : b.n;
}

void pl_tfevents_frame(const uint8_t *data, size_t n, uint8_t *out)
{
    uint64_t len = n;
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)(len >> (8 * i));
    uint32_t c = pl_tfevents_mask(pl_crc32c(0, out, 8));
    for (int i = 0; i < 4; i++)
        out[8 + i] = (uint8_t)(c >> (8 * i));
    memcpy(out + 12, data, n);
    c = pl_tfevents_mask(pl_crc32c(0, data, n));
    for (int i = 0; i < 4; i++)
        out[12 + n + i] = (uint8_t)(c >> (8 * i));
}

/* ---- the writer ------------------------------------------------------------------ */

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static pl_status write_record(pl_tfevents *w, const uint8_t *data, size_t n)
{
    uint8_t rec[4096 + 64];
    pl_tfevents_frame(data, n, rec);
    if (fwrite(rec, 1, n + 16, w->f) != n + 16)
        return pl_errorf(PL_ERR_IO, "--tensorboard-dir: cannot write %s: %s", w->path,
                         strerror(errno));
    return PL_OK;
}

pl_status pl_tfevents_open(pl_tfevents *w, const char *dir)
{
    memset(w, 0, sizeof *w);
    pl_status st = pl_mkdirs(dir);
    if (st)
        return pl_error_wrap(st, "--tensorboard-dir %s", dir);
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    double now = wall_now();
    int n = snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%010lld.%s.%ld.0", dir,
                     (long long)now, host, (long)getpid());
    if (n < 0 || (size_t)n >= sizeof w->path)
        return pl_errorf(PL_ERR_ARG, "--tensorboard-dir %s: the path is too long", dir);
    w->f = fopen(w->path, "wb");
    if (!w->f)
        return pl_errorf(PL_ERR_IO, "--tensorboard-dir: cannot create %s: %s", w->path,
                         strerror(errno));
    uint8_t ev[64];
    size_t len = pl_tfevents_encode_version(ev, sizeof ev, now);
    st = write_record(w, ev, len);
    if (!st)
        st = pl_tfevents_flush(w);
    return st;
}

pl_status pl_tfevents_scalar(pl_tfevents *w, const char *tag, int64_t step, double value)
{
    uint8_t ev[4096 + 32];
    size_t n = pl_tfevents_encode_scalar(ev, sizeof ev, wall_now(), step, tag, (float)value);
    if (n == 0)
        return pl_errorf(PL_ERR_ARG, "%s: tag '%.40s...' is too long", w->path, tag);
    return write_record(w, ev, n);
}

pl_status pl_tfevents_flush(pl_tfevents *w)
{
    if (w->f && fflush(w->f) != 0)
        return pl_errorf(PL_ERR_IO, "--tensorboard-dir: cannot write %s: %s", w->path,
                         strerror(errno));
    return PL_OK;
}

pl_status pl_tfevents_close(pl_tfevents *w)
{
    if (!w->f)
        return PL_OK;
    pl_status st = pl_tfevents_flush(w);
    if (fclose(w->f) != 0 && !st)
        st = pl_errorf(PL_ERR_IO, "--tensorboard-dir: cannot write %s: %s", w->path,
                       strerror(errno));
    w->f = NULL;
    return st;
}
