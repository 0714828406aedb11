//! The boot counter's flash on the AI-deck: [`gapstream_drone::boot::BootFlash`] over
//! `firmware/src/bootflash.c` (the GAP SDK's pmsis HyperFlash driver: its `read`, `erase_sector`
//! and `program` entries, every status checked; the last two sectors of the flash). The counter's
//! logic is `gapstream_drone::boot::FlashBootCounter`, tested on the host against a NOR model.
//!
//! The C side returns 0 or one negative code per failure (`bootflash.h`); [`status`] turns them
//! into [`FlashError`]s (host-tested, against the header's values).

use gapstream_drone::boot::FlashError;

/// The codes of `firmware/src/bootflash.h`.
pub mod code {
    pub const EBOUNDS: i32 = -1;
    pub const EOPEN: i32 = -2;
    pub const EGEOMETRY: i32 = -3;
    pub const EREAD: i32 = -4;
    pub const EERASE: i32 = -5;
    pub const EPROGRAM: i32 = -6;
}

/// A C status as a result. A code the header does not define (none today) is taken as a failure
/// of the operation in progress, `op`.
pub fn status(r: i32, op: FlashError) -> Result<(), FlashError> {
    Err(match r {
        0 => return Ok(()),
        code::EBOUNDS => FlashError::OutOfRange,
        code::EOPEN => FlashError::Open,
        code::EGEOMETRY => FlashError::Geometry,
        code::EREAD => FlashError::Read,
        code::EERASE => FlashError::Erase,
        code::EPROGRAM => FlashError::Program,
        _ => op,
    })
}

#[cfg(all(feature = "pmsis", target_arch = "riscv32"))]
pub use board::PmsisFlash;

#[cfg(all(feature = "pmsis", target_arch = "riscv32"))]
mod board {
    use super::status;
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
            status(unsafe { fw_flash_open() }, FlashError::Open)?;
            Ok(PmsisFlash(()))
        }
    }

    fn u32_of(n: usize) -> Result<u32, FlashError> {
        u32::try_from(n).map_err(|_| FlashError::OutOfRange)
    }

    impl BootFlash for PmsisFlash {
        fn read(&mut self, sector: usize, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
            let (sector, len) = (u32_of(sector)?, u32_of(buf.len())?);
            // SAFETY: `buf` is valid for `len` bytes of writes; the C side checks sector, offset
            // and length against its bounds before touching it.
            let r = unsafe { fw_flash_read(sector, offset, buf.as_mut_ptr(), len) };
            status(r, FlashError::Read)
        }
        fn erase(&mut self, sector: usize) -> Result<(), FlashError> {
            let sector = u32_of(sector)?;
            // SAFETY: a driver call on a sector index the C side checks.
            status(unsafe { fw_flash_erase(sector) }, FlashError::Erase)
        }
        fn program(&mut self, sector: usize, offset: u32, data: &[u8]) -> Result<(), FlashError> {
            let (sector, len) = (u32_of(sector)?, u32_of(data.len())?);
            // SAFETY: `data` is valid for `len` bytes of reads; bounds are checked on the C side.
            let r = unsafe { fw_flash_program(sector, offset, data.as_ptr(), len) };
            status(r, FlashError::Program)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes here are the header's, and each maps to its own error.
    #[test]
    fn codes_match_bootflash_h() {
        let header = include_str!("../../src/bootflash.h");
        let value = |name: &str| -> i32 {
            let line = header
                .lines()
                .find(|l| l.starts_with(&std::format!("#define {name} ")))
                .unwrap_or_else(|| panic!("{name} not in bootflash.h"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let all = [
            ("FW_FLASH_EBOUNDS", code::EBOUNDS, FlashError::OutOfRange),
            ("FW_FLASH_EOPEN", code::EOPEN, FlashError::Open),
            ("FW_FLASH_EGEOMETRY", code::EGEOMETRY, FlashError::Geometry),
            ("FW_FLASH_EREAD", code::EREAD, FlashError::Read),
            ("FW_FLASH_EERASE", code::EERASE, FlashError::Erase),
            ("FW_FLASH_EPROGRAM", code::EPROGRAM, FlashError::Program),
        ];
        for (name, c, e) in all {
            assert_eq!(value(name), c, "{name}");
            // Whatever operation was in progress, a defined code says what failed.
            assert_eq!(status(c, FlashError::Read), Err(e), "{name}");
        }
        assert_eq!(
            header.matches("#define FW_FLASH_E").count(),
            all.len(),
            "a code of bootflash.h is not mapped"
        );
        assert_eq!(status(0, FlashError::Erase), Ok(()));
        assert_eq!(status(-99, FlashError::Erase), Err(FlashError::Erase));
    }
}
