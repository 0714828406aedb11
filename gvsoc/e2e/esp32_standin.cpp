/*
 * esp32_standin.cpp: a GVSOC DPI model standing in for the AI-deck's ESP32 (NINA-W102) in the
 * end-to-end run (`make gvsoc-e2e`). Written for gapstream; built against the GAP SDK's DPI model
 * headers (dpi/models.hpp) and linked with esp32_bridge's C entry points, so the simulated ESP32
 * runs the very forwarding core and SPI-slave logic of the real ESP32 firmware
 * (esp32_bridge/esp-idf): only the I/O around it is different.
 *
 *  - SPI slave on the GAP8's SPIM1 CS0, bit by bit: MOSI sampled on every clock edge, MISO driven
 *    before the next one (full duplex), one CPX packet per transaction each way;
 *  - the AI-deck's MISO limit, as the board has it: every MISO bit the GAP8 clocks faster than
 *    `miso_max_hz` (7.2 MHz: E. Cereda, A. Giusti, D. Palossi, "NanoCockpit", arXiv 2601.07476,
 *    2026) is driven inverted, so a firmware that reads the ESP32 at a faster clock gets garbage.
 *    The SCLK period is measured over the last 8 clock periods of a burst (GVSOC's edge times are
 *    quantised to a few ns, ~3 % of one 7 MHz period; over 8 periods 0.4 %), and bits are judged
 *    from the 4th period of a burst on; a pause longer than 3 limit periods (between the two
 *    parts of a transaction) starts a new burst. At the end the model
 *    prints one line, `esp32-standin summary sclk_max_hz=.. miso_data_max_hz=..
 *    miso_corrupted_bits=.. transactions=..`: the fastest clock seen, the fastest clock at which
 *    MISO carried the ESP32's lengths or packets, and how many of those bits it corrupted;
 *  - the two ready-to-talk lines: GAP8 -> ESP32 on GPIO 3 (a rising edge asks for a
 *    transaction), ESP32 -> GAP8 on GPIO 18 (high while a transaction is armed);
 *  - the WiFi side as a TCP server on localhost (port from the config, like the deck's port 5000):
 *    receivers (`gapstream view/record --connect`) connect to it; several at once;
 *  - WiFi no faster than the ESP32's: what the bridge core has for the receivers goes into the
 *    stand-in's WiFi queue and leaves it at `wifi_kbps` of simulated time (every receiver's copy
 *    takes its own air time; 0: no limit, localhost speed). The ESP32 holds at most
 *    `wifi_queue_bytes` for WiFi (the queue plus the message the core is assembling from SPI):
 *    while it holds that much it arms no SPI transaction, so the GAP8 waits on the ready line,
 *    as on the board (a message larger than the bound still passes: the queue must empty first).
 *    The summary line adds `wifi_kbps=.. wifi_queue_bytes=.. wifi_bytes=.. wifi_held_max=..
 *    wifi_stall_ns=..`: bytes put on the air, the most held, and how long the GAP8 asked for a
 *    transaction while the queue was full.
 *
 * Simulated time: the ESP32 reacts `latency_ns` after the GAP8 asks (its SPI task waking up and
 * queueing a slave transaction) and polls its sockets every `poll_ns`; its task runs every
 * `tick_ns` of simulated time.
 *
 * Board wiring: selected with gapy config options (see gvsoc/e2e/run.sh), which swap the ai_deck
 * board's "wifi" device for this model:
 *   --config-opt=**\/devices/wifi/generator=generators/v1/devices/spim_verif_gen
 *   --config-opt=**\/devices/wifi/module=/abs/path/esp32_standin.so
 *   --config-opt=**\/devices/wifi/gpio/esp_rtt=gpio18 --config-opt=**\/devices/wifi/gpio/gap_rtt=gpio3
 */
#include "dpi/models.hpp"
#include "esp32_bridge.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <vector>

class Esp32;

/* The simulation engine's time in ps (GVSOC's DPI wrapper, dpi_wrapper_impl.cpp). The task's own
 * sum of waits drifts from it: each wait is rounded up to the DPI clock's cycles. */
extern "C" int64_t dpi_time(void *handle, int64_t t);

