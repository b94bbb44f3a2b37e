/* base/tfevents: CRC32C against RFC 3720's test vectors (appendix B.4), TFRecord's
 * mask, the Event / Summary.Value protobuf bytes worked out by hand from the wire
 * format, the frame's layout, and a failed write naming its file. */
#include "base/tfevents.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

TEST(crc32c_matches_rfc3720_vectors)
{
    uint8_t b[48];
    memset(b, 0, 32);
    CHECK(pl_crc32c(0, b, 32) == 0x8a9136aau, "zeros: %08x", pl_crc32c(0, b, 32));
    memset(b, 0xff, 32);
    CHECK(pl_crc32c(0, b, 32) == 0x62a8ab43u, "ones: %08x", pl_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    CHECK(pl_crc32c(0, b, 32) == 0x46dd794eu, "incrementing: %08x", pl_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    CHECK(pl_crc32c(0, b, 32) == 0x113fdb5cu, "decrementing: %08x", pl_crc32c(0, b, 32));
    /* the iSCSI read command PDU of B.4 */
    static const uint8_t pdu[48] = {
        0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
        0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    CHECK(pl_crc32c(0, pdu, 48) == 0xd9963a56u, "PDU: %08x", pl_crc32c(0, pdu, 48));
    CHECK(pl_crc32c(0, "123456789", 9) == 0xe3069283u, "check value: %08x",
          pl_crc32c(0, "123456789", 9));
    /* continuing a CRC equals one pass */
    CHECK(pl_crc32c(pl_crc32c(0, "1234", 4), "56789", 5) == 0xe3069283u, "split");
}

TEST(mask_rotates_right_15_and_adds_the_constant)
{
    CHECK(pl_tfevents_mask(0) == 0xa282ead8u, "%08x", pl_tfevents_mask(0));
    CHECK(pl_tfevents_mask(0x12345678u) == 0x4f730f40u, "%08x", pl_tfevents_mask(0x12345678u));
}

TEST(scalar_event_is_the_hand_encoded_protobuf)
{
    /* wall_time 1.0 (field 1, fixed64), step 3 (field 2, varint), summary (field 5):
     * value (field 1) {tag "a" (field 1), simple_value 1.0f (field 2, fixed32)} */
    static const uint8_t want[] = {0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x10, 0x03, 0x2a, 0x0a,
                                   0x0a, 0x08, 0x0a, 0x01, 'a', 0x15, 0, 0, 0x80, 0x3f};
    uint8_t buf[64];
    size_t n = pl_tfevents_encode_scalar(buf, sizeof buf, 1.0, 3, "a", 1.0f);
    CHECK(n == sizeof want && memcmp(buf, want, n) == 0, "n %zu", n);
    /* step 300 is the two-byte varint ac 02; step 0 is left out, as proto3 does */
    n = pl_tfevents_encode_scalar(buf, sizeof buf, 1.0, 300, "a", 1.0f);
    CHECK(n == sizeof want + 1 && buf[9] == 0x10 && buf[10] == 0xac && buf[11] == 0x02, "n %zu", n);
    n = pl_tfevents_encode_scalar(buf, sizeof buf, 1.0, 0, "a", 1.0f);
    CHECK(n == sizeof want - 2 && buf[9] == 0x2a, "n %zu", n);
    /* too small a buffer: 0, nothing overrun */
    memset(buf, 0x55, sizeof buf);
    CHECK(pl_tfevents_encode_scalar(buf, 10, 1.0, 3, "a", 1.0f) == 0, "fits?");
    CHECK(buf[10] == 0x55, "overrun");
}

TEST(version_event_carries_brain_event_2)
{
    static const uint8_t want[] = {0x09, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x1a, 13, 'b', 'r', 'a', 'i',
                                   'n', '.', 'E', 'v', 'e', 'n', 't', ':', '2'};
    uint8_t buf[64];
    size_t n = pl_tfevents_encode_version(buf, sizeof buf, 2.0);
    CHECK(n == sizeof want && memcmp(buf, want, n) == 0, "n %zu", n);
}

TEST(frame_is_length_masked_crc_data_masked_crc)
{
    const uint8_t data[3] = {1, 2, 3};
    uint8_t out[19];
    pl_tfevents_frame(data, 3, out);
    CHECK(out[0] == 3 && out[1] == 0 && out[7] == 0, "length");
    uint32_t c = (uint32_t)out[8] | (uint32_t)out[9] << 8 | (uint32_t)out[10] << 16 |
                 (uint32_t)out[11] << 24;
    CHECK(c == pl_tfevents_mask(pl_crc32c(0, out, 8)), "length crc");
    CHECK(memcmp(out + 12, data, 3) == 0, "data");
    c = (uint32_t)out[15] | (uint32_t)out[16] << 8 | (uint32_t)out[17] << 16 |
        (uint32_t)out[18] << 24;
    CHECK(c == pl_tfevents_mask(pl_crc32c(0, data, 3)), "data crc");
}

TEST(failed_write_names_the_file)
{
    pl_tfevents w;
    memset(&w, 0, sizeof w);
    w.f = fopen("/dev/full", "wb");
    if (!w.f)
        return; /* no /dev/full: nothing to test */
    snprintf(w.path, sizeof w.path, "/dev/full");
    pl_status st = pl_tfevents_scalar(&w, "lm loss", 1, 2.0);
    if (!st)
        st = pl_tfevents_flush(&w);
    CHECK(st == PL_ERR_IO && strstr(pl_error_msg(), "/dev/full"), "%s", pl_error_msg());
    pl_tfevents_close(&w);
    /* a directory that is a file: the open fails naming it */
    char path[512];
    snprintf(path, sizeof path, "%s/tfevents_not_a_dir", test_tmpdir());
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    st = pl_tfevents_open(&w, path);
    CHECK(st != PL_OK && strstr(pl_error_msg(), "tfevents_not_a_dir"), "%s", pl_error_msg());
    pl_tfevents_close(&w);
    unlink(path);
}

int main(void)
{
    RUN(crc32c_matches_rfc3720_vectors);
    RUN(mask_rotates_right_15_and_adds_the_constant);
    RUN(scalar_event_is_the_hand_encoded_protobuf);
    RUN(version_event_carries_brain_event_2);
    RUN(frame_is_length_masked_crc_data_masked_crc);
    RUN(failed_write_names_the_file);
    return test_summary("tfevents");
}
