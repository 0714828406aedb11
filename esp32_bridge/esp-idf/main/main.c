/*
 * gapstream ESP32 bridge firmware: the thin ESP-IDF glue around the Rust forwarding core
 * (esp32_bridge, C entry points in include/esp32_bridge.h). All forwarding decisions (which packet
 * goes to the GAP8 next, per-receiver bounded queues that drop whole frames, leader / listeners,
 * malformed input) are the core's, host-tested in esp32_bridge/src and run in the GVSOC
 * end-to-end test; this file only moves bytes:
 *
 *   SPI task   the SPI slave to the GAP8 (VSPI, mode 0) with the two ready-to-talk lines, one CPX
 *              packet per transaction each way, as Bitcraze's aideck-esp-firmware does it
 *   TCP task   accepts receivers on port 5000 (stream of CPX packets), one task per receiver
 *   UDP task   receivers on port 5000/udp (one CPX packet per datagram), registered and kept
 *              registered only while they echo the bridge's cookie and probes (docs/protocol.md
 *              section 2; every decision is the core's, esp32b_udp_*); a receiver that asks
 *              for FEC gets data and parity shards instead (the core's esp32_bridge::fec)
 *   status     on every receiver connect and on the last one's disconnect the core queues
 *              WIFI_CTRL_STATUS_CLIENT_CONNECTED for the GAP8, as aideck-esp-firmware does
 *   WiFi       access point (default, like the stock firmware: the deck is 192.168.4.1) or station
 *
 * The core is not thread-safe: every esp32b_* call happens under `core_lock`.
 * Build and flash: docs/hardware.md ("ESP32").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "driver/gpio.h"
#include "driver/spi_slave.h"
#include "esp_event.h"
#include "esp_heap_caps.h"
#include "esp_log.h"
#include "esp_mac.h"
#include "esp_netif.h"
#include "esp_random.h"
#include "esp_wifi.h"
#include "freertos/FreeRTOS.h"
#include "freertos/event_groups.h"
#include "freertos/semphr.h"
#include "freertos/task.h"
#include "lwip/sockets.h"
#ifdef CONFIG_GAPSTREAM_MDNS
#include "mdns.h"
#endif
#include "nvs_flash.h"

#include "esp32_bridge.h"

static const char *TAG = "gapstream";

/* AI-deck wiring (aideck-esp-firmware main/spi_transport.c). */
#define GAP_RTT_GPIO 32 /* GAP8 -> ESP32: the GAP8 has a packet */
#define ESP_RTT_GPIO 2  /* ESP32 -> GAP8: a slave transaction is armed */
#define SPI_CS_GPIO 5
#define SPI_MOSI_GPIO 19
#define SPI_MISO_GPIO 23
#define SPI_SCLK_GPIO 18

static esp32b_t *core;
static SemaphoreHandle_t core_lock;
static EventGroupHandle_t events;
#define EV_GAP_ASKED (1 << 0) /* rising edge of the GAP8's line */
#define EV_FOR_GAP8 (1 << 1)  /* a receiver queued something for the GAP8 */
#define EV_FROM_GAP8 (1 << 2) /* the GAP8 sent something for the receivers */

#define LOCKED(expr)                                    \
    ({                                                  \
        xSemaphoreTake(core_lock, portMAX_DELAY);       \
        __typeof__(expr) r_ = (expr);                   \
        xSemaphoreGive(core_lock);                      \
        r_;                                             \
    })

/* ---- SPI side -------------------------------------------------------------------------------- */

static void IRAM_ATTR gap_rtt_isr(void *arg)
{
    BaseType_t woken = pdFALSE;
    xEventGroupSetBitsFromISR(events, EV_GAP_ASKED, &woken);
    portYIELD_FROM_ISR(woken);
}

static void IRAM_ATTR spi_post_setup(spi_slave_transaction_t *t)
{
    gpio_set_level(ESP_RTT_GPIO, 1);
}

static void IRAM_ATTR spi_post_trans(spi_slave_transaction_t *t)
{
    gpio_set_level(ESP_RTT_GPIO, 0);
}

