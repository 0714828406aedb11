/*
 * board.h: the AI-deck's hardware as the firmware's Rust part sees it (firmware/rust/src/ffi.rs
 * declares the same functions). Thin wrappers over the GAP SDK's pmsis drivers: the Himax HM01B0 on
 * CPI 0 / I2C 0, the SPI link to the ESP32 (NINA-W102) on SPIM1 CS0 with its two ready-to-talk GPIO
 * lines, the FC timer and the console. Everything returns 0 on success, a negative value on error.
 */
#ifndef GAPSTREAM_BOARD_H
#define GAPSTREAM_BOARD_H

#include <stddef.h>
#include <stdint.h>

/* --- camera ------------------------------------------------------------------------------------ */
/* Opens the Himax (QVGA, 324 x 244 x 8 bit) and starts streaming. `frame_drop` > 0 makes the CPI
 * skip that many sensor frames between two delivered ones (0 on hardware; see docs/hardware.md). */
int fw_cam_open(uint32_t frame_drop);
/* Starts capturing one frame of `len` bytes into `buf` (L2) in the background (uDMA). */
int fw_cam_start(uint8_t *buf, uint32_t len);
/* Waits for the capture started last. Returns 0, or -1 if none is in flight. */
int fw_cam_wait(void);
/* FC timer value (fw_timer_read) when the last capture was started / completed. */
uint32_t fw_cam_started_at(void);
uint32_t fw_cam_done_at(void);

/* --- SPI link to the ESP32 ------------------------------------------------------------------------ */
/* Opens SPIM1 CS0 (mode 0, 8-bit words, MSB first) and the two handshake lines: GAP8 -> ESP32
 * "GAP8 ready to talk" (GPIO 3, output) and ESP32 -> GAP8 "ESP32 ready" (GPIO 18, input, rising
 * edge counted by an interrupt). Transfers that read MISO run at `up_hz` (the AI-deck corrupts
 * MISO above 7.2 MHz), transmit-only ones at `down_hz` (up to 30 MHz). */
int fw_link_open(uint32_t up_hz, uint32_t down_hz);
/* The SPI clock the driver really sets when asked for `hz` (its divider of the peripheral clock). */
uint32_t fw_spi_actual_hz(uint32_t hz);
/* Transfer of `len` bytes (L2 buffers): full duplex at the upstream clock when `rx` is given,
 * transmit only (MISO not sampled) at the downstream clock when `rx` is NULL. `keep_cs` != 0
 * keeps CS asserted afterwards. */
int fw_spi_transfer(const uint8_t *tx, uint8_t *rx, uint32_t len, int keep_cs);
/* Drives the GAP8 ready-to-talk line. */
void fw_gap_rtt_set(int level);
/* Level of the ESP32 ready line. */
int fw_esp_rtt_level(void);
/* Takes one pending rising edge of the ESP32 ready line: 1 if there was one, else 0. */
int fw_esp_rtt_take(void);
/* Waits up to `timeout_us` for a rising edge of the ESP32 ready line and takes it: 1 if seen. */
int fw_esp_rtt_wait(uint32_t timeout_us);

/* --- UART from the Crazyflie's STM32 (its state messages) -------------------------------------- */
/* Opens the GAP8's UART (uart0, the deck's UART1 pins to the STM32) for receiving at `baud`, 8N1,
 * next to the console, which sends on the same UART; every received byte is put in a ring with the
 * FC timer value (fw_timer_read) of its arrival (reads sized by the Rust side's
 * gapstream_uart_plan; see board.c). 0 on success. */
int fw_uart_rx_open(uint32_t baud);
/* Takes the oldest received byte: 1 and *byte / *stamp set, or 0 when none is pending. */
int fw_uart_rx_next(uint8_t *byte, uint32_t *stamp);
/* Takes up to `max` of the oldest received bytes and their stamps; returns how many. */
uint32_t fw_uart_rx_take(uint8_t *bytes, uint32_t *stamps, uint32_t max);
/* Bytes lost because the ring was full (the drone loop did not read them in time). */
uint32_t fw_uart_rx_overruns(void);
/* Bytes received since the open, uDMA reads completed, and the overruns counted by the first
 * fw_uart_rx_next that found the ring empty (the drone loop's first read: what the start-up and
 * the handshake, which keep the loop away, cost). */
void fw_uart_rx_stats(uint32_t *received, uint32_t *reads, uint32_t *overruns_first_poll);

/* --- the link task ---------------------------------------------------------------------------- */
/* Starts `entry(arg)` as a FreeRTOS task one priority above the caller (lowering the caller by one
 * if it runs at the highest priority), with a stack of `stack_bytes`. */
int fw_link_task_start(void (*entry)(void *), void *arg, uint32_t stack_bytes);
/* Wake-ups between the drone loop and the link task (binary semaphores; waits are bounded). */
void fw_link_kick(void);                  /* a packet was queued */
void fw_link_idle(uint32_t timeout_us);   /* link task: until kicked or the ESP32 line rose */
void fw_link_freed(void);                 /* a ring slot was freed */
void fw_link_wait_freed(uint32_t timeout_us);
void fw_link_arrived(void);               /* bytes from the ESP32 for the drone loop */
void fw_link_wait_arrived(uint32_t timeout_us);

/* --- time ------------------------------------------------------------------------------------------ */
/* Free-running 32-bit counter at the FC clock (FC timer 1), started by fw_timer_start(). */
void fw_timer_start(void);
uint32_t fw_timer_read(void);
/* FC clock in Hz. */
uint32_t fw_fc_hz(void);
/* Sets the FC (and SoC / peripheral) clock, raising the core voltage to 1.2 V first when asked for
 * more than 150 MHz. 0 leaves it. Call before opening the SPI link (its divider depends on it). */
int fw_set_fc_hz(uint32_t hz);
/* Sets the cluster clock (cluster powered on). 0 leaves it. */
int fw_set_cl_hz(uint32_t hz);
uint32_t fw_cl_hz(void);

/* --- raw noise for the entropy pool (see docs/hardware.md, "Entropy") ----------------------------- */
/* Copies `len` bytes of memory that nothing has written since power-up (SRAM power-up state). */
size_t fw_noise_uninit(uint8_t *out, size_t len);

/* --- fast stack ----------------------------------------------------------------------------------- */
/* Allocates `size` bytes of FC TCDM as a stack for the per-frame work (0 on success). The FC reaches
 * its TCDM in one cycle and L2 (FreeRTOS task stacks) in several; compiled code spills to the stack,
 * so sealing a frame on it takes half the cycles (measured on GVSOC, docs/hardware.md). */
int fw_fast_stack_init(uint32_t size);
/* Runs f(arg) on the fast stack (or on the current one when there is none). */
void fw_run_on_fast_stack(void (*f)(void *), void *arg);
/* Bytes of the fast stack ever used (painted at init), 0 without one. */
uint32_t fw_fast_stack_used(void);
uint32_t fw_fast_stack_size(void);

/* --- console / exit ----------------------------------------------------------------------------- */
void fw_console_write(const char *s, size_t len);
void fw_exit(int status);

/* --- L2 heap ------------------------------------------------------------------------------------- */
/* Free bytes of pmsis' L2 heap (everything: FreeRTOS, drivers, Rust) and, if `largest` is not
 * NULL, the largest free block. */
uint32_t fw_l2_free(uint32_t *largest);
/* Bytes of the L2 heap as linked (`__heapl2ram_size`: L2 minus code, data and the SDK's areas). */
uint32_t fw_l2_heap_size(void);

#endif
