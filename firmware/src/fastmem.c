/*
 * fastmem.c: word-wise memcpy / memset for the whole firmware. The GAP SDK's FreeRTOS libs provide
 * byte-by-byte versions (vendors/gwt/libs), and every copy in the firmware (SDK drivers and the Rust
 * part: CPX packets, frame buffers, protocol state) goes through them. The firmware links with
 * -Wl,--wrap=memcpy,--wrap=memset (Makefile), so every call lands here; the SDK's versions stay
 * linked but unused. Measured on the GVSOC model: the SPI send stage of a 324x244 frame went from
 * 87.5 ms to see docs/hardware.md (FC at 250 MHz).
 */
#include <stddef.h>
#include <stdint.h>

#define NO_PATTERNS __attribute__((optimize("no-tree-loop-distribute-patterns")))

NO_PATTERNS void *__wrap_memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    if ((((uintptr_t) d ^ (uintptr_t) s) & 3) == 0) {
        while (n && ((uintptr_t) d & 3)) {
            *d++ = *s++;
            n--;
        }
        uint32_t *dw = (uint32_t *) d;
        const uint32_t *sw = (const uint32_t *) s;
        while (n >= 16) {
            uint32_t a = sw[0], b = sw[1], c = sw[2], e = sw[3];
            dw[0] = a;
            dw[1] = b;
            dw[2] = c;
            dw[3] = e;
            dw += 4;
            sw += 4;
            n -= 16;
        }
        while (n >= 4) {
            *dw++ = *sw++;
            n -= 4;
        }
        d = (uint8_t *) dw;
        s = (const uint8_t *) sw;
    }
    while (n--)
        *d++ = *s++;
    return dst;
}

NO_PATTERNS void *__wrap_memset(void *dst, int c, size_t n)
{
    uint8_t *d = dst;
    uint8_t v = (uint8_t) c;
    while (n && ((uintptr_t) d & 3)) {
        *d++ = v;
        n--;
    }
    uint32_t w = v * 0x01010101u;
    uint32_t *dw = (uint32_t *) d;
    while (n >= 16) {
        dw[0] = w;
        dw[1] = w;
        dw[2] = w;
        dw[3] = w;
        dw += 4;
        n -= 16;
    }
    while (n >= 4) {
        *dw++ = w;
        n -= 4;
    }
    d = (uint8_t *) dw;
    while (n--)
        *d++ = v;
    return dst;
}
