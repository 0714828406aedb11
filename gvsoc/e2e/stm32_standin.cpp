/*
 * stm32_standin.cpp: a GVSOC DPI model standing in for the Crazyflie's STM32 on the AI-deck's UART
 * in the end-to-end run (`make gvsoc-e2e`). Written for gapstream; built against the GAP SDK's DPI
 * model headers (dpi/models.hpp) and put in place of the ai_deck board's `uart` device (the SDK's
 * uart_tb, which only prints what the GAP8 sends).
 *
 *  - GAP8 -> STM32 (the GAP8's UART TX, its console: `FW ...` lines): decoded from the line's edge
 *    times at the configured baud rate (8N1) and printed on stdout, as the uart_tb device does, so
 *    the e2e runner reads the firmware's lines as before;
 *  - STM32 -> GAP8 (the GAP8's UART RX): every `period` of simulated time a state message of
 *    NanoCockpit's STM32 application (E. Cereda, A. Giusti, D. Palossi, "NanoCockpit", 2026; the
 *    `!STA` layout of gapstream_drone::state: header, u32 µs, position / velocity / acceleration
 *    in mm, mm/s, mm/s², the compressed quaternion, body rates in mrad/s, CRC-32), bit by bit at
 *    the baud rate (start bit, 8 data bits LSB first, stop bit), as the Crazyflie's UART1 sends it.
 *    The state is gapstream's simulated trajectory (gapstream::flight::Circle::default(): a circle
 *    of 1 m at 1 m, a lap in 10 s, the nose along the path) at the STM32 time of the message, which
 *    is the simulated time in µs when its first bit goes out. The e2e runner checks that every
 *    frame carries a sample and its age at the end of the exposure (`--max-state-age-ms`); the
 *    trajectory's values are checked exactly on the host (`make mcap-test`).
 *
 * At the end: one line on stdout, `stm32-standin summary messages=.. bytes=.. baud=.. period_us=..
 * tx_bytes=..`.
 *
 * Board wiring (gvsoc/e2e/src/main.rs):
 *   --config-opt=**\/devices/uart/module=/abs/path/stm32_standin.so
 *   --config-opt=**\/devices/uart/period_us=10000 (100 Hz; 0: no state messages)
 */
#include "dpi/models.hpp"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern "C" int64_t dpi_time(void *handle, int64_t t);

class Stm32;

class Stm32_uart_itf : public Uart_itf
{
public:
    Stm32_uart_itf(Stm32 *top) : top(top) {}
    void tx_edge(int64_t timestamp, int data);

private:
    Stm32 *top;
};

class Stm32 : public Dpi_model
{
public:
    Stm32(js::config *config, void *handle);
    void start();
    void stop();
    void tx_edge(int64_t timestamp, int data);

private:
    static void task_stub(Stm32 *s) { s->task(); }
    void task();
    void send_byte(uint8_t b);
    void tx_bits(int level, int64_t n);
    int64_t now() const { return dpi_time(this->handle, 0); }

    void *handle;
    Stm32_uart_itf *uart;
    int64_t bit_ps;
    int64_t period_ps;
    int64_t baud;
    /* GAP8 TX decoding */
    int tx_level = 1;
    int64_t tx_last_ps = 0;
    int tx_state = 0; /* 0: idle, 1..8: data bits received, 9: waiting for the stop bit */
    uint8_t tx_byte = 0;
    uint64_t tx_bytes = 0;
    /* STM32 TX */
    uint64_t messages = 0;
    uint64_t bytes = 0;
};

void Stm32_uart_itf::tx_edge(int64_t timestamp, int data)
{
    this->top->tx_edge(timestamp, data);
}

Stm32::Stm32(js::config *config, void *handle) : Dpi_model(config, handle), handle(handle)
{
    this->uart = new Stm32_uart_itf(this);
    this->create_itf("uart", static_cast<Uart_itf *>(this->uart));
    js::config *c;
    this->baud = (c = config->get("baudrate")) ? c->get_int() : 115200;
    if (this->baud <= 0)
        this->baud = 115200;
    this->bit_ps = 1000000000000LL / this->baud;
    this->period_ps = ((c = config->get("period_us")) ? c->get_int() : 10000) * 1000000LL;
}

void Stm32::start()
{
    fprintf(stderr, "stm32-standin: UART at %lld baud, a state message every %lld us\n",
            (long long) this->baud, (long long) (this->period_ps / 1000000));
    this->create_task((void *) &Stm32::task_stub, this);
}

void Stm32::stop()
{
    printf("stm32-standin summary messages=%llu bytes=%llu baud=%lld period_us=%lld tx_bytes=%llu\n",
           (unsigned long long) this->messages, (unsigned long long) this->bytes,
           (long long) this->baud, (long long) (this->period_ps / 1000000),
           (unsigned long long) this->tx_bytes);
    fflush(stdout);
}

