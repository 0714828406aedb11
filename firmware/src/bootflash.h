/*
 * bootflash.h: byte access to the two HyperFlash sectors of the drone's boot counter (bootflash.c),
 * for firmware/rust/src/bootflash.rs. Every function returns 0 on success, negative on error.
 */
#ifndef GAPSTREAM_BOOTFLASH_H
#define GAPSTREAM_BOOTFLASH_H
#include <stdint.h>

/* Opens the HyperFlash and places the two sectors at its end. */
int fw_flash_open(void);
/* `len` <= 16 bytes at `offset` of sector 0 or 1. */
int fw_flash_read(uint32_t sector, uint32_t offset, uint8_t *buf, uint32_t len);
int fw_flash_erase(uint32_t sector);
/* Even address and length (HyperBus words). */
int fw_flash_program(uint32_t sector, uint32_t offset, const uint8_t *buf, uint32_t len);

#endif