class Esp32_qspi_itf : public Qspi_itf
{
public:
    Esp32_qspi_itf(Esp32 *top) : top(top) {}
    void edge(int64_t timestamp, int data_0, int data_1, int data_2, int data_3, int mask);
    void cs_edge(int64_t timestamp, int cs);

private:
    Esp32 *top;
};

class Esp32_gpio_itf : public Gpio_itf
{
public:
    Esp32_gpio_itf(Esp32 *top, bool is_gap_rtt) : top(top), is_gap_rtt(is_gap_rtt) {}
    void edge(int64_t timestamp, int data);

private:
    Esp32 *top;
    bool is_gap_rtt;
};

struct Client
{
    int fd;
    uint32_t id;
    std::vector<uint8_t> pending; /* taken from the bridge: the WiFi queue of this receiver */
    size_t aired;                 /* bytes of `pending` that went on the air */
    size_t off;                   /* bytes of `pending` written to the socket (<= aired) */
};

class Esp32 : public Dpi_model
{
public:
    Esp32(js::config *config, void *handle);
    void start();
    void stop();

    void cs_edge(int cs);
    void mosi_bit(int64_t timestamp, int bit);
    void gap_rtt(int level);

private:
    static void task_stub(void *arg) { static_cast<Esp32 *>(arg)->task(); }
    void task();
    void arm();
    void drive_miso();
    void poll_sockets();
    void take_from_bridge(Client &c);
    bool take_chunk(Client &c);
    void air();
    size_t wifi_queued() const;
    bool wifi_full() const;
    void log(const char *fmt, ...) __attribute__((format(printf, 2, 3)));

    Esp32_qspi_itf *spi;
    Esp32_gpio_itf *esp_rtt_itf;
    Esp32_gpio_itf *gap_rtt_itf;
    esp32b_t *bridge;
    uint8_t tx[ESP32B_SPI_BUFFER_LEN];
    uint8_t rx[ESP32B_SPI_BUFFER_LEN];
    bool armed = false;
    bool selected = false;
    bool gap_asked = false;
    int gap_level = 0;
    size_t bit = 0;
    int64_t latency_ps;
    int64_t poll_ps;
    int64_t tick_ps;
    void *handle;                   /* the DPI wrapper's, for dpi_time() */
    int64_t now() const { return dpi_time(this->handle, 0); }
    /* The WiFi model. */
    int64_t wifi_kbps;              /* 0: no limit */
    size_t wifi_queue_bytes;
    size_t assembling = 0;          /* bytes from the GAP8 of a message the core has not completed */
    int64_t air_free_ps = 0;        /* when the air is free for the next chunk */
    bool air_idle = true;
    size_t next_client = 0;         /* round robin over the receivers' queues */
    uint64_t wifi_bytes = 0;
    size_t wifi_held_max = 0;
    int64_t stall_ps = 0;
    int port;
    int listen_fd = -1;
    std::vector<Client> clients;
    uint64_t transactions = 0;
    uint64_t bits_outside = 0;
    bool verbose;
    /* The MISO limit and what was measured. */
    int64_t miso_min_period_ps;
    int64_t last_edge_ps = -1;
    int64_t burst_ps[9];            /* times of the last edges of the current burst */
    int burst_n = 0;
    int64_t min_period_ps = 0;      /* fastest SCLK period seen */
    int64_t min_data_period_ps = 0; /* fastest SCLK period while MISO carried lengths / a packet */
    uint64_t corrupted_bits = 0;
    bool corruption_reported = false;
    bool fast = false;              /* the last edge came faster than the MISO limit */
    int64_t period_ps = 0;          /* the last SCLK period */
};

void Esp32_qspi_itf::edge(int64_t timestamp, int data_0, int, int, int, int)
{
    top->mosi_bit(timestamp, data_0 & 1);
}

void Esp32_qspi_itf::cs_edge(int64_t, int cs)
{
    top->cs_edge(cs);
}

void Esp32_gpio_itf::edge(int64_t, int data)
{
    if (is_gap_rtt)
        top->gap_rtt(data);
}

