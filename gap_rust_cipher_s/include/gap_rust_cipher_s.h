/* gap_rust_cipher_s.h — C entry points of the gapstream cluster cipher engine.
 *
 * Kept in sync with gap_rust_cipher_s/src/capi.rs by tests/capi_header.rs (every constant and
 * prototype is checked against the Rust source); exercised from C by tests/capi_test.c.
 *
 * Every function returns GAPCS_OK (0) or a negative GAPCS_ERR_* code and never unwinds into C.
 * Host builds (feature "host") allow several engines and any thread per engine (one call at a time
 * per engine). GAP8 builds ("pmsis", "bare") hold one engine for the one cluster and must be called
 * from one FC thread. */
#ifndef GAP_RUST_CIPHER_S_H
#define GAP_RUST_CIPHER_S_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Cipher ids (same values as the wire protocol's suite table). */
#define GAPCS_CIPHER_CHACHA20 1   /* RFC 8439: 32-byte key, 12-byte nonce, 32-bit block counter */
#define GAPCS_CIPHER_AES128_CTR 2 /* SP 800-38A: 16-byte key, 16-byte initial counter block */

/* Status codes. */
#define GAPCS_OK 0
#define GAPCS_ERR_NULL -1             /* a required pointer is NULL */
#define GAPCS_ERR_CONFIG -2           /* core count not in 1..8, or bad buffer size */
#define GAPCS_ERR_CIPHER -3           /* unknown cipher id */
#define GAPCS_ERR_KEY_LENGTH -4       /* key length wrong for the cipher */
#define GAPCS_ERR_IV_LENGTH -5        /* IV / nonce length wrong for the cipher */
#define GAPCS_ERR_COUNTER_OVERFLOW -6 /* keystream would run past the counter range; nothing written */
#define GAPCS_ERR_NO_MEMORY -7        /* L1 / L2 for the engine could not be allocated */
#define GAPCS_ERR_BUSY -8             /* the single on-chip engine is already open */
#define GAPCS_ERR_ENGINE -9           /* cluster, fork or DMA failure */
#define GAPCS_ERR_OVERLAP -10         /* input and output overlap without being equal */
#define GAPCS_ERR_PANIC -11           /* internal panic caught (host builds) */
#define GAPCS_ERR_LENGTH -12          /* length above PTRDIFF_MAX or buffer past the end of memory */

#define GAPCS_DEFAULT_BUFFER 8192 /* L1 buffer size used when buffer_size is 0 (three are allocated) */
#define GAPCS_MAX_CORES 8

/* An open engine (opaque). */
typedef struct gapcs_engine gapcs_engine;

/* Opens the engine: `cores` cluster cores (1..8), three L1 buffers of `buffer_size` bytes
 * (0 = GAPCS_DEFAULT_BUFFER). On success *out is the handle. */
int32_t gapcs_engine_open(uint32_t cores, uint32_t buffer_size, gapcs_engine **out);

/* Closes an engine and frees everything it allocated. NULL is accepted. */
int32_t gapcs_engine_close(gapcs_engine *engine);

/* Uses `cores` cores (1..8) from the next call on. */
int32_t gapcs_engine_set_cores(gapcs_engine *engine, uint32_t cores);

/* XORs the keystream of `cipher` from byte position `offset` into data[0..len], in place.
 * key_len / iv_len must be the cipher's (32 / 12 for ChaCha20, 16 / 16 for AES-128-CTR).
 * `data` may be NULL when len is 0. A length above PTRDIFF_MAX, or a buffer that would run past
 * the end of memory, gives GAPCS_ERR_LENGTH (nothing read or written). */
int32_t gapcs_apply_keystream(gapcs_engine *engine, uint8_t cipher, const uint8_t *key, size_t key_len,
                              const uint8_t *iv, size_t iv_len, uint64_t offset, uint8_t *data, size_t len);

/* Encrypts input[0..len] into output[0..len] (output == input for in place; partly overlapping
 * buffers give GAPCS_ERR_OVERLAP). ChaCha20: key 32 bytes, nonce 12 bytes, counter = initial
 * 32-bit block counter (RFC 8439). AES-128-CTR: key 16 bytes, nonce = 16-byte initial counter
 * block, counter = 16-byte blocks to skip (usually 0). `len` above PTRDIFF_MAX, or a buffer that
 * would run past the end of memory, gives GAPCS_ERR_LENGTH. */
int32_t gapcs_encrypt(gapcs_engine *engine, uint8_t cipher, const uint8_t *key, const uint8_t *nonce,
                      uint32_t counter, const uint8_t *input, uint8_t *output, size_t len);

/* Decrypts: the same operation as gapcs_encrypt. */
int32_t gapcs_decrypt(gapcs_engine *engine, uint8_t cipher, const uint8_t *key, const uint8_t *nonce,
                      uint32_t counter, const uint8_t *input, uint8_t *output, size_t len);

/* A static, NUL-terminated description of a status code. */
const char *gapcs_strerror(int32_t code);

#ifdef __cplusplus
}
#endif

#endif /* GAP_RUST_CIPHER_S_H */
