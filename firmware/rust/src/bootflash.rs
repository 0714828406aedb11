//! The boot counter's flash on the AI-deck: [`gapstream_drone::boot::BootFlash`] over
//! `firmware/src/bootflash.c` (the GAP SDK's pmsis HyperFlash driver: `pi_flash_read`,
//! `pi_flash_erase_sector`, `pi_flash_program`; the last two sectors of the flash). The counter's
//! logic is `gapstream_drone::boot::FlashBootCounter`, tested on the host against a NOR model.

use gapstream_drone::boot::{BootFlash, FlashError};

unsafe extern "C" {
    fn fw_flash_open() -> i32;
    fn fw_flash_read(sector: u32, offset: u32, buf: *mut u8, len: u32) -> i32;
    fn fw_flash_erase(sector: u32) -> i32;
    fn fw_flash_program(sector: u32, offset: u32, buf: *const u8, len: u32) -> i32;
}

/// The two boot-counter sectors of the deck's HyperFlash.
#[derive(Debug)]
pub struct PmsisFlash(());

impl PmsisFlash {
    /// Opens the flash (the C side keeps the device open).
    pub fn open() -> Result<Self, FlashError> {
        // SAFETY: a plain driver call without arguments (bootflash.c).
        if unsafe { fw_flash_open() } != 0 {
            return Err(FlashError);
        }
        Ok(PmsisFlash(()))
    }
}

fn status(r: i32) -> Result<(), FlashError> {
    if r == 0 { Ok(()) } else { Err(FlashError) }
}

fn sector_u32(sector: usize) -> Result<u32, FlashError> {
    u32::try_from(sector).map_err(|_| FlashError)
}

impl BootFlash for PmsisFlash {
    fn read(&mut self, sector: usize, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
        let len = u32::try_from(buf.len()).map_err(|_| FlashError)?;
        // SAFETY: `buf` is valid for `len` bytes of writes; the C side checks sector, offset and
        // length against its bounds before touching it.
        status(unsafe { fw_flash_read(sector_u32(sector)?, offset, buf.as_mut_ptr(), len) })
    }
    fn erase(&mut self, sector: usize) -> Result<(), FlashError> {
        // SAFETY: a driver call on a sector index the C side checks.
        status(unsafe { fw_flash_erase(sector_u32(sector)?) })
    }
    fn program(&mut self, sector: usize, offset: u32, data: &[u8]) -> Result<(), FlashError> {
        let len = u32::try_from(data.len()).map_err(|_| FlashError)?;
        // SAFETY: `data` is valid for `len` bytes of reads; bounds are checked on the C side.
        status(unsafe { fw_flash_program(sector_u32(sector)?, offset, data.as_ptr(), len) })
    }
}
