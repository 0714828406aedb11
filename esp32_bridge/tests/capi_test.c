/* C test of the esp32_bridge C entry points, compiled against include/esp32_bridge.h and linked
 * with the host staticlib (`make esp32-capi-test`): layouts, one exchange both ways, error codes. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "esp32_bridge.h"

_Static_assert(sizeof(esp32b_config_t) == 24, "esp32b_config_t size");
_Static_assert(sizeof(esp32b_stats_t) == 40, "esp32b_stats_t size");
_Static_assert(offsetof(esp32b_stats_t, clients) == 32, "esp32b_stats_t.clients");
_Static_assert(sizeof(esp32b_fec_config_t) == 12, "esp32b_fec_config_t size");
_Static_assert(offsetof(esp32b_fec_config_t, timeout_ms) == 8, "esp32b_fec_config_t.timeout_ms");

#define CHECK(c)                                                               \
    do {                                                                       \
        if (!(c)) {                                                            \
            fprintf(stderr, "capi_test: %s:%d: %s\n", __FILE__, __LINE__, #c); \
            return 1;                                                          \
        }                                                                      \
    } while (0)

/* One CPX wire packet: length, routing header (dst, src, last; function), payload. */
static size_t packet(uint8_t *out, uint8_t dst, uint8_t src, const uint8_t *p, size_t n)
{
    out[0] = (uint8_t) ((n + 2) & 0xFF);
    out[1] = (uint8_t) ((n + 2) >> 8);
    out[2] = (uint8_t) (dst | (src << 3) | (1 << 6));
    out[3] = 0x0E; /* gapstream's function (APP, 0x05, would be read as the stock image stream) */
    memcpy(out + 4, p, n);
    return n + 4;
}

int main(void)
{
    CHECK(esp32b_spi_buffer_len() == ESP32B_SPI_BUFFER_LEN);
    esp32b_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_clients = 2;
    esp32b_t *h = esp32b_new(&cfg);
    CHECK(h != NULL);
    int32_t c0 = esp32b_client_add(h, 0), c1 = esp32b_client_add(h, 1);
    CHECK(c0 >= 0 && c1 >= 0 && c0 != c1);
    /* max_clients per transport: TCP and UDP slots are separate. */
    int32_t c2 = esp32b_client_add(h, 0), c3 = esp32b_client_add(h, 1);
    CHECK(c2 >= 0 && c3 >= 0);
    CHECK(esp32b_client_add(h, 0) == ESP32B_EFULL);
    CHECK(esp32b_client_add(h, 1) == ESP32B_EFULL);
    CHECK(esp32b_client_remove(h, (uint32_t) c2) == 0 && esp32b_client_remove(h, (uint32_t) c3) == 0);

    /* Each client's arrival (four, two of them gone again) was queued for the GAP8 as WIFI_CTRL
     * "client connected" (ESP32 = 2 -> GAP8 = 4, function 4, [0x32, 1]), as Bitcraze's
     * aideck-esp-firmware reports it. */
    const uint8_t status[6] = {4, 0, 4 | (2 << 3) | (1 << 6), 4, 0x32, 1};
    uint8_t tx[ESP32B_SPI_BUFFER_LEN];
    for (int i = 0; i < 4; i++) {
        CHECK(esp32b_spi_should_arm(h, 0) == 1);
        CHECK(esp32b_spi_arm(h, tx, sizeof tx) == 6);
        CHECK(memcmp(tx, status, 6) == 0);
    }
    CHECK(esp32b_spi_should_arm(h, 0) == 0);

    /* GAP8 -> clients: one SPI transaction, one packet (GAP8 = 4, WiFi host = 3). */
    uint8_t rx[ESP32B_SPI_BUFFER_LEN] = {0}, out[2048];
    const uint8_t msg[] = "frame bytes";
    size_t n = packet(rx, 3, 4, msg, sizeof msg);
    CHECK(esp32b_spi_complete(h, rx, sizeof rx) == 1);
    CHECK(esp32b_client_next(h, (uint32_t) c0, out, sizeof out) == (int32_t) n);
    CHECK(memcmp(out, rx, n) == 0);
    CHECK(esp32b_client_sent(h, (uint32_t) c0, n) == 0);
    CHECK(esp32b_client_next(h, (uint32_t) c0, out, sizeof out) == 0);

    /* Client -> GAP8: the next armed transaction carries it. */
    uint8_t up[64];
    const uint8_t hello[] = "hello";
    size_t m = packet(up, 4, 3, hello, sizeof hello);
    CHECK(esp32b_client_datagram(h, (uint32_t) c1, up, m) == 1);
    CHECK(esp32b_spi_should_arm(h, 0) == 1);
    CHECK(esp32b_spi_arm(h, tx, sizeof tx) == (int32_t) m);
    CHECK(memcmp(tx, up, m) == 0);
    CHECK(esp32b_spi_should_arm(h, 0) == 0);

    /* Errors are codes. */
    CHECK(esp32b_spi_complete(h, (const uint8_t *) "\xff\xff\0\0", 4) == ESP32B_ECPX);
    CHECK(esp32b_client_received(NULL, 0, up, m) == ESP32B_EINVAL);
    CHECK(esp32b_client_remove(h, 77) == ESP32B_ENOCLIENT);
    esp32b_stats_t st;
    CHECK(esp32b_stats(h, &st) == 0);
    CHECK(st.clients == 2 && st.packets_from_gap8 == 1 && st.packets_to_gap8 == 5 && st.spi_malformed == 1);

    /* UDP registration: nothing for an empty datagram, a cookie as large as the request, a
     * client for the echo (a UDP slot is free: c3 was removed above), then a probe a second and
     * the end of the registration 5 s after the newest token it echoed. */
    uint8_t secret[32] = {1, 2, 3}, reply[ESP32B_UDP_REPLY_MAX], req[ESP32B_UDP_REPLY_MAX] = {'G', 'S', 'C', 'Q'};
    size_t rl = 99;
    const uint32_t ip = 0xC0A80402u;
    CHECK(esp32b_udp_secret(h, secret) == 0);
    CHECK(esp32b_udp_received(h, ip, 4000, req, 0, 10, reply, sizeof reply, &rl) == 0 && rl == 0);
    CHECK(esp32b_udp_received(h, ip, 4000, req, sizeof req, 10, reply, sizeof reply, &rl) == 0 && rl == 24);
    CHECK(memcmp(reply, "GSCK", 4) == 0);
    uint8_t echo[ESP32B_UDP_REPLY_MAX];
    memcpy(echo, "GSCE", 4);
    memcpy(echo + 4, reply + 4, 20);
    CHECK(esp32b_udp_received(h, ip, 4001, echo, sizeof echo, 20, reply, sizeof reply, &rl) == 0 && rl == 0);
    CHECK(esp32b_udp_received(h, ip, 4000, echo, sizeof echo, 20, reply, sizeof reply, &rl) == 1 && rl == 24);
    CHECK(memcmp(reply, "GSCW", 4) == 0);
    /* A packet from the GAP8 goes to the new client, to its address. */
    n = packet(rx, 3, 4, msg, sizeof msg);
    CHECK(esp32b_spi_complete(h, rx, sizeof rx) == 1);
    uint32_t to_ip = 0;
    uint16_t to_port = 0;
    int32_t client = -2;
    CHECK(esp32b_udp_next(h, 30, out, sizeof out, &to_ip, &to_port, &client) == (int32_t) n);
    CHECK(to_ip == ip && to_port == 4000 && client >= 0 && memcmp(out, rx, n) == 0);
    CHECK(esp32b_client_sent(h, (uint32_t) client, n) == 0);
    CHECK(esp32b_udp_next(h, 30, out, sizeof out, &to_ip, &to_port, &client) == 0);
    /* FEC: the client asks for it; the next packet comes as a data shard, and its block (one
     * single-packet message) closes after the 5 ms timeout with one parity shard
     * (ceil(1 * 2 / 4) = 1) of 2 + n bytes. */
    esp32b_fec_config_t fc;
    memset(&fc, 0, sizeof fc);
    fc.enabled = 1;
    fc.parity = 2;
    fc.timeout_ms = 5;
    CHECK(esp32b_fec_configure(h, &fc) == ESP32B_EINVAL); /* k = 0 */
    fc.k = 4;
    CHECK(esp32b_fec_configure(h, &fc) == 0);
    CHECK(esp32b_udp_received(h, ip, 4000, (const uint8_t *) "GF\x12\0", 4, 30, reply, sizeof reply, &rl) == 0 && rl == 0);
    n = packet(rx, 3, 4, msg, sizeof msg);
    CHECK(esp32b_spi_complete(h, rx, sizeof rx) == 1);
    CHECK(esp32b_udp_next(h, 30, out, 8, &to_ip, &to_port, &client) == ESP32B_EINVAL);
    CHECK(esp32b_udp_next(h, 30, out, sizeof out, &to_ip, &to_port, &client) == (int32_t) (10 + n));
    CHECK(memcmp(out, "GF\x10", 3) == 0 && out[7] == 0 && memcmp(out + 10, rx, n) == 0 && client >= 0);
    CHECK(esp32b_client_sent(h, (uint32_t) client, 10 + n) == 0);
    CHECK(esp32b_udp_next(h, 30, out, sizeof out, &to_ip, &to_port, &client) == 0);
    CHECK(esp32b_udp_tick(h, 40) == 0);
    CHECK(esp32b_udp_next(h, 40, out, sizeof out, &to_ip, &to_port, &client) == (int32_t) (12 + n));
    CHECK(memcmp(out, "GF\x11", 3) == 0 && out[7] == 1 && out[8] == 1 && out[9] == 1 && client >= 0);
    CHECK(esp32b_client_sent(h, (uint32_t) client, 12 + n) == 0);
    CHECK(esp32b_udp_next(h, 40, out, sizeof out, &to_ip, &to_port, &client) == 0);
    /* A probe after a second; without its echo the registration ends 5 s after the cookie. */
    CHECK(esp32b_udp_tick(h, 1100) == 0);
    CHECK(esp32b_udp_next(h, 1100, out, sizeof out, &to_ip, &to_port, &client) == 24 && client == -1);
    CHECK(memcmp(out, "GSCP", 4) == 0 && to_port == 4000);
    CHECK(esp32b_udp_tick(h, 5009) == 0);
    CHECK(esp32b_udp_tick(h, 5010) == 1);
    CHECK(esp32b_stats(h, &st) == 0 && st.clients == 2); /* c0 and c1 */

    esp32b_free(h);
    printf("capi_test: esp32_bridge C entry points ok\n");
    return 0;
}
