/*
 * bootflash.h: byte access to the two HyperFlash sectors of the drone's boot counter (bootflash.c),
 * for firmware/rust/src/bootflash.rs. Every function returns 0 on success or one of the negative
 * codes below (firmware/rust/src/bootflash.rs maps them to gapstream_drone::boot::FlashError and
 * checks, in a host test, that both sides agree on the values).
 */
#ifndef GAPSTREAM_BOOTFLASH_H
#define GAPSTREAM_BOOTFLASH_H
#include <stdint.h>

/* A sector, offset or length outside the two sectors (or odd: HyperBus moves 16-bit words), or the
 * flash is not open. */
#define FW_FLASH_EBOUNDS -1
/* pi_flash_open failed. */
#define FW_FLASH_EOPEN -2
/* PI_FLASH_IOCTL_INFO failed, or the geometry leaves no room for the two sectors. */
#define FW_FLASH_EGEOMETRY -3
/* The driver reported a failed read / sector erase / program. */
#define FW_FLASH_EREAD -4
#define FW_FLASH_EERASE -5
#define FW_FLASH_EPROGRAM -6

/* Opens the HyperFlash and places the two sectors at its end. */
int fw_flash_open(void);
/* `len` <= 16 bytes at `offset` of sector 0 or 1. */
int fw_flash_read(uint32_t sector, uint32_t offset, uint8_t *buf, uint32_t len);
int fw_flash_erase(uint32_t sector);
/* Even address and length (HyperBus words). */
int fw_flash_program(uint32_t sector, uint32_t offset, const uint8_t *buf, uint32_t len);

#endif
