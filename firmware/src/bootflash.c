/*
 * bootflash.c: the two HyperFlash sectors that hold the drone's boot counter, on the GAP SDK's
 * pmsis flash API (rtos/pmsis/bsp/include/bsp/flash.h, bsp/flash/hyperflash.h). The counter's
 * logic (A/B records, read-back) is Rust: gapstream_drone::boot::FlashBootCounter, tested on the
 * host against a NOR-flash model; this file only moves bytes.
 *
 * Placement: the last two sectors of the flash, far from the boot image and any file system at
 * the start (`flash_start` and beyond). The SDK's HyperFlash driver reports the sector size
 * (256 KiB) but not the flash size (its PI_FLASH_IOCTL_INFO fills sector_size and flash_start
 * only), so the size is the AI-deck's chip, a 512-Mbit S26KS512S (64 MiB), unless the build sets
 * FW_BOOTFLASH_SIZE. Transfers go through a static L2 buffer (uDMA).
 *
 * Errors: pmsis' pi_flash_read / pi_flash_program / pi_flash_erase_sector wrappers return void
 * and drop the driver's status, so this file calls the driver's synchronous entries
 * (pi_flash_api_t: read, program, erase_sector, which return int) and checks every status, as it
 * checks pi_flash_open's and pi_flash_ioctl's; each failure has its own code (bootflash.h). The
 * Rust side reads every record back after writing it, which also catches a write the driver
 * reported as done.
 */
#include <string.h>
#include "pmsis.h"
#include "bsp/flash/hyperflash.h"
#include "bootflash.h"

#define FW_BOOTFLASH_BUF 16
#ifndef FW_BOOTFLASH_SIZE
#define FW_BOOTFLASH_SIZE (64u << 20)
#endif

static struct pi_device bootflash_dev;
static struct pi_hyperflash_conf bootflash_conf;
static uint32_t bootflash_base;
static uint32_t bootflash_sector;
static int bootflash_opened;
/* Static data is in L2 on GAP8 (FreeRTOS port): a valid uDMA buffer. */
static uint8_t bootflash_buf[FW_BOOTFLASH_BUF];

int fw_flash_open(void)
{
    if (bootflash_opened)
        return 0;
    struct pi_flash_info info = {0};
    pi_hyperflash_conf_init(&bootflash_conf);
    pi_open_from_conf(&bootflash_dev, &bootflash_conf);
    if (pi_flash_open(&bootflash_dev) != 0)
        return FW_FLASH_EOPEN;
    const uint32_t size = FW_BOOTFLASH_SIZE;
    if (pi_flash_ioctl(&bootflash_dev, PI_FLASH_IOCTL_INFO, &info) != 0 || info.sector_size == 0 ||
        size / 4 < info.sector_size || info.flash_start > size - 2 * info.sector_size) {
        pi_flash_close(&bootflash_dev);
        return FW_FLASH_EGEOMETRY;
    }
    bootflash_sector = info.sector_size;
    bootflash_base = size - 2 * info.sector_size;
    bootflash_opened = 1;
    return 0;
}

static int bootflash_addr(uint32_t sector, uint32_t offset, uint32_t len, uint32_t *addr)
{
    if (!bootflash_opened || sector > 1 || len > FW_BOOTFLASH_BUF || offset > bootflash_sector ||
        len > bootflash_sector - offset)
        return FW_FLASH_EBOUNDS;
    *addr = bootflash_base + sector * bootflash_sector + offset;
    return 0;
}

static pi_flash_api_t *bootflash_api(void)
{
    return (pi_flash_api_t *) bootflash_dev.api;
}

int fw_flash_read(uint32_t sector, uint32_t offset, uint8_t *buf, uint32_t len)
{
    uint32_t addr;
    if (bootflash_addr(sector, offset, len, &addr))
        return FW_FLASH_EBOUNDS;
    if (bootflash_api()->read(&bootflash_dev, addr, bootflash_buf, len) != 0)
        return FW_FLASH_EREAD;
    memcpy(buf, bootflash_buf, len);
    return 0;
}

int fw_flash_erase(uint32_t sector)
{
    uint32_t addr;
    if (bootflash_addr(sector, 0, 0, &addr))
        return FW_FLASH_EBOUNDS;
    if (bootflash_api()->erase_sector(&bootflash_dev, addr) != 0)
        return FW_FLASH_EERASE;
    return 0;
}

int fw_flash_program(uint32_t sector, uint32_t offset, const uint8_t *buf, uint32_t len)
{
    uint32_t addr;
    /* HyperBus moves 16-bit words: even addresses and lengths only. */
    if (bootflash_addr(sector, offset, len, &addr) || (addr | len) & 1)
        return FW_FLASH_EBOUNDS;
    memcpy(bootflash_buf, buf, len);
    if (bootflash_api()->program(&bootflash_dev, addr, bootflash_buf, len) != 0)
        return FW_FLASH_EPROGRAM;
    return 0;
}
