/* C test program of the gap_rust_cipher_s C entry points (host build).
 * Built and run by `make capi-test` (mk/engine.mk): links the crate's staticlib with the `host`
 * backend. Checks published test vectors (RFC 8439 §2.4.2, SP 800-38A F.5.1) on 1..8 cores, in
 * place and to a separate buffer, round trips, and the error codes. */
#include "gap_rust_cipher_s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            passed++;                                                      \
        } else {                                                           \
            failed++;                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
        }                                                                  \
    } while (0)

static const char rfc8439_plain[] =
    "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
    "sunscreen would be it.";
static const uint8_t rfc8439_cipher[114] = {
    0x6e, 0x2e, 0x35, 0x9a, 0x25, 0x68, 0xf9, 0x80, 0x41, 0xba, 0x07, 0x28, 0xdd, 0x0d, 0x69, 0x81,
    0xe9, 0x7e, 0x7a, 0xec, 0x1d, 0x43, 0x60, 0xc2, 0x0a, 0x27, 0xaf, 0xcc, 0xfd, 0x9f, 0xae, 0x0b,
    0xf9, 0x1b, 0x65, 0xc5, 0x52, 0x47, 0x33, 0xab, 0x8f, 0x59, 0x3d, 0xab, 0xcd, 0x62, 0xb3, 0x57,
    0x16, 0x39, 0xd6, 0x24, 0xe6, 0x51, 0x52, 0xab, 0x8f, 0x53, 0x0c, 0x35, 0x9f, 0x08, 0x61, 0xd8,
    0x07, 0xca, 0x0d, 0xbf, 0x50, 0x0d, 0x6a, 0x61, 0x56, 0xa3, 0x8e, 0x08, 0x8a, 0x22, 0xb6, 0x5e,
    0x52, 0xbc, 0x51, 0x4d, 0x16, 0xcc, 0xf8, 0x06, 0x81, 0x8c, 0xe9, 0x1a, 0xb7, 0x79, 0x37, 0x36,
    0x5a, 0xf9, 0x0b, 0xbf, 0x74, 0xa3, 0x5b, 0xe6, 0xb4, 0x0b, 0x8e, 0xed, 0xf2, 0x78, 0x5e, 0x42,
    0x87, 0x4d};
static const uint8_t rfc8439_nonce[12] = {0, 0, 0, 0, 0, 0, 0, 0x4a, 0, 0, 0, 0};

static const uint8_t sp800_key[16] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                                      0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c};
static const uint8_t sp800_ctr[16] = {0xf0, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7,
                                      0xf8, 0xf9, 0xfa, 0xfb, 0xfc, 0xfd, 0xfe, 0xff};
static const uint8_t sp800_plain[64] = {
    0x6b, 0xc1, 0xbe, 0xe2, 0x2e, 0x40, 0x9f, 0x96, 0xe9, 0x3d, 0x7e, 0x11, 0x73, 0x93, 0x17, 0x2a,
    0xae, 0x2d, 0x8a, 0x57, 0x1e, 0x03, 0xac, 0x9c, 0x9e, 0xb7, 0x6f, 0xac, 0x45, 0xaf, 0x8e, 0x51,
    0x30, 0xc8, 0x1c, 0x46, 0xa3, 0x5c, 0xe4, 0x11, 0xe5, 0xfb, 0xc1, 0x19, 0x1a, 0x0a, 0x52, 0xef,
    0xf6, 0x9f, 0x24, 0x45, 0xdf, 0x4f, 0x9b, 0x17, 0xad, 0x2b, 0x41, 0x7b, 0xe6, 0x6c, 0x37, 0x10};
static const uint8_t sp800_cipher[64] = {
    0x87, 0x4d, 0x61, 0x91, 0xb6, 0x20, 0xe3, 0x26, 0x1b, 0xef, 0x68, 0x64, 0x99, 0x0d, 0xb6, 0xce,
    0x98, 0x06, 0xf6, 0x6b, 0x79, 0x70, 0xfd, 0xff, 0x86, 0x17, 0x18, 0x7b, 0xb9, 0xff, 0xfd, 0xff,
    0x5a, 0xe4, 0xdf, 0x3e, 0xdb, 0xd5, 0xd3, 0x5e, 0x5b, 0x4f, 0x09, 0x02, 0x0d, 0xb0, 0x3e, 0xab,
    0x1e, 0x03, 0x1d, 0xda, 0x2f, 0xbe, 0x03, 0xd1, 0x79, 0x21, 0x70, 0xa0, 0xf3, 0x00, 0x9c, 0xee};

static void vectors(uint32_t cores, uint32_t buffer)
{
    gapcs_engine *e = NULL;
    int32_t r = gapcs_engine_open(cores, buffer, &e);
    CHECK(r == GAPCS_OK && e != NULL, "open(%u, %u) = %d (%s)", cores, buffer, r, gapcs_strerror(r));
    if (!e) return;

    uint8_t key[32];
    for (int i = 0; i < 32; i++) key[i] = (uint8_t) i;
    uint8_t buf[114], out[114];
    memcpy(buf, rfc8439_plain, 114);
    r = gapcs_encrypt(e, GAPCS_CIPHER_CHACHA20, key, rfc8439_nonce, 1, buf, buf, 114);
    CHECK(r == GAPCS_OK && memcmp(buf, rfc8439_cipher, 114) == 0, "RFC 8439 in place, %u cores", cores);
    r = gapcs_decrypt(e, GAPCS_CIPHER_CHACHA20, key, rfc8439_nonce, 1, rfc8439_cipher, out, 114);
    CHECK(r == GAPCS_OK && memcmp(out, rfc8439_plain, 114) == 0, "RFC 8439 decrypt, %u cores", cores);
    /* The same through the byte-offset entry point: counter 1 = offset 64. */
    memcpy(buf, rfc8439_plain, 114);
    r = gapcs_apply_keystream(e, GAPCS_CIPHER_CHACHA20, key, 32, rfc8439_nonce, 12, 64, buf, 114);
    CHECK(r == GAPCS_OK && memcmp(buf, rfc8439_cipher, 114) == 0, "apply_keystream offset 64, %u cores", cores);

    uint8_t a[64];
    r = gapcs_encrypt(e, GAPCS_CIPHER_AES128_CTR, sp800_key, sp800_ctr, 0, sp800_plain, a, 64);
    CHECK(r == GAPCS_OK && memcmp(a, sp800_cipher, 64) == 0, "SP 800-38A F.5.1, %u cores", cores);
    /* Skipping one block: the last three blocks. */
    r = gapcs_encrypt(e, GAPCS_CIPHER_AES128_CTR, sp800_key, sp800_ctr, 1, sp800_plain + 16, a, 48);
    CHECK(r == GAPCS_OK && memcmp(a, sp800_cipher + 16, 48) == 0, "SP 800-38A from block 1, %u cores", cores);

    CHECK(gapcs_engine_close(e) == GAPCS_OK, "close");
}

static void large_round_trip(void)
{
    size_t len = 200 * 1024 + 13;
    uint8_t *plain = malloc(len), *c1 = malloc(len), *c8 = malloc(len);
    uint8_t key[32], nonce[16];
    for (size_t i = 0; i < len; i++) plain[i] = (uint8_t) (i * 131 + (i >> 9));
    for (int i = 0; i < 32; i++) key[i] = (uint8_t) (0xA0 + i);
    for (int i = 0; i < 16; i++) nonce[i] = (uint8_t) (7 * i);
    gapcs_engine *one = NULL, *eight = NULL;
    CHECK(gapcs_engine_open(1, 4096, &one) == GAPCS_OK, "open 1 core");
    CHECK(gapcs_engine_open(8, 0, &eight) == GAPCS_OK, "open 8 cores");
    for (uint8_t cipher = GAPCS_CIPHER_CHACHA20; cipher <= GAPCS_CIPHER_AES128_CTR; cipher++) {
        CHECK(gapcs_encrypt(one, cipher, key, nonce, 3, plain, c1, len) == GAPCS_OK, "1-core encrypt");
        CHECK(gapcs_encrypt(eight, cipher, key, nonce, 3, plain, c8, len) == GAPCS_OK, "8-core encrypt");
        CHECK(memcmp(c1, c8, len) == 0, "1 and 8 cores agree (cipher %u)", cipher);
        CHECK(memcmp(c1, plain, len) != 0, "ciphertext differs from plaintext");
        CHECK(gapcs_decrypt(eight, cipher, key, nonce, 3, c8, c8, len) == GAPCS_OK, "decrypt in place");
        CHECK(memcmp(c8, plain, len) == 0, "round trip (cipher %u)", cipher);
    }
    CHECK(gapcs_engine_set_cores(eight, 5) == GAPCS_OK, "set_cores 5");
    CHECK(gapcs_encrypt(eight, GAPCS_CIPHER_CHACHA20, key, nonce, 3, plain, c8, len) == GAPCS_OK, "5 cores");
    CHECK(gapcs_encrypt(one, GAPCS_CIPHER_CHACHA20, key, nonce, 3, plain, c1, len) == GAPCS_OK, "1 core");
    CHECK(memcmp(c1, c8, len) == 0, "1 and 5 cores agree");
    gapcs_engine_close(one);
    gapcs_engine_close(eight);
    free(plain);
    free(c1);
    free(c8);
}