Esp32::Esp32(js::config *config, void *handle) : Dpi_model(config, handle), handle(handle)
{
    signal(SIGPIPE, SIG_IGN);
    this->spi = new Esp32_qspi_itf(this);
    this->create_itf("input", static_cast<Dpi_itf *>(this->spi));
    js::config *gpio = config->get("gpio");
    std::string esp_rtt = gpio ? gpio->get_child_str("esp_rtt") : "";
    std::string gap_rtt = gpio ? gpio->get_child_str("gap_rtt") : "";
    if (esp_rtt.empty() || gap_rtt.empty())
        this->fatal("esp32_standin: the config needs gpio/esp_rtt and gpio/gap_rtt\n");
    this->esp_rtt_itf = new Esp32_gpio_itf(this, false);
    this->gap_rtt_itf = new Esp32_gpio_itf(this, true);
    this->create_itf(esp_rtt, static_cast<Dpi_itf *>(this->esp_rtt_itf));
    this->create_itf(gap_rtt, static_cast<Dpi_itf *>(this->gap_rtt_itf));

    js::config *c;
    this->port = (c = config->get("port")) ? (int) c->get_int() : 5000;
    this->latency_ps = ((c = config->get("latency_ns")) ? c->get_int() : 20000) * 1000;
    this->poll_ps = ((c = config->get("poll_ns")) ? c->get_int() : 50000) * 1000;
    this->tick_ps = ((c = config->get("tick_ns")) ? c->get_int() : 1000) * 1000;
    this->verbose = (c = config->get("verbose")) && c->get_int() != 0;
    int64_t miso_max_hz = (c = config->get("miso_max_hz")) ? c->get_int() : 7200000;
    this->wifi_kbps = (c = config->get("wifi_kbps")) ? c->get_int() : 0;
    this->wifi_queue_bytes = (size_t) ((c = config->get("wifi_queue_bytes")) ? c->get_int() : 82000);
    this->miso_min_period_ps = 1000000000000LL / (miso_max_hz > 0 ? miso_max_hz : 1);

    this->bridge = esp32b_new(NULL);
    if (!this->bridge)
        this->fatal("esp32_standin: out of memory\n");
    memset(this->tx, 0, sizeof this->tx);
    memset(this->rx, 0, sizeof this->rx);
}

void Esp32::log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "esp32-standin: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

void Esp32::start()
{
    this->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(this->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t) this->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(this->listen_fd, (struct sockaddr *) &a, sizeof a) != 0 || listen(this->listen_fd, 8) != 0)
        this->fatal("esp32_standin: cannot listen on 127.0.0.1:%d: %s\n", this->port, strerror(errno));
    fcntl(this->listen_fd, F_SETFL, O_NONBLOCK);
    this->log("WiFi side listening on 127.0.0.1:%d (ESP32 latency %lld ns, socket poll %lld ns)",
              this->port, (long long) (this->latency_ps / 1000), (long long) (this->poll_ps / 1000));
    if (this->wifi_kbps > 0)
        this->log("WiFi at %lld kbit/s of simulated time, at most %zu bytes held for it",
                  (long long) this->wifi_kbps, this->wifi_queue_bytes);
    else
        this->log("WiFi not limited (localhost speed)");
    this->create_task((void *) &Esp32::task_stub, this);
}

static long long hz_of(int64_t period_ps)
{
    return period_ps > 0 ? (long long) ((1000000000000LL + period_ps / 2) / period_ps) : 0;
}