static void spi_task(void *arg)
{
    uint8_t *tx = heap_caps_malloc(ESP32B_SPI_BUFFER_LEN, MALLOC_CAP_DMA);
    uint8_t *rx = heap_caps_malloc(ESP32B_SPI_BUFFER_LEN, MALLOC_CAP_DMA);
    if (tx == NULL || rx == NULL)
        abort();
    int gap_asked = gpio_get_level(GAP_RTT_GPIO); /* a GAP8 that raised its line before we ran */
    for (;;) {
        if (!gap_asked && LOCKED(esp32b_spi_should_arm(core, 0)) != 1) {
            EventBits_t b = xEventGroupWaitBits(events, EV_GAP_ASKED | EV_FOR_GAP8, pdTRUE, pdFALSE,
                                                pdMS_TO_TICKS(20));
            gap_asked = (b & EV_GAP_ASKED) != 0;
            continue;
        }
        xEventGroupClearBits(events, EV_GAP_ASKED);
        gap_asked = 0;
        memset(rx, 0, ESP32B_SPI_BUFFER_LEN);
        LOCKED(esp32b_spi_arm(core, tx, ESP32B_SPI_BUFFER_LEN));
        spi_slave_transaction_t t = {
            .length = ESP32B_SPI_BUFFER_LEN * 8,
            .tx_buffer = tx,
            .rx_buffer = rx,
        };
        /* Queues the transaction (post_setup raises our line), waits until the GAP8 clocked it. */
        if (spi_slave_transmit(VSPI_HOST, &t, portMAX_DELAY) != ESP_OK)
            continue;
        int32_t done = LOCKED(esp32b_spi_complete(core, rx, t.trans_len / 8));
        if (done > 0)
            xEventGroupSetBits(events, EV_FROM_GAP8);
    }
}

static void spi_init(void)
{
    gpio_config_t gap_rtt = {
        .pin_bit_mask = 1ull << GAP_RTT_GPIO,
        .mode = GPIO_MODE_INPUT,
        .intr_type = GPIO_INTR_POSEDGE,
    };
    ESP_ERROR_CHECK(gpio_config(&gap_rtt));
    ESP_ERROR_CHECK(gpio_install_isr_service(0));
    ESP_ERROR_CHECK(gpio_isr_handler_add(GAP_RTT_GPIO, gap_rtt_isr, NULL));
    gpio_config_t esp_rtt = {
        .pin_bit_mask = 1ull << ESP_RTT_GPIO,
        .mode = GPIO_MODE_OUTPUT,
    };
    ESP_ERROR_CHECK(gpio_config(&esp_rtt));
    gpio_set_level(ESP_RTT_GPIO, 0);
    spi_bus_config_t bus = {
        .mosi_io_num = SPI_MOSI_GPIO,
        .miso_io_num = SPI_MISO_GPIO,
        .sclk_io_num = SPI_SCLK_GPIO,
        .quadwp_io_num = -1,
        .quadhd_io_num = -1,
    };
    spi_slave_interface_config_t slave = {
        .mode = 0,
        .spics_io_num = SPI_CS_GPIO,
        .queue_size = 1,
        .post_setup_cb = spi_post_setup,
        .post_trans_cb = spi_post_trans,
    };
    ESP_ERROR_CHECK(spi_slave_initialize(VSPI_HOST, &bus, &slave, SPI_DMA_CH_AUTO));
}

/* ---- WiFi side: TCP receivers ---------------------------------------------------------------- */

static void tcp_client_task(void *arg)
{
    int fd = (int) (intptr_t) arg;
    int32_t id = LOCKED(esp32b_client_add(core, 0));
    if (id < 0) {
        ESP_LOGW(TAG, "refusing a receiver: %s", id == ESP32B_EFULL ? "too many" : "error");
        close(fd);
        vTaskDelete(NULL);
    }
    ESP_LOGI(TAG, "receiver %ld connected over TCP", (long) id);
    xEventGroupSetBits(events, EV_FOR_GAP8); /* the core queued WIFI_CTRL "client connected" */
    uint8_t *buf = malloc(2048);
    size_t pending = 0, off = 0;
    int alive = buf != NULL;
    while (alive) {
        fd_set rd, wr;
        FD_ZERO(&rd);
        FD_ZERO(&wr);
        FD_SET(fd, &rd);
        if (pending == off) {
            int32_t n = LOCKED(esp32b_client_next(core, (uint32_t) id, buf, 2048));
            pending = n > 0 ? (size_t) n : 0;
            off = 0;
        }
        if (pending > off)
            FD_SET(fd, &wr);
        struct timeval tv = {.tv_sec = 0, .tv_usec = 20000};
        if (select(fd + 1, &rd, &wr, NULL, &tv) < 0)
            break;
        if (FD_ISSET(fd, &rd)) {
            uint8_t in[512];
            int n = recv(fd, in, sizeof in, 0);
            if (n <= 0)
                break;
            if (LOCKED(esp32b_client_received(core, (uint32_t) id, in, (size_t) n)) > 0)
                xEventGroupSetBits(events, EV_FOR_GAP8);
        }
        if (FD_ISSET(fd, &wr)) {
            int n = send(fd, buf + off, pending - off, MSG_DONTWAIT);
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                break;
            if (n > 0) {
                LOCKED(esp32b_client_sent(core, (uint32_t) id, (size_t) n));
                off += (size_t) n;
            }
        }
    }
    ESP_LOGI(TAG, "receiver %ld disconnected", (long) id);
    LOCKED(esp32b_client_remove(core, (uint32_t) id));
    xEventGroupSetBits(events, EV_FOR_GAP8); /* "client disconnected" if it was the last one */
    free(buf);
    close(fd);
    vTaskDelete(NULL);
}

