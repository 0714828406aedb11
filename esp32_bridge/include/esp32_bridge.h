/*
 * esp32_bridge.h: C entry points of the ESP32 bridge's forwarding core and SPI slave
 * (esp32_bridge/src/capi.rs, Cargo feature `capi`), for the ESP-IDF firmware (esp32_bridge/esp-idf)
 * and the GVSOC ESP32 stand-in (gvsoc/e2e). Kept in sync with capi.rs by tests/capi_header.rs and
 * tests/capi_test.c.
 *
 * Not thread-safe: serialise all calls on one handle (one mutex). Never aborts on bad input:
 * negative return values are ESP32B_E* codes.
 */
#ifndef ESP32_BRIDGE_H
#define ESP32_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ESP32B_EINVAL (-1)   /* null handle or buffer, buffer too small, length above PTRDIFF_MAX */
#define ESP32B_ENOCLIENT (-2) /* no such client */
#define ESP32B_EFULL (-3)    /* client limit reached */
#define ESP32B_ECPX (-4)     /* malformed CPX (counted; the stream goes on) */

/* SPI transaction buffers (transmit and receive) must hold this many bytes. */
#define ESP32B_SPI_BUFFER_LEN 1024

typedef struct esp32b esp32b_t;

/* Zero fields take the defaults (4 raw frames per client, 8 clients, ...). */
typedef struct {
    uint32_t client_queue_bytes;
    uint32_t control_reserve_bytes;
    uint32_t spi_queue_bytes;
    uint32_t max_message;
    uint32_t max_clients; /* per transport: TCP and UDP have separate slots (default 8 / 4) */
    uint32_t leader_only; /* non-zero: only the oldest client may talk to the GAP8 */
} esp32b_config_t;

typedef struct {
    uint64_t spi_transactions;
    uint64_t packets_to_gap8;
    uint64_t packets_from_gap8;
    uint64_t spi_malformed;
    uint32_t clients;
    uint32_t reserved;
} esp32b_stats_t;

uint32_t esp32b_spi_buffer_len(void);
esp32b_t *esp32b_new(const esp32b_config_t *cfg);
void esp32b_free(esp32b_t *h);

/* SPI side (the GAP8). One CPX packet per transaction each way (Bitcraze's protocol). */
int32_t esp32b_spi_should_arm(esp32b_t *h, int gap8_asked);
int32_t esp32b_spi_arm(esp32b_t *h, uint8_t *tx, size_t cap);
int32_t esp32b_spi_complete(esp32b_t *h, const uint8_t *rx, size_t len);
int32_t esp32b_spi_reset(esp32b_t *h);

/* WiFi side (TCP port 5000 stream clients, UDP datagram clients). */
int32_t esp32b_client_add(esp32b_t *h, int udp);
int32_t esp32b_client_remove(esp32b_t *h, uint32_t id);
int32_t esp32b_client_received(esp32b_t *h, uint32_t id, const uint8_t *data, size_t len);
int32_t esp32b_client_datagram(esp32b_t *h, uint32_t id, const uint8_t *data, size_t len);
int32_t esp32b_client_next(esp32b_t *h, uint32_t id, uint8_t *out, size_t cap);
int32_t esp32b_client_sent(esp32b_t *h, uint32_t id, size_t n);

/* Forward error correction for UDP clients (docs/stream.md, "Forward error correction"). A
 * registered UDP client that sends the request datagram "GF" 12 00 (through esp32b_udp_received,
 * like its loss reports "GF" 13 ...) gets data and parity shards from esp32b_udp_next instead of
 * bare CPX packets, at most ESP32B_UDP_DATAGRAM_MAX bytes each; esp32b_udp_tick also closes the
 * blocks whose timeout passed. esp32b_fec_configure: the settings (NULL: on, k = 40, n = 50,
 * 5 ms, fixed). */
#define ESP32B_UDP_DATAGRAM_MAX 1036
typedef struct {
    uint8_t enabled;  /* non-zero: grant FEC requests */
    uint8_t k;        /* data shards per block, 1..128 */
    uint8_t parity;   /* parity shards per k (n - k); the adaptive mode starts here */
    uint8_t adaptive; /* non-zero: move the parity between floor and ceiling from loss reports */
    uint8_t floor;
    uint8_t ceiling;
    uint16_t reserved;
    uint32_t timeout_ms; /* a block of single-packet messages closes this long after its first */
} esp32b_fec_config_t;
int32_t esp32b_fec_configure(esp32b_t *h, const esp32b_fec_config_t *cfg);

/* UDP clients: the registration (docs/protocol.md section 2), all decided by the core. An address
 * gets the stream only while it echoes tokens the bridge sent to it recently: a cookie to
 * register, then a probe every second; before that it gets nothing but a cookie of its request's
 * size. Every datagram of the registration is ESP32B_UDP_REPLY_MAX bytes.
 *   esp32b_udp_secret   32 random bytes (esp_fill_random) once at start; until then no UDP client
 *                       registers.
 *   esp32b_udp_received every datagram from the UDP socket (ip, port in host byte order, now_ms a
 *                       millisecond clock that may wrap); *reply_len bytes of `reply` go back to
 *                       the sender (cap >= ESP32B_UDP_REPLY_MAX); > 0: wake the SPI task.
 *   esp32b_udp_tick     every few tens of ms: ends registrations without a current proof, makes
 *                       the probes; > 0: registrations ended (wake the SPI task).
 *   esp32b_udp_next     the next datagram to send to a registered client and its destination;
 *                       *client >= 0: report it with esp32b_client_sent once sent, -1: a probe. */
#define ESP32B_UDP_REPLY_MAX 24
int32_t esp32b_udp_secret(esp32b_t *h, const uint8_t *secret);
int32_t esp32b_udp_received(esp32b_t *h, uint32_t ip, uint16_t port, const uint8_t *data, size_t len,
                            uint32_t now_ms, uint8_t *reply, size_t cap, size_t *reply_len);
int32_t esp32b_udp_tick(esp32b_t *h, uint32_t now_ms);
int32_t esp32b_udp_next(esp32b_t *h, uint32_t now_ms, uint8_t *out, size_t cap, uint32_t *ip, uint16_t *port,
                        int32_t *client);

int32_t esp32b_stats(esp32b_t *h, esp32b_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif
