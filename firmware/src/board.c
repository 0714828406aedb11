/*
 * board.c: the AI-deck hardware behind board.h, on the GAP SDK's pmsis drivers (FreeRTOS port).
 * Pins and interfaces are the AI-deck's (gap_sdk rtos/pmsis/bsp/include/bsp/ai_deck.h): Himax on
 * CPI 0 / I2C 0, ESP32 (NINA-W102) on SPIM1 CS0, ESP32 ready line on GPIO 18 (pad A13), GAP8 ready
 * line on GPIO 3 (pad B1), the same lines Bitcraze's CPX firmware uses.
 */
#include "pmsis.h"
#include "bsp/bsp.h"
#include "bsp/camera/himax.h"
/* The SPIM driver's per-chip-select state (`struct spim_cs_data`: its `cfg` word is the uDMA
 * SPI_CMD_CFG that starts every transfer's command list). */
#include "pmsis/implem/drivers/udma/spi/spi_internal.h"
#include "board.h"
#include "pmsis/rtos/malloc/malloc_internal.h"

#define ESP_RTT_GPIO 18 /* ESP32 -> GAP8: the ESP32 has set up an SPI slave transaction */
#define ESP_RTT_PAD PI_PAD_32_A13_TIMER0_CH1
#define ESP_RTT_PAD_FUNC PI_PAD_32_A13_GPIO_A18_FUNC1
#define GAP_RTT_GPIO 3 /* GAP8 -> ESP32: the GAP8 has a packet to send */
#define GAP_RTT_PAD PI_PAD_15_B1_RF_PACTRL3
#define GAP_RTT_PAD_FUNC PI_PAD_15_B1_GPIO_A3_FUNC1
#define HIMAX_CPI_ID 0

/* ------------------------------------------------------------------------------------------------ */
/* time                                                                                             */

void fw_timer_start(void)
{
    /* FC timer 1, counting FC clock cycles from 0 to 0xFFFFFFFF (same settings as the SDK's
     * pi_perf cycle timer). FC timer 0 is FreeRTOS's tick. Nothing else may use timer 1 while the
     * application runs: pi_time_wait_us() does (the Himax driver calls it while opening), so this is
     * called after the camera is open, and the Rust clock checks that the counter never goes back. */
    timer_cfg_u cfg = {0};
    cfg.field.enable = 1;
    cfg.field.reset = 1;
    cfg.field.irq_en = 0;
    cfg.field.mode = 1;
    cfg.field.one_shot = 0;
    cfg.field.presc_en = 0;
    cfg.field.clk_source = 0;
    pi_timer_init(FC_TIMER_1, cfg, 0xFFFFFFFF);
}

uint32_t fw_timer_read(void)
{
    return pi_timer_value_read(FC_TIMER_1);
}

uint32_t fw_fc_hz(void)
{
    return pi_freq_get(PI_FREQ_DOMAIN_FC);
}

/* Defined by the GAP8 pmsis PMU driver (drivers/pmu/pmu.c); its prototype is commented out in the
 * pmsis API header. */
extern int pi_pmu_voltage_set(pi_pmu_domain_e domain, uint32_t voltage);

int fw_set_fc_hz(uint32_t hz)
{
    if (hz == 0)
        return 0;
    if (hz > 150000000 && pi_pmu_voltage_set(PI_PMU_DOMAIN_FC, 1200))
        return -1;
    return pi_freq_set(PI_FREQ_DOMAIN_FC, hz) ? -2 : 0;
}

int fw_set_cl_hz(uint32_t hz)
{
    if (hz == 0)
        return 0;
    return pi_freq_set(PI_FREQ_DOMAIN_CL, hz) ? -1 : 0;
}

uint32_t fw_cl_hz(void)
{
    return pi_freq_get(PI_FREQ_DOMAIN_CL);
}

/* ------------------------------------------------------------------------------------------------ */
/* camera                                                                                           */

static struct pi_device cam_dev;
static pi_task_t cam_task;
static volatile int cam_in_flight;
static volatile uint32_t cam_started, cam_done;

static void cam_done_cb(void *arg)
{
    (void) arg;
    cam_done = fw_timer_read();
}

int fw_cam_open(uint32_t frame_drop)
{
    struct pi_himax_conf conf;
    pi_himax_conf_init(&conf);
    conf.format = PI_CAMERA_QVGA;
    pi_open_from_conf(&cam_dev, &conf);
    if (pi_camera_open(&cam_dev))
        return -1;
    /* The CPI's frame drop (GAP8 CPI CFG_GLOB FRAMEDROP_EN / FRAMEDROP_VAL). */
    cpi_framedrop_val_set(HIMAX_CPI_ID, frame_drop);
    cpi_framedrop_en_set(HIMAX_CPI_ID, frame_drop != 0);
    pi_camera_control(&cam_dev, PI_CAMERA_CMD_START, 0);
    return 0;
}

int fw_cam_start(uint8_t *buf, uint32_t len)
{
    if (cam_in_flight)
        return -1;
    cam_in_flight = 1;
    cam_started = fw_timer_read();
    pi_task_callback(&cam_task, cam_done_cb, NULL);
    pi_camera_capture_async(&cam_dev, buf, len, &cam_task);
    return 0;
}

int fw_cam_wait(void)
{
    if (!cam_in_flight)
        return -1;
    pi_task_wait_on(&cam_task);
    cam_in_flight = 0;
    return 0;
}

uint32_t fw_cam_started_at(void)
{
    return cam_started;
}

uint32_t fw_cam_done_at(void)
{
    return cam_done;
}

/* ------------------------------------------------------------------------------------------------ */
/* UART from the STM32                                                                              */

/* The console's pi_uart (io=uart) opened uart0 for sending; a second open of the same UART shares
 * its driver state, and ENABLE_RX turns its receiver on. Two reads are always queued: when one
 * completes, the driver's interrupt starts the other at once (a byte takes 87 us at 115200 baud),
 * and the completed one's callback stamps its bytes, puts them in the ring and queues a read again.
 * Each read's length comes from the Rust side's planner (gapstream_uart_plan,
 * firmware/rust/src/uart.rs ReadPlanner): a whole message in a few reads, each message's last byte
 * the end of a read, so it is stamped by that read's callback as a one-byte read would be; the
 * bytes before it in the read are back-dated by a byte time each (uart::backdated_stamp). One read
 * per byte cost an interrupt and an event-kernel callback per byte (docs/hardware.md, "The link
 * task"); a 40-byte state message now costs three. */
#define UART_RING 512 /* 128 ms of the STM32's 100 Hz messages: more than a frame period */
/* ReadPlanner::MAX_READ (the longest message, 76 bytes; checked on the Rust side). */
#define UART_READ_MAX 76
static struct pi_device uart_dev;
/* Word-aligned buffers with room up to the next word: the uDMA writes whole words (on the GVSOC
 * model a one-byte read at an unaligned address put its byte in the word below and lost it). */
static PI_L2 uint32_t uart_rx_buf[2][(UART_READ_MAX + 3) / 4];
static uint32_t uart_rx_len[2];
static pi_task_t uart_rx_task[2];
static uint8_t uart_ring[UART_RING];
static uint32_t uart_stamp[UART_RING];
/* uart_claim: the end of what the callback is writing (set before it writes, so the reader can
 * tell a slot being overwritten); uart_head: the end of what it has written. */
static volatile uint32_t uart_head, uart_claim, uart_tail, uart_overruns, uart_reads;
static volatile uint32_t uart_overruns_first = UINT32_MAX;
static uint32_t uart_byte_cycles;

extern uint32_t gapstream_uart_plan(const uint8_t *done, uint32_t len, uint32_t in_flight);

static void uart_rx_cb(void *arg);

static void uart_rx_queue(int i, uint32_t len)
{
    uart_rx_len[i] = len;
    pi_task_callback(&uart_rx_task[i], uart_rx_cb, (void *) (uintptr_t) i);
    pi_uart_read_async(&uart_dev, (uint8_t *) uart_rx_buf[i], len, &uart_rx_task[i]);
}

/* The callback (the driver's event task) always writes: when the drone loop was away longer than
 * the ring holds (a handshake keeps the FC busy for ~0.7 s), the oldest bytes are overwritten, so
 * the loop finds the newest 512 (latest wins, as for the samples). The reader notices the lap. */
static void uart_rx_cb(void *arg)
{
    int i = (int) (uintptr_t) arg;
    uint32_t now = fw_timer_read();
    uint32_t n = uart_rx_len[i];
    const uint8_t *b = (const uint8_t *) uart_rx_buf[i];
    uint32_t h = uart_head;
    uart_claim = h + n;
    __asm__ volatile("" ::: "memory");
    for (uint32_t k = 0; k < n; k++) {
        uart_ring[(h + k) % UART_RING] = b[k];
        uart_stamp[(h + k) % UART_RING] = now - (n - 1 - k) * uart_byte_cycles;
    }
    __asm__ volatile("" ::: "memory");
    uart_head = h + n;
    uart_reads++;
    /* The other read is running: the planner picks the one after it. */
    uart_rx_queue(i, gapstream_uart_plan(b, n, uart_rx_len[1 - i]));
}

int fw_uart_rx_open(uint32_t baud)
{
    struct pi_uart_conf conf;
    pi_uart_conf_init(&conf);
    conf.uart_id = 0;
    conf.baudrate_bps = baud;
    conf.enable_rx = 1;
    conf.enable_tx = 1;
    pi_open_from_conf(&uart_dev, &conf);
    if (pi_uart_open(&uart_dev))
        return -1;
    /* 10 bits a byte (8N1), in FC timer cycles. */
    uart_byte_cycles = (uint32_t) ((uint64_t) fw_fc_hz() * 10 / baud);
    pi_uart_ioctl(&uart_dev, PI_UART_IOCTL_ENABLE_RX, NULL);
    /* ReadPlanner::FIRST_READ: one byte each until a header is seen. */
    for (int i = 0; i < 2; i++)
        uart_rx_queue(i, 1);
    return 0;
}

int fw_uart_rx_next(uint8_t *byte, uint32_t *stamp)
{
    for (;;) {
        uint32_t h = uart_head, c = uart_claim, t = uart_tail;
        if (c - t >= UART_RING) {
            /* Lapped: the bytes before the oldest one kept are gone (the slot the next byte goes
             * to counts as gone already). */
            uart_overruns += c - t - (UART_RING - 1);
            t = c - (UART_RING - 1);
        }
        if (t == h) {
            uart_tail = t;
            if (uart_overruns_first == UINT32_MAX)
                uart_overruns_first = uart_overruns;
            return 0;
        }
        __asm__ volatile("" ::: "memory");
        uint8_t b = uart_ring[t % UART_RING];
        uint32_t s = uart_stamp[t % UART_RING];
        __asm__ volatile("" ::: "memory");
        if (uart_claim - t >= UART_RING) {
            uart_tail = t; /* overwritten while read: take the oldest kept instead */
            continue;
        }
        *byte = b;
        *stamp = s;
        uart_tail = t + 1;
        return 1;
    }
}

uint32_t fw_uart_rx_take(uint8_t *bytes, uint32_t *stamps, uint32_t max)
{
    uint32_t n = 0;
    while (n < max && fw_uart_rx_next(&bytes[n], &stamps[n]))
        n++;
    return n;
}

uint32_t fw_uart_rx_overruns(void)
{
    return uart_overruns;
}

void fw_uart_rx_stats(uint32_t *received, uint32_t *reads, uint32_t *overruns_first_poll)
{
    *received = uart_head;
    *reads = uart_reads;
    *overruns_first_poll = uart_overruns_first == UINT32_MAX ? 0 : uart_overruns_first;
}

/* ------------------------------------------------------------------------------------------------ */
/* SPI link                                                                                         */

static struct pi_device spi_dev, gpio_dev;
static pi_gpio_callback_t esp_rtt_cb;
static SemaphoreHandle_t esp_rtt_sem, link_wake, link_freed, link_arrived;
static uint32_t spi_up_hz, spi_down_hz, spi_hz_now;

static TickType_t us_to_ticks(uint32_t us)
{
    TickType_t t = pdMS_TO_TICKS((us + 999) / 1000);
    return t ? t : 1;
}

static void esp_rtt_isr(void *arg)
{
    (void) arg;
    BaseType_t woken = pdFALSE;
    xSemaphoreGiveFromISR(esp_rtt_sem, &woken);
    xSemaphoreGiveFromISR(link_wake, &woken);
    portYIELD_FROM_ISR(woken);
}

/* The SPIM clock divider the GAP SDK's driver computes for `hz` (gap8 pmsis udma/spi,
 * spi_internal.c, __pi_spi_clk_div_get): div = ceil(f_periph / hz), rounded up to even, halved;
 * the SPIM divides the peripheral clock by 2 * div. */
static uint32_t spi_div(uint32_t hz)
{
    uint32_t periph = pi_freq_get(PI_FREQ_DOMAIN_PERIPH);
    if (hz == 0 || hz >= periph)
        return 0;
    uint32_t div = (periph + hz - 1) / hz;
    if (div & 1)
        div += 1;
    return div >> 1;
}

uint32_t fw_spi_actual_hz(uint32_t hz)
{
    uint32_t periph = pi_freq_get(PI_FREQ_DOMAIN_PERIPH);
    uint32_t div = spi_div(hz);
    return div ? periph / (2 * div) : periph;
}

/* Switches the SPI clock between two transfers (CS may be held). The GAP8 FreeRTOS driver's
 * pi_spi_ioctl is an empty stub (drivers/udma/spi/spi.c, "TODO"), so this does what its
 * frequency-change callback (__pi_spi_freq_cb) does: rewrite the chip select's SPI_CMD_CFG word,
 * which every following transfer sends first. Transfers are blocking, so none is in flight. */
static void spi_clock(uint32_t hz)
{
    if (hz == spi_hz_now)
        return;
    struct spim_cs_data *cs = (struct spim_cs_data *) spi_dev.data;
    uint32_t irq = __disable_irq();
    cs->max_baudrate = hz;
    cs->cfg = SPI_CMD_CFG(spi_div(hz), cs->phase, cs->polarity);
    __restore_irq(irq);
    spi_hz_now = hz;
}

int fw_link_open(uint32_t up_hz, uint32_t down_hz)
{
    /* A counting semaphore: every rising edge of the ESP32 ready line is one armed transaction. */
    esp_rtt_sem = xSemaphoreCreateCounting(16, 0);
    link_wake = xSemaphoreCreateBinary();
    link_freed = xSemaphoreCreateBinary();
    link_arrived = xSemaphoreCreateBinary();
    if (esp_rtt_sem == NULL || link_wake == NULL || link_freed == NULL || link_arrived == NULL)
        return -1;

    struct pi_gpio_conf gconf;
    pi_gpio_conf_init(&gconf);
    pi_open_from_conf(&gpio_dev, &gconf);
    if (pi_gpio_open(&gpio_dev))
        return -2;
    pi_pad_set_function(GAP_RTT_PAD, GAP_RTT_PAD_FUNC);
    pi_gpio_pin_configure(&gpio_dev, GAP_RTT_GPIO, PI_GPIO_OUTPUT);
    pi_gpio_pin_write(&gpio_dev, GAP_RTT_GPIO, 0);
    pi_pad_set_function(ESP_RTT_PAD, ESP_RTT_PAD_FUNC);
    pi_gpio_pin_configure(&gpio_dev, ESP_RTT_GPIO, PI_GPIO_INPUT);
    pi_gpio_pin_notif_configure(&gpio_dev, ESP_RTT_GPIO, PI_GPIO_NOTIF_RISE);
    pi_gpio_callback_init(&esp_rtt_cb, 1u << (ESP_RTT_GPIO & PI_GPIO_NUM_MASK), esp_rtt_isr, NULL);
    pi_gpio_callback_add(&gpio_dev, &esp_rtt_cb);
    /* An ESP32 that armed a transaction before the interrupt was set up raised its line already:
     * that edge was missed, so count the level once (as Bitcraze's com_task does at start). */
    if (fw_esp_rtt_level())
        xSemaphoreGive(esp_rtt_sem);

    spi_up_hz = up_hz;
    spi_down_hz = down_hz;
    struct pi_spi_conf sconf;
    pi_spi_conf_init(&sconf);
    sconf.wordsize = PI_SPI_WORDSIZE_8;
    sconf.big_endian = 1;
    sconf.max_baudrate = up_hz;
    sconf.polarity = 0;
    sconf.phase = 0;
    sconf.itf = 1;
    sconf.cs = 0;
    pi_open_from_conf(&spi_dev, &sconf);
    if (pi_spi_open(&spi_dev))
        return -3;
    spi_hz_now = up_hz;
    return 0;
}

int fw_spi_transfer(const uint8_t *tx, uint8_t *rx, uint32_t len, int keep_cs)
{
    if (len == 0)
        return -1;
    pi_spi_flags_e flags = PI_SPI_LINES_SINGLE | (keep_cs ? PI_SPI_CS_KEEP : PI_SPI_CS_AUTO);
    if (rx) {
        spi_clock(spi_up_hz);
        pi_spi_transfer(&spi_dev, (void *) tx, rx, len * 8, flags);
    } else {
        spi_clock(spi_down_hz);
        pi_spi_send(&spi_dev, (void *) tx, len * 8, flags);
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------ */
/* the link task                                                                                    */

struct link_task_arg {
    void (*entry)(void *);
    void *arg;
};
static struct link_task_arg link_task_arg;

static void link_task(void *p)
{
    struct link_task_arg *a = p;
    a->entry(a->arg);
    vTaskDelete(NULL);
}

int fw_link_task_start(void (*entry)(void *), void *arg, uint32_t stack_bytes)
{
    UBaseType_t prio = uxTaskPriorityGet(NULL);
    if (prio >= configMAX_PRIORITIES - 1) {
        prio = configMAX_PRIORITIES - 2;
        vTaskPrioritySet(NULL, prio);
    }
    link_task_arg.entry = entry;
    link_task_arg.arg = arg;
    BaseType_t r = xTaskCreate(link_task, "gapstream-link", stack_bytes / sizeof(StackType_t), &link_task_arg,
                               prio + 1, NULL);
    return r == pdPASS ? 0 : -1;
}

void fw_link_kick(void)
{
    xSemaphoreGive(link_wake);
}

void fw_link_idle(uint32_t timeout_us)
{
    xSemaphoreTake(link_wake, us_to_ticks(timeout_us));
}

void fw_link_freed(void)
{
    xSemaphoreGive(link_freed);
}

void fw_link_wait_freed(uint32_t timeout_us)
{
    xSemaphoreTake(link_freed, us_to_ticks(timeout_us));
}

void fw_link_arrived(void)
{
    xSemaphoreGive(link_arrived);
}

void fw_link_wait_arrived(uint32_t timeout_us)
{
    xSemaphoreTake(link_arrived, us_to_ticks(timeout_us));
}

void fw_gap_rtt_set(int level)
{
    pi_gpio_pin_write(&gpio_dev, GAP_RTT_GPIO, level ? 1 : 0);
}

int fw_esp_rtt_level(void)
{
    uint32_t v = 0;
    pi_gpio_pin_read(&gpio_dev, ESP_RTT_GPIO, &v);
    return v != 0;
}

int fw_esp_rtt_take(void)
{
    return xSemaphoreTake(esp_rtt_sem, 0) == pdTRUE;
}

int fw_esp_rtt_wait(uint32_t timeout_us)
{
    return xSemaphoreTake(esp_rtt_sem, us_to_ticks(timeout_us)) == pdTRUE;
}

/* ------------------------------------------------------------------------------------------------ */
/* noise                                                                                            */

extern char __heapl2ram_limit[];

size_t fw_noise_uninit(uint8_t *out, size_t len)
{
    /* The last 2 KiB of L2: heap that nothing has allocated yet when this is called at start-up,
     * and that neither the boot ROM (its buffers are at 0x1C078000) nor the loader touch. */
    const volatile uint8_t *src = (const volatile uint8_t *) (__heapl2ram_limit - 2048);
    if (len > 2048)
        len = 2048;
    for (size_t i = 0; i < len; i++)
        out[i] = src[i];
    return len;
}

/* ------------------------------------------------------------------------------------------------ */
/* fast stack                                                                                       */

#define STACK_PAINT 0xA5A5A5A5u
static uint32_t *fast_stack;
static uint32_t fast_size;

int fw_fast_stack_init(uint32_t size)
{
    size &= ~15u;
    if (size == 0)
        return -1;
    fast_stack = pi_fc_l1_malloc(size);
    if (fast_stack == NULL)
        return -1;
    fast_size = size;
    for (uint32_t i = 0; i < size / 4; i++)
        fast_stack[i] = STACK_PAINT;
    return 0;
}

/* Calls f(arg) with sp at `top` (16-byte aligned), then switches back. */
static void __attribute__((noinline)) call_on_stack(void (*f)(void *), void *arg, void *top)
{
    __asm__ volatile("mv t0, sp\n"
                     "mv sp, %[top]\n"
                     "addi sp, sp, -16\n"
                     "sw t0, 0(sp)\n"
                     "mv a0, %[arg]\n"
                     "jalr %[f]\n"
                     "lw t0, 0(sp)\n"
                     "mv sp, t0\n"
                     :
                     : [f] "r"(f), [arg] "r"(arg), [top] "r"(top)
                     : "ra", "t0", "t1", "t2", "t3", "t4", "t5", "t6", "a0", "a1", "a2", "a3", "a4",
                       "a5", "a6", "a7", "memory");
}

void fw_run_on_fast_stack(void (*f)(void *), void *arg)
{
    if (fast_stack)
        call_on_stack(f, arg, (uint8_t *) fast_stack + fast_size);
    else
        f(arg);
}

uint32_t fw_fast_stack_used(void)
{
    uint32_t untouched = 0;
    while (untouched < fast_size / 4 && fast_stack[untouched] == STACK_PAINT)
        untouched++;
    return fast_size - 4 * untouched;
}

uint32_t fw_fast_stack_size(void)
{
    return fast_size;
}

/* ------------------------------------------------------------------------------------------------ */
/* console / exit                                                                                   */

void fw_console_write(const char *s, size_t len)
{
    printf("%.*s", (int) len, s);
}

void fw_exit(int status)
{
    pmsis_exit(status);
}

/* ------------------------------------------------------------------------------------------------ */
/* heap                                                                                             */

void fw_heap_dump(void)
{
    pi_l2_malloc_dump();
}

/* pmsis' L2 allocator (rtos/freeRTOS/vendors/gwt/pmsis/rtos/malloc/l2_malloc.c): its free list. */
extern malloc_t __l2_malloc;
extern char __heapl2ram_size[];

uint32_t fw_l2_free(uint32_t *largest)
{
    uint32_t total = 0, big = 0;
    uint32_t irq = __disable_irq();
    for (malloc_chunk_t *c = __l2_malloc.first_free; c; c = c->next) {
        total += (uint32_t) c->size;
        if ((uint32_t) c->size > big)
            big = (uint32_t) c->size;
        if (c == c->next)
            break;
    }
    __restore_irq(irq);
    if (largest)
        *largest = big;
    return total;
}

uint32_t fw_l2_heap_size(void)
{
    return (uint32_t) __heapl2ram_size;
}