static void tcp_server_task(void *arg)
{
    int ls = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {
        .sin_family = AF_INET,
        .sin_port = htons(CONFIG_GAPSTREAM_TCP_PORT),
        .sin_addr.s_addr = htonl(INADDR_ANY),
    };
    if (bind(ls, (struct sockaddr *) &a, sizeof a) != 0 || listen(ls, 4) != 0) {
        ESP_LOGE(TAG, "cannot listen on TCP port %d", CONFIG_GAPSTREAM_TCP_PORT);
        vTaskDelete(NULL);
    }
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0)
            continue;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (xTaskCreate(tcp_client_task, "rx-tcp", 4096, (void *) (intptr_t) fd, 5, NULL) != pdPASS)
            close(fd);
    }
}

/* ---- WiFi side: UDP receivers ---------------------------------------------------------------- */

/* Which addresses get the stream, for how long, and what to answer is all the core's (the same
 * registration as the host bridge's: esp32_bridge::cookie::Gate): this task only moves datagrams
 * between the socket and esp32b_udp_received / esp32b_udp_next, and keeps the core's timers
 * running with esp32b_udp_tick. */
static void udp_task(void *arg)
{
    int s = socket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
    struct sockaddr_in a = {
        .sin_family = AF_INET,
        .sin_port = htons(CONFIG_GAPSTREAM_UDP_PORT),
        .sin_addr.s_addr = htonl(INADDR_ANY),
    };
    if (bind(s, (struct sockaddr *) &a, sizeof a) != 0) {
        ESP_LOGE(TAG, "cannot bind UDP port %d", CONFIG_GAPSTREAM_UDP_PORT);
        vTaskDelete(NULL);
    }
    uint8_t *buf = malloc(ESP32B_UDP_DATAGRAM_MAX + 16);
    if (buf == NULL)
        abort();
    struct timeval tv = {.tv_sec = 0, .tv_usec = 5000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        int n = recvfrom(s, buf, ESP32B_UDP_DATAGRAM_MAX + 16, 0, (struct sockaddr *) &from, &fl);
        uint32_t now_ms = (uint32_t) (xTaskGetTickCount() * portTICK_PERIOD_MS);
        if (n >= 0) {
            uint8_t reply[ESP32B_UDP_REPLY_MAX];
            size_t reply_len = 0;
            int32_t r = LOCKED(esp32b_udp_received(core, ntohl(from.sin_addr.s_addr), ntohs(from.sin_port), buf,
                                                   (size_t) n, now_ms, reply, sizeof reply, &reply_len));
            if (r > 0)
                xEventGroupSetBits(events, EV_FOR_GAP8);
            if (reply_len > 0) /* a cookie, or the welcome: never larger than what came in */
                sendto(s, reply, reply_len, MSG_DONTWAIT, (struct sockaddr *) &from, fl);
        }
        if (LOCKED(esp32b_udp_tick(core, now_ms)) > 0)
            xEventGroupSetBits(events, EV_FOR_GAP8); /* "client disconnected" if it was the last one */
        for (int k = 0; k < 8 * CONFIG_GAPSTREAM_MAX_CLIENTS; k++) { /* a few datagrams per client per round */
            uint32_t ip;
            uint16_t port;
            int32_t client;
            int32_t m = LOCKED(esp32b_udp_next(core, now_ms, buf, ESP32B_UDP_DATAGRAM_MAX + 16, &ip, &port, &client));
            if (m <= 0)
                break;
            struct sockaddr_in to = {
                .sin_family = AF_INET,
                .sin_port = htons(port),
                .sin_addr.s_addr = htonl(ip),
            };
            if (sendto(s, buf, (size_t) m, MSG_DONTWAIT, (struct sockaddr *) &to, sizeof to) < 0)
                break; /* socket busy: a stream packet stays queued (the core drops frames if it lasts) */
            if (client >= 0)
                LOCKED(esp32b_client_sent(core, (uint32_t) client, (size_t) m));
        }
    }
}

