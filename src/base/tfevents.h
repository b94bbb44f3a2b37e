/* TensorBoard event files: the records that torch.utils.tensorboard's SummaryWriter
 * writes (what Megatron's --tensorboard-dir produces), encoded by hand.
 *
 * A file is a sequence of TFRecords:
 *     uint64 length (little-endian), uint32 masked CRC32C of those 8 bytes,
 *     length bytes of data, uint32 masked CRC32C of the data,
 * masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is an Event
 * protobuf: wall_time (double, field 1), step (int64, field 2, left out when 0 as proto3
 * does), and either file_version (string, field 3; the first event, "brain.Event:2") or
 * summary (field 5) holding one Summary.Value {tag (string, field 1), simple_value (float,
 * field 2)}, as SummaryWriter.add_scalar writes it.
 *
 * The file is written in place and appended to as training goes (TensorBoard reads it
 * while it grows), not through pl_wfile's rename. Not thread-safe; one writer per file.
 * What it is not: a protobuf library, or a reader (tests/scripts/tfevents_read.py is the
 * independent reader). */
#ifndef PL_BASE_TFEVENTS_H
#define PL_BASE_TFEVENTS_H

#include "base/status.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* CRC32C (Castagnoli, reflected polynomial 0x82f63b78) of n bytes, continuing from crc
 * (0 to start): pl_crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t pl_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's masking of a CRC. */
uint32_t pl_tfevents_mask(uint32_t crc);

/* The Event protobuf of one scalar into buf (cap bytes): returns its length, or 0 when
 * it does not fit (or the tag is longer than 4095 bytes). */
size_t pl_tfevents_encode_scalar(uint8_t *buf, size_t cap, double wall_time, int64_t step,
                                 const char *tag, float value);
/* The first Event of a file: wall_time and file_version "brain.Event:2". */
size_t pl_tfevents_encode_version(uint8_t *buf, size_t cap, double wall_time);
/* One TFRecord around data[0, n) into out (n + 16 bytes). */
void pl_tfevents_frame(const uint8_t *data, size_t n, uint8_t *out);

typedef struct pl_tfevents {
    FILE *f;
    char path[4096];
} pl_tfevents;

/* Creates dir (and its parents) and dir/events.out.tfevents.<%010d seconds>.<host>.<pid>.0,
 * TensorBoard's own name, and writes the file_version event. Errors name the file. */
pl_status pl_tfevents_open(pl_tfevents *w, const char *dir);
/* Appends one scalar event at the current wall time. */
pl_status pl_tfevents_scalar(pl_tfevents *w, const char *tag, int64_t step, double value);
/* Pushes what was appended to the file (fflush); errors name the file. */
pl_status pl_tfevents_flush(pl_tfevents *w);
/* Flushes and closes (safe on a writer never opened or already closed). */
pl_status pl_tfevents_close(pl_tfevents *w);

#endif