static void errors(void)
{
    gapcs_engine *e = NULL;
    uint8_t key[32] = {0}, nonce[16] = {0}, buf[256] = {0};
    CHECK(gapcs_engine_open(0, 0, &e) == GAPCS_ERR_CONFIG, "0 cores");
    CHECK(gapcs_engine_open(9, 0, &e) == GAPCS_ERR_CONFIG, "9 cores");
    CHECK(gapcs_engine_open(8, 0, NULL) == GAPCS_ERR_NULL, "NULL out");
    CHECK(gapcs_engine_open(8, 30000, &e) == GAPCS_ERR_NO_MEMORY, "3 x 30000 B exceed the 64 KiB L1");
    CHECK(gapcs_engine_open(4, 1000, &e) == GAPCS_OK, "open 4 cores, 1000 B");
    CHECK(gapcs_encrypt(NULL, 1, key, nonce, 0, buf, buf, 16) == GAPCS_ERR_NULL, "NULL engine");
    CHECK(gapcs_encrypt(e, 3, key, nonce, 0, buf, buf, 16) == GAPCS_ERR_CIPHER, "cipher 3");
    CHECK(gapcs_encrypt(e, 0, key, nonce, 0, buf, buf, 16) == GAPCS_ERR_CIPHER, "cipher 0");
    CHECK(gapcs_encrypt(e, 1, NULL, nonce, 0, buf, buf, 16) == GAPCS_ERR_NULL, "NULL key");
    CHECK(gapcs_encrypt(e, 1, key, nonce, 0, NULL, buf, 16) == GAPCS_ERR_NULL, "NULL input");
    CHECK(gapcs_encrypt(e, 1, key, nonce, 0, NULL, NULL, 0) == GAPCS_OK, "NULL buffers, length 0");
    CHECK(gapcs_encrypt(e, 1, key, nonce, 0, buf, buf + 8, 16) == GAPCS_ERR_OVERLAP, "overlap");
    CHECK(gapcs_encrypt(e, 1, key, nonce, 0, buf + 8, buf, 16) == GAPCS_ERR_OVERLAP, "overlap 2");
    CHECK(gapcs_encrypt(e, 1, key, nonce, 0, buf, buf + 16, 16) == GAPCS_OK, "adjacent is fine");
    CHECK(gapcs_apply_keystream(e, 1, key, 31, nonce, 12, 0, buf, 16) == GAPCS_ERR_KEY_LENGTH, "key 31");
    CHECK(gapcs_apply_keystream(e, 2, key, 16, nonce, 12, 0, buf, 16) == GAPCS_ERR_IV_LENGTH, "iv 12 for AES");
    /* ChaCha20's keystream ends after 2^32 blocks: the last block counter cannot be run past. */
    memset(buf, 0xEE, sizeof buf);
    int32_t r = gapcs_encrypt(e, 1, key, nonce, 0xFFFFFFFFu, buf, buf, 128);
    CHECK(r == GAPCS_ERR_COUNTER_OVERFLOW, "counter overflow: %d", r);
    CHECK(buf[0] == 0xEE && buf[127] == 0xEE, "nothing written on overflow");
    CHECK(gapcs_engine_set_cores(e, 9) == GAPCS_ERR_CONFIG, "set_cores 9");
    CHECK(gapcs_engine_close(e) == GAPCS_OK, "close");
    CHECK(gapcs_engine_close(NULL) == GAPCS_OK, "close NULL");
    for (int32_t c = 1; c >= -12; c--) CHECK(gapcs_strerror(c) != NULL && gapcs_strerror(c)[0], "strerror");
}

int main(void)
{
    for (uint32_t cores = 1; cores <= GAPCS_MAX_CORES; cores++) {
        vectors(cores, 64);
        vectors(cores, 0);
    }
    large_round_trip();
    errors();
    printf("capi_test: %d passed, %d failed\n", passed, failed);
    return failed != 0;
}