/* ---- WiFi ------------------------------------------------------------------------------------- */

static void wifi_event(void *arg, esp_event_base_t base, int32_t id, void *data)
{
    if (base == WIFI_EVENT && id == WIFI_EVENT_STA_DISCONNECTED)
        esp_wifi_connect();
    else if (base == IP_EVENT && id == IP_EVENT_STA_GOT_IP)
        ESP_LOGI(TAG, "joined the network as " IPSTR, IP2STR(&((ip_event_got_ip_t *) data)->ip_info.ip));
}

static void wifi_init(void)
{
    ESP_ERROR_CHECK(esp_netif_init());
    ESP_ERROR_CHECK(esp_event_loop_create_default());
    wifi_init_config_t init = WIFI_INIT_CONFIG_DEFAULT();
    ESP_ERROR_CHECK(esp_wifi_init(&init));
    ESP_ERROR_CHECK(esp_event_handler_register(WIFI_EVENT, ESP_EVENT_ANY_ID, wifi_event, NULL));
    ESP_ERROR_CHECK(esp_event_handler_register(IP_EVENT, IP_EVENT_STA_GOT_IP, wifi_event, NULL));
    wifi_config_t c = {0};
#ifdef CONFIG_GAPSTREAM_WIFI_AP
    esp_netif_create_default_wifi_ap();
    strlcpy((char *) c.ap.ssid, CONFIG_GAPSTREAM_WIFI_SSID, sizeof c.ap.ssid);
    strlcpy((char *) c.ap.password, CONFIG_GAPSTREAM_WIFI_PASSWORD, sizeof c.ap.password);
    c.ap.ssid_len = strlen(CONFIG_GAPSTREAM_WIFI_SSID);
    c.ap.channel = CONFIG_GAPSTREAM_WIFI_CHANNEL;
    c.ap.max_connection = CONFIG_GAPSTREAM_MAX_CLIENTS;
    c.ap.authmode = strlen(CONFIG_GAPSTREAM_WIFI_PASSWORD) ? WIFI_AUTH_WPA2_PSK : WIFI_AUTH_OPEN;
    ESP_ERROR_CHECK(esp_wifi_set_mode(WIFI_MODE_AP));
    ESP_ERROR_CHECK(esp_wifi_set_config(WIFI_IF_AP, &c));
    ESP_LOGI(TAG, "access point \"%s\", receivers connect to 192.168.4.1:%d", CONFIG_GAPSTREAM_WIFI_SSID,
             CONFIG_GAPSTREAM_TCP_PORT);
#else
    esp_netif_create_default_wifi_sta();
    strlcpy((char *) c.sta.ssid, CONFIG_GAPSTREAM_WIFI_SSID, sizeof c.sta.ssid);
    strlcpy((char *) c.sta.password, CONFIG_GAPSTREAM_WIFI_PASSWORD, sizeof c.sta.password);
    ESP_ERROR_CHECK(esp_wifi_set_mode(WIFI_MODE_STA));
    ESP_ERROR_CHECK(esp_wifi_set_config(WIFI_IF_STA, &c));
#endif
    ESP_ERROR_CHECK(esp_wifi_start());
#ifdef CONFIG_GAPSTREAM_WIFI_STA
    esp_wifi_connect();
#endif
}

/* ---- mDNS: advertised as the stock firmware advertises a deck --------------------------------- */

/* Bitcraze's aideck-esp-firmware (main/discovery.c) announces every deck as host aideck-XXXXXX (the
 * last three bytes of its station MAC), service _cpx._tcp on the CPX port, TXT pname=aideck,
 * pversion, id=<the whole MAC, 12 upper-case hex digits>, name, cpxversion=1; `gapstream ground
 * --discover` finds decks by that TXT id or host name. The instance name carries the host name
 * too (the stock firmware names every deck "Crazyflie Packet eXchange", which mDNS then has to
 * rename on a network with several decks). The host bridge does the same (esp32_bridge::host::mdns). */