/* The bits of the GAP8's TX line since its last edge: `n` bit times at `level`. */
void Stm32::tx_bits(int level, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (this->tx_state == 0) {
            if (level == 0) {
                this->tx_state = 1;
                this->tx_byte = 0;
            } else {
                /* Idle: the rest of this stretch is idle too. */
                return;
            }
        } else if (this->tx_state <= 8) {
            this->tx_byte = (uint8_t) ((this->tx_byte >> 1) | (level << 7));
            if (++this->tx_state == 9) {
                putchar(this->tx_byte);
                if (this->tx_byte == '\n')
                    fflush(stdout);
                this->tx_bytes++;
            }
        } else {
            /* The stop bit (a framing error is not reported: the console is text). */
            this->tx_state = 0;
        }
    }
}

void Stm32::tx_edge(int64_t timestamp, int data)
{
    int64_t elapsed = timestamp - this->tx_last_ps;
    if (elapsed > 0 && this->tx_last_ps > 0) {
        int64_t n = (elapsed + this->bit_ps / 2) / this->bit_ps;
        this->tx_bits(this->tx_level, n);
    }
    this->tx_level = data;
    this->tx_last_ps = timestamp;
}

/* CRC-32 (zlib), as the Crazyflie's crc32CalculateBuffer. */
static uint32_t crc32(const uint8_t *p, size_t n)
{
    uint32_t r = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        r ^= p[i];
        for (int k = 0; k < 8; k++)
            r = (r & 1) ? (r >> 1) ^ 0xEDB88320u : r >> 1;
    }
    return r ^ 0xFFFFFFFFu;
}

/* The Crazyflie firmware's quatcompress (J. A. Preiss), float as in C. */
static uint32_t quatcompress(const float q[4])
{
    int largest = 0;
    for (int i = 1; i < 4; i++)
        if (fabsf(q[i]) > fabsf(q[largest]))
            largest = i;
    bool negate = q[largest] < 0.0f;
    uint32_t comp = (uint32_t) largest;
    const float sqrt1_2 = 0.70710678118654752440f;
    for (int i = 0; i < 4; i++) {
        if (i == largest)
            continue;
        uint32_t negbit = (uint32_t) ((q[i] < 0.0f) ^ negate);
        float m = 511.0f * (fabsf(q[i]) / sqrt1_2) + 0.5f;
        uint32_t mag = (uint32_t) m;
        if (mag > 511)
            mag = 511;
        comp = (comp << 10) | (negbit << 9) | mag;
    }
    return comp;
}

static int16_t mm(double v)
{
    double x = round(v * 1000.0);
    if (x < -32768.0)
        x = -32768.0;
    if (x > 32767.0)
        x = 32767.0;
    return (int16_t) x;
}

static void put16(uint8_t *b, int16_t v)
{
    b[0] = (uint8_t) (v & 0xFF);
    b[1] = (uint8_t) (((uint16_t) v) >> 8);
}

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t) (v >> (8 * i));
}

void Stm32::send_byte(uint8_t b)
{
    this->uart->rx_edge(0);
    this->wait_ps(this->bit_ps);
    for (int i = 0; i < 8; i++) {
        this->uart->rx_edge((b >> i) & 1);
        this->wait_ps(this->bit_ps);
    }
    this->uart->rx_edge(1);
    this->wait_ps(this->bit_ps);
    this->bytes++;
}

void Stm32::task()
{
    if (this->period_ps <= 0)
        return;
    int64_t next = this->period_ps;
    while (1) {
        int64_t t = this->now();
        if (t < next) {
            this->wait_ps(next - t);
            continue;
        }
        next += this->period_ps;
        uint32_t stm32_us = (uint32_t) (this->now() / 1000000);
        /* gapstream::flight::Circle::default() at stm32_us, written as the Rust is. */
        double ts = (double) stm32_us / 1e6;
        double r = 1.0, h = 1.0, period = 10.0;
        double w = 2.0 * M_PI / period;
        double th = w * ts;
        double yaw = th + M_PI / 2.0;
        float q[4] = {0.0f, 0.0f, (float) sin(yaw / 2.0), (float) cos(yaw / 2.0)};
        uint8_t m[40];
        memcpy(m, "!STA", 4);
        put32(m + 4, stm32_us);
        int16_t f[9] = {mm(r * cos(th)),         mm(r * sin(th)),         mm(h),
                        mm(-r * w * sin(th)),    mm(r * w * cos(th)),     0,
                        mm(-r * w * w * cos(th)), mm(-r * w * w * sin(th)), 0};
        for (int i = 0; i < 9; i++)
            put16(m + 8 + 2 * i, f[i]);
        put32(m + 26, quatcompress(q));
        put16(m + 30, 0);
        put16(m + 32, 0);
        put16(m + 34, mm(w));
        put32(m + 36, crc32(m, 36));
        for (int i = 0; i < 40; i++)
            this->send_byte(m[i]);
        this->messages++;
    }
}

extern "C" Dpi_model *dpi_model_new(js::config *config, void *handle)
{
    return new Stm32(config, handle);
}