void Esp32::stop()
{
    /* The firmware exited and the simulation ends with it: what the ESP32 still holds for WiFi
     * (at most its queue bound and a message) goes to the receivers now, at once, so that they
     * get every frame the GAP8 sent. The rates were measured before, on the GAP8's side. */
    size_t flushed = 0;
    for (Client &c : this->clients) {
        this->take_from_bridge(c);
        fcntl(c.fd, F_SETFL, 0);
        struct timeval tv = {5, 0}; /* a receiver that stopped reading does not hold the end */
        setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        while (c.off < c.pending.size()) {
            ssize_t w = send(c.fd, c.pending.data() + c.off, c.pending.size() - c.off, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            if (c.off + (size_t) w > c.aired)
                flushed += c.off + (size_t) w - (c.off > c.aired ? c.off : c.aired);
            c.off += (size_t) w;
        }
    }
    if (flushed > 0)
        this->log("the simulation ended with %zu bytes queued for WiFi: handed to the receivers at once",
                  flushed);
    this->log("simulated time at the end: %.3f ms", (double) this->now() / 1e9);
    esp32b_stats_t st;
    if (esp32b_stats(this->bridge, &st) == 0)
        this->log("SPI transactions %llu, packets from GAP8 %llu, to GAP8 %llu, malformed %llu",
                  (unsigned long long) st.spi_transactions, (unsigned long long) st.packets_from_gap8,
                  (unsigned long long) st.packets_to_gap8, (unsigned long long) st.spi_malformed);
    /* On stdout, where the e2e runner reads the firmware's lines. */
    printf("esp32-standin summary sclk_max_hz=%lld miso_data_max_hz=%lld miso_corrupted_bits=%llu "
           "transactions=%llu wifi_kbps=%lld wifi_queue_bytes=%zu wifi_bytes=%llu wifi_held_max=%zu "
           "wifi_stall_ns=%lld\n",
           hz_of(this->min_period_ps), hz_of(this->min_data_period_ps),
           (unsigned long long) this->corrupted_bits, (unsigned long long) this->transactions,
           (long long) this->wifi_kbps, this->wifi_queue_bytes, (unsigned long long) this->wifi_bytes,
           this->wifi_held_max, (long long) (this->stall_ps / 1000));
    fflush(stdout);
}

/* The ESP32's SPI task: arm a transaction when the GAP8 asked or a packet waits for it. It runs
 * on its own simulated-time ticks (`tick_ns`); the callbacks only set flags. */
void Esp32::task()
{
    this->esp_rtt_itf->set_data(0);
    int64_t since_poll = this->poll_ps;
    while (1) {
        if (since_poll >= this->poll_ps) {
            this->poll_sockets();
            since_poll = 0;
        }
        bool want = !this->armed && esp32b_spi_should_arm(this->bridge, this->gap_asked) == 1;
        /* Backpressure: no transaction while the WiFi side holds its fill. */
        bool stalled = want && this->wifi_full();
        if (want && !stalled) {
            this->wait_ps(this->latency_ps);
            since_poll += this->latency_ps;
            if (!this->armed)
                this->arm();
            continue;
        }
        int64_t t0 = stalled && this->gap_asked ? this->now() : -1;
        this->wait_ps(this->tick_ps);
        since_poll += this->tick_ps;
        if (t0 >= 0)
            this->stall_ps += this->now() - t0;
    }
}

/* Bytes waiting for the air: the longest receiver queue (the core shares one copy of a message
 * between its receivers; each copy takes its own air time). */
size_t Esp32::wifi_queued() const
{
    size_t q = 0;
    for (const Client &c : this->clients)
        if (c.pending.size() - c.aired > q)
            q = c.pending.size() - c.aired;
    return q;
}

/* Full: what the ESP32 holds for WiFi (queued + the message being assembled from SPI) reached the
 * bound, and the air has something to drain (a message larger than the bound must not block it). */
bool Esp32::wifi_full() const
{
    if (this->wifi_kbps <= 0)
        return false;
    size_t q = this->wifi_queued();
    return q > 0 && q + this->assembling >= this->wifi_queue_bytes;
}

void Esp32::arm()
{
    memset(this->tx, 0, sizeof this->tx);
    memset(this->rx, 0, sizeof this->rx);
    int n = esp32b_spi_arm(this->bridge, this->tx, sizeof this->tx);
    if (this->verbose)
        this->log("armed (packet of %d bytes for the GAP8)", n);
    this->gap_asked = false;
    this->bit = 0;
    this->armed = true;
    this->esp_rtt_itf->set_data(1);
}

void Esp32::drive_miso()
{
    size_t byte = this->bit / 8;
    int v = byte < sizeof this->tx ? (this->tx[byte] >> (7 - this->bit % 8)) & 1 : 0;
    if (this->fast) {
        /* Clocked faster than the board carries MISO: the GAP8 reads garbage (inverted bits). */
        v ^= 1;
        size_t len = 2 + (size_t) (this->tx[0] | (this->tx[1] << 8));
        if (this->armed && (byte < 4 || (len > 2 && byte < len))) {
            this->corrupted_bits++;
            if (!this->corruption_reported) {
                this->corruption_reported = true;
                printf("esp32-standin: MISO clocked at %lld Hz, above the AI-deck's %lld Hz limit: the bits "
                       "the GAP8 reads are corrupted (as on the real board)\n",
                       hz_of(this->period_ps), hz_of(this->miso_min_period_ps));
                fflush(stdout);
            }
        }
    }
    this->spi->set_data(v);
}

void Esp32::cs_edge(int cs)
{
    bool sel = cs == 0;
    if (sel == this->selected)
        return;
    this->selected = sel;
    this->last_edge_ps = -1;
    this->burst_n = 0;
    this->fast = false;
    if (sel) {
        /* Start (or, after a held CS, continuation) of a transaction: first MISO bit out. */
        if (!this->armed)
            this->bits_outside++;
        this->drive_miso();
        return;
    }
    /* End of the transaction. */
    if (this->armed) {
        this->armed = false;
        this->esp_rtt_itf->set_data(0);
        size_t n = (this->bit + 7) / 8;
        if (n > sizeof this->rx)
            n = sizeof this->rx;
        /* The GAP8's packet (its CPX length field + 2 header bytes): part of a message for WiFi
         * until the core completes that message. */
        size_t wire = 2 + (size_t) (this->rx[0] | (this->rx[1] << 8));
        int r = esp32b_spi_complete(this->bridge, this->rx, n);
        if (wire > 2 && wire <= n)
            this->assembling += wire;
        if (r > 0)
            this->assembling = 0;
        this->transactions++;
        if (this->verbose || r < 0)
            this->log("transaction %llu: %zu bytes clocked, %s", (unsigned long long) this->transactions, n,
                      r < 0 ? "malformed packet from the GAP8" : "ok");
    }
}

void Esp32::mosi_bit(int64_t timestamp, int v)
{
    if (!this->selected || !this->armed) {
        this->bits_outside++;
        return;
    }
    /* The SCLK period, averaged over the last (up to) 8 periods of this burst of edges. */
    int64_t gap = this->last_edge_ps >= 0 ? timestamp - this->last_edge_ps : -1;
    this->last_edge_ps = timestamp;
    if (gap < 0 || gap > 3 * this->miso_min_period_ps)
        this->burst_n = 0;
    if (this->burst_n == 9) {
        memmove(this->burst_ps, this->burst_ps + 1, 8 * sizeof this->burst_ps[0]);
        this->burst_n = 8;
    }
    this->burst_ps[this->burst_n++] = timestamp;
    int64_t period = 0;
    if (this->burst_n >= 5)
        period = (timestamp - this->burst_ps[0]) / (this->burst_n - 1);
    this->fast = period > 0 && period < this->miso_min_period_ps;
    this->period_ps = period;
    if (period > 0) {
        if (this->min_period_ps == 0 || period < this->min_period_ps)
            this->min_period_ps = period;
        size_t byte = this->bit / 8;
        size_t len = 2 + (size_t) (this->tx[0] | (this->tx[1] << 8));
        if ((byte < 4 || (len > 2 && byte < len)) &&
            (this->min_data_period_ps == 0 || period < this->min_data_period_ps))
            this->min_data_period_ps = period;
    }
    size_t byte = this->bit / 8;
    if (byte < sizeof this->rx) {
        int shift = 7 - this->bit % 8;
        this->rx[byte] = (uint8_t) ((this->rx[byte] & ~(1u << shift)) | ((unsigned) v << shift));
    }
    this->bit++;
    this->drive_miso();
}

void Esp32::gap_rtt(int level)
{
    if (level && !this->gap_level)
        this->gap_asked = true;
    this->gap_level = level;
}

/* The WiFi side: accept receivers, feed what they send to the bridge, write what it has for
 * them (non-blocking; a slow receiver makes the bridge drop whole frames for it). */
void Esp32::poll_sockets()
{
    for (;;) {
        int fd = accept(this->listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        int id = esp32b_client_add(this->bridge, 0);
        if (id < 0) {
            this->log("refusing a receiver: too many clients");
            close(fd);
            continue;
        }
        fcntl(fd, F_SETFL, O_NONBLOCK);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        this->clients.push_back(Client{fd, (uint32_t) id, {}, 0, 0});
        this->log("receiver %d connected", id);
    }
    uint8_t buf[4096];
    for (size_t i = 0; i < this->clients.size();) {
        Client &c = this->clients[i];
        bool gone = false;
        for (;;) {
            ssize_t n = recv(c.fd, buf, sizeof buf, 0);
            if (n > 0) {
                esp32b_client_received(this->bridge, c.id, buf, (size_t) n);
                continue;
            }
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
                gone = true;
            break;
        }
        if (!gone && this->wifi_kbps > 0)
            this->take_from_bridge(c);
        if (gone) {
            this->log("receiver %u disconnected", c.id);
            esp32b_client_remove(this->bridge, c.id);
            close(c.fd);
            this->clients.erase(this->clients.begin() + i);
            continue;
        }
        i++;
    }
    this->air();
    /* Write what went on the air to the sockets (a receiver slower than that in wall-clock time
     * only delays it here; it took its air time already). */
    for (size_t i = 0; i < this->clients.size();) {
        Client &c = this->clients[i];
        bool gone = false;
        for (;;) {
            if (c.off == c.aired) {
                if (c.off == c.pending.size()) {
                    c.pending.clear();
                    c.aired = c.off = 0;
                }
                /* Without a WiFi limit: one chunk from the core at a time, as fast as the socket
                 * takes it (the core drops frames for a receiver that cannot keep up). */
                if (this->wifi_kbps > 0 || !this->take_chunk(c))
                    break;
            }
            ssize_t w = send(c.fd, c.pending.data() + c.off, c.aired - c.off, MSG_NOSIGNAL);
            if (w > 0) {
                c.off += (size_t) w;
                continue;
            }
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            gone = true;
            break;
        }
        if (c.off >= 65536) {
            /* Drop what was written (the queue keeps streaming and may never be empty). */
            c.pending.erase(c.pending.begin(), c.pending.begin() + (std::ptrdiff_t) c.off);
            c.aired -= c.off;
            c.off = 0;
        }
        if (gone) {
            this->log("receiver %u disconnected", c.id);
            esp32b_client_remove(this->bridge, c.id);
            close(c.fd);
            this->clients.erase(this->clients.begin() + i);
            continue;
        }
        i++;
    }
    size_t held = this->wifi_queued() + this->assembling;
    if (held > this->wifi_held_max)
        this->wifi_held_max = held;
}

/* The next chunk (up to 4 KiB) the core has for this receiver into its queue; false if none. */
bool Esp32::take_chunk(Client &c)
{
    uint8_t buf[4096];
    int n = esp32b_client_next(this->bridge, c.id, buf, sizeof buf);
    if (n <= 0)
        return false;
    c.pending.insert(c.pending.end(), buf, buf + n);
    esp32b_client_sent(this->bridge, c.id, (size_t) n);
    if (this->wifi_kbps <= 0)
        c.aired = c.pending.size();
    return true;
}

/* Everything the core has for this receiver into its WiFi queue (the core then never has to drop
 * frames for it: the bound is kept by backpressure instead). */
void Esp32::take_from_bridge(Client &c)
{
    while (this->take_chunk(c)) {
    }
}

/* The air: chunks of at most one TCP segment (1460 bytes), one receiver after the other, each
 * taking bytes * 8 / rate of simulated time. The air starts when data arrives; it saves no time
 * while idle. */
void Esp32::air()
{
    if (this->wifi_kbps <= 0 || this->clients.empty())
        return;
    if (this->wifi_queued() == 0) {
        this->air_idle = true;
        return;
    }
    int64_t now = this->now();
    if (this->air_idle || this->air_free_ps < now - this->poll_ps) {
        if (this->air_free_ps < now)
            this->air_free_ps = now;
        this->air_idle = false;
    }
    while (this->air_free_ps <= now) {
        Client *c = nullptr;
        for (size_t k = 0; k < this->clients.size(); k++) {
            Client &x = this->clients[(this->next_client + k) % this->clients.size()];
            if (x.aired < x.pending.size()) {
                c = &x;
                this->next_client = (this->next_client + k + 1) % this->clients.size();
                break;
            }
        }
        if (!c) {
            this->air_idle = true;
            break;
        }
        size_t n = c->pending.size() - c->aired;
        if (n > 1460)
            n = 1460;
        c->aired += n;
        this->wifi_bytes += n;
        /* bits / (kbit/s) = ms; in ps: bytes * 8 * 1e9 / kbps */
        this->air_free_ps += (int64_t) n * 8 * 1000000000LL / this->wifi_kbps;
    }
}

extern "C" Dpi_model *dpi_model_new(js::config *config, void *handle)
{
    return new Esp32(config, handle);
}