static char mdns_host[14];
static char mdns_mac[13];
static char mdns_instance[48];

static void discovery_init(void)
{
#ifdef CONFIG_GAPSTREAM_MDNS
    uint8_t mac[6];
    esp_read_mac(mac, ESP_MAC_WIFI_STA);
    snprintf(mdns_host, sizeof mdns_host, "aideck-%02X%02X%02X", mac[3], mac[4], mac[5]);
    snprintf(mdns_mac, sizeof mdns_mac, "%02X%02X%02X%02X%02X%02X", mac[0], mac[1], mac[2], mac[3],
             mac[4], mac[5]);
    snprintf(mdns_instance, sizeof mdns_instance, "Crazyflie Packet eXchange %s", mdns_host);
    mdns_txt_item_t txt[] = {
        {"pname", "aideck"}, {"pversion", "1.1"}, {"id", mdns_mac}, {"name", ""}, {"cpxversion", "1"},
    };
    if (mdns_init() != ESP_OK || mdns_hostname_set(mdns_host) != ESP_OK ||
        mdns_instance_name_set("AI-deck") != ESP_OK ||
        mdns_service_add(mdns_instance, "_cpx", "_tcp", CONFIG_GAPSTREAM_TCP_PORT, txt,
                         sizeof txt / sizeof txt[0]) != ESP_OK) {
        ESP_LOGW(TAG, "mDNS: could not advertise %s (receivers can still connect by address)", mdns_host);
        return;
    }
    ESP_LOGI(TAG, "mDNS: %s, _cpx._tcp port %d, id %s", mdns_host, CONFIG_GAPSTREAM_TCP_PORT, mdns_mac);
#endif
}

void app_main(void)
{
    esp_err_t r = nvs_flash_init();
    if (r == ESP_ERR_NVS_NO_FREE_PAGES || r == ESP_ERR_NVS_NEW_VERSION_FOUND) {
        ESP_ERROR_CHECK(nvs_flash_erase());
        r = nvs_flash_init();
    }
    ESP_ERROR_CHECK(r);
    core_lock = xSemaphoreCreateMutex();
    events = xEventGroupCreate();
    /* Memory: the core keeps whole messages (a 324x244 frame is ~79 KB), shared by every receiver
     * it is queued for: one frame being assembled from SPI plus CONFIG_GAPSTREAM_QUEUE_FRAMES queued
     * ones must fit the heap left after WiFi (~200 KB on the AI-deck's ESP32). */
    esp32b_config_t cfg = {
        .client_queue_bytes = CONFIG_GAPSTREAM_QUEUE_FRAMES * 82000u,
        .max_message = 90000u,
        .max_clients = CONFIG_GAPSTREAM_MAX_CLIENTS,
    };
    core = esp32b_new(&cfg);
    if (core == NULL || core_lock == NULL || events == NULL)
        abort();
    esp32b_fec_config_t fec = {
#ifdef CONFIG_GAPSTREAM_FEC
        .enabled = 1,
        .k = CONFIG_GAPSTREAM_FEC_K,
        .parity = CONFIG_GAPSTREAM_FEC_PARITY,
        .timeout_ms = CONFIG_GAPSTREAM_FEC_TIMEOUT_MS,
#ifdef CONFIG_GAPSTREAM_FEC_ADAPTIVE
        .adaptive = 1,
        .floor = CONFIG_GAPSTREAM_FEC_FLOOR,
        .ceiling = CONFIG_GAPSTREAM_FEC_CEILING,
#endif
#else
        .enabled = 0,
        .k = 1,
#endif
    };
    if (esp32b_fec_configure(core, &fec) != 0)
        abort(); /* k + parity above 256, or floor above ceiling */
    if (esp32b_spi_buffer_len() != ESP32B_SPI_BUFFER_LEN)
        abort(); /* header and library out of step */
    wifi_init();
    discovery_init();
    /* With the radio on, esp_fill_random gives true random numbers. */
    uint8_t secret[32];
    esp_fill_random(secret, sizeof secret);
    if (esp32b_udp_secret(core, secret) != 0)
        abort();
    spi_init();
    xTaskCreatePinnedToCore(spi_task, "spi", 4096, NULL, 10, NULL, 1);
    xTaskCreate(tcp_server_task, "tcp", 4096, NULL, 5, NULL);
    if (CONFIG_GAPSTREAM_UDP_PORT != 0)
        xTaskCreate(udp_task, "udp", 4096, NULL, 5, NULL);
}
