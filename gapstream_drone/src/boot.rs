//! The drone's boot counter: a persistent count advanced and stored at every start, before any
//! handshake. The protocol puts it into every ACCEPT (authenticated, so it is part of every
//! session key) and into the seed of the drone's ephemeral keys, and [`crate::rng::DrbgRng`] mixes
//! it into every random byte the drone draws: a drone whose randomness repeats after a restart (no
//! hardware RNG; always so on GVSOC) still never accepts what a receiver sent to an earlier boot
//! (a recorded KEY_ACK), so it never seals a frame twice under one key and nonce.
//!
//! [`Boot`] is the only way to hand the counter to [`crate::SecureConfig`], and it is made only by
//! [`Boot::advance`]: a drone that cannot store the next value does not stream.
//!
//! Backends:
//! - [`FlashBootCounter`]: two NOR-flash sectors used in turn (A/B), generic over [`BootFlash`];
//!   the firmware implements that with the GAP SDK's `pi_flash_*` API, the tests with
//!   [`RamFlash`], a model of NOR flash (erase sets bytes to `ff`, programming only clears bits)
//!   that can lose power after any byte;
//! - [`FileBootCounter`] (feature `std`): a decimal number in a file, replaced atomically;
//! - [`RamBootCounter`]: in memory, for tests and for a simulated drone that draws from the
//!   operating system's RNG (a process restart starts it over).

/// Why the boot counter could not be advanced. The drone must not stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootCounterError {
    /// The flash failed (opening it, or a read, erase or program the driver reported).
    Flash(FlashError),
    /// The new value did not read back as written (a failing flash, or a write the driver
    /// reported as done).
    Verify,
    /// The counter's file (host drones) could not be read, parsed or replaced.
    File,
    /// The counter is at `u32::MAX`.
    Exhausted,
}

impl core::fmt::Display for BootCounterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BootCounterError::Flash(e) => write!(
                f,
                "the boot counter could not be stored: {e} (the drone does not stream without it)"
            ),
            BootCounterError::Verify => f.write_str(
                "the boot counter could not be stored: it did not read back as written (the drone does not stream without it)",
            ),
            BootCounterError::File => f.write_str(
                "the boot counter could not be stored: its file could not be read or replaced (the drone does not stream without it)",
            ),
            BootCounterError::Exhausted => f.write_str("the boot counter is used up"),
        }
    }
}

impl From<FlashError> for BootCounterError {
    fn from(e: FlashError) -> Self {
        BootCounterError::Flash(e)
    }
}

/// A persistent, monotonic boot counter.
pub trait BootCounter {
    /// Stores the current value + 1 durably (read back) and returns it.
    fn advance(&mut self) -> Result<u32, BootCounterError>;
}

/// This boot's counter value, made only by [`Boot::advance`] (so holding one proves the value was
/// stored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Boot(u32);

impl Boot {
    /// Advances `counter` and returns this boot's value.
    pub fn advance<B: BootCounter + ?Sized>(counter: &mut B) -> Result<Boot, BootCounterError> {
        counter.advance().map(Boot)
    }
    pub fn value(self) -> u32 {
        self.0
    }
}

/// In memory: for tests and the host simulation (not persistent across processes).
#[derive(Clone, Debug, Default)]
pub struct RamBootCounter {
    stored: u32,
}

impl RamBootCounter {
    /// A counter whose stored value is `stored` (the next [`BootCounter::advance`] gives
    /// `stored + 1`).
    pub const fn new(stored: u32) -> Self {
        RamBootCounter { stored }
    }
}

impl BootCounter for RamBootCounter {
    fn advance(&mut self) -> Result<u32, BootCounterError> {
        self.stored = self
            .stored
            .checked_add(1)
            .ok_or(BootCounterError::Exhausted)?;
        Ok(self.stored)
    }
}

/// A flash operation failed (the firmware's C driver returns one code per case,
/// `firmware/src/bootflash.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlashError {
    /// The flash could not be opened.
    Open,
    /// The flash reports no geometry with room for the two sectors.
    Geometry,
    /// A sector, offset or length outside the two sectors, or one the bus cannot move.
    OutOfRange,
    /// The driver reported a failed read.
    Read,
    /// The driver reported a failed sector erase.
    Erase,
    /// The driver reported a failed program.
    Program,
}

impl core::fmt::Display for FlashError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FlashError::Open => "the flash could not be opened",
            FlashError::Geometry => "the flash has no room for the counter's two sectors",
            FlashError::OutOfRange => "an access outside the counter's two sectors",
            FlashError::Read => "a flash read failed",
            FlashError::Erase => "a flash sector erase failed",
            FlashError::Program => "a flash program failed",
        })
    }
}

/// Two erasable sectors of NOR flash (index 0 and 1), as [`FlashBootCounter`] uses them.
pub trait BootFlash {
    /// Reads `buf.len()` bytes at `offset` in `sector`.
    fn read(&mut self, sector: usize, offset: u32, buf: &mut [u8]) -> Result<(), FlashError>;
    /// Erases `sector` (every byte becomes `ff`).
    fn erase(&mut self, sector: usize) -> Result<(), FlashError>;
    /// Programs `data` at `offset` in `sector` (NOR: bits can only be cleared).
    fn program(&mut self, sector: usize, offset: u32, data: &[u8]) -> Result<(), FlashError>;
}

/// Marks a complete record; programmed after the value, so a record cut short by a power loss has
/// no marker.
pub const RECORD_MAGIC: [u8; 4] = *b"GSB1";
/// Bytes of a record: `le32(value) ‖ le32(!value) ‖ "GSB1"`.
pub const RECORD_LEN: usize = 12;

/// The counter in two flash sectors used in turn: the value is the larger of the two valid
/// records; advancing erases and rewrites the sector holding the smaller (or no) record, then reads
/// it back. A power loss at any moment destroys at most the older record, so the counter never
/// goes back (`power_loss_never_lowers_the_counter`).
#[derive(Debug)]
pub struct FlashBootCounter<F: BootFlash> {
    flash: F,
}

impl<F: BootFlash> FlashBootCounter<F> {
    pub fn new(flash: F) -> Self {
        FlashBootCounter { flash }
    }
    pub fn into_inner(self) -> F {
        self.flash
    }

    fn record(&mut self, sector: usize) -> Result<Option<u32>, BootCounterError> {
        let mut r = [0u8; RECORD_LEN];
        self.flash.read(sector, 0, &mut r)?;
        let v = u32::from_le_bytes([r[0], r[1], r[2], r[3]]);
        let inv = u32::from_le_bytes([r[4], r[5], r[6], r[7]]);
        Ok((r[8..] == RECORD_MAGIC && v == !inv).then_some(v))
    }

    /// The stored value (0 on a flash that never held one).
    pub fn stored(&mut self) -> Result<u32, BootCounterError> {
        Ok(self.record(0)?.max(self.record(1)?).unwrap_or(0))
    }
}

impl<F: BootFlash> BootCounter for FlashBootCounter<F> {
    fn advance(&mut self) -> Result<u32, BootCounterError> {
        let (a, b) = (self.record(0)?, self.record(1)?);
        let next = a
            .max(b)
            .unwrap_or(0)
            .checked_add(1)
            .ok_or(BootCounterError::Exhausted)?;
        // Overwrite the older (or invalid) record; the newer one survives a power loss.
        let target = if a <= b { 0 } else { 1 };
        self.flash.erase(target)?;
        let mut value = [0u8; 8];
        value[..4].copy_from_slice(&next.to_le_bytes());
        value[4..].copy_from_slice(&(!next).to_le_bytes());
        self.flash.program(target, 0, &value)?;
        self.flash.program(target, 8, &RECORD_MAGIC)?;
        if self.record(target)? != Some(next) {
            return Err(BootCounterError::Verify);
        }
        Ok(next)
    }
}

/// A model of two NOR-flash sectors in RAM, for tests: erase sets `ff`, programming ANDs, and
/// after `power_budget` byte operations (erased or programmed bytes) every operation fails — the
/// power is gone, with the operation in progress cut short. `fail` makes one kind of operation
/// report a driver error (before touching anything), `lose_programs` makes programming report
/// success without changing a bit (a worn flash, or a driver that lies).
#[derive(Clone, Debug)]
pub struct RamFlash {
    pub sectors: [[u8; 64]; 2],
    /// Byte operations left before the power fails (`None`: never).
    pub power_budget: Option<usize>,
    /// Operations of this kind fail ([`FlashError::Read`], [`FlashError::Erase`] or
    /// [`FlashError::Program`]).
    pub fail: Option<FlashError>,
    pub lose_programs: bool,
}

impl Default for RamFlash {
    fn default() -> Self {
        RamFlash {
            sectors: [[0xff; 64]; 2],
            power_budget: None,
            fail: None,
            lose_programs: false,
        }
    }
}

impl RamFlash {
    fn spend(&mut self, op: FlashError) -> Result<(), FlashError> {
        match &mut self.power_budget {
            Some(0) => Err(op),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }
    fn check(&self, op: FlashError) -> Result<(), FlashError> {
        if self.fail == Some(op) {
            Err(op)
        } else {
            Ok(())
        }
    }
}

impl BootFlash for RamFlash {
    fn read(&mut self, sector: usize, offset: u32, buf: &mut [u8]) -> Result<(), FlashError> {
        self.check(FlashError::Read)?;
        if self.power_budget == Some(0) {
            return Err(FlashError::Read);
        }
        let s = self.sectors.get(sector).ok_or(FlashError::OutOfRange)?;
        let o = offset as usize;
        let src = o
            .checked_add(buf.len())
            .and_then(|end| s.get(o..end))
            .ok_or(FlashError::OutOfRange)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn erase(&mut self, sector: usize) -> Result<(), FlashError> {
        self.check(FlashError::Erase)?;
        if sector >= self.sectors.len() {
            return Err(FlashError::OutOfRange);
        }
        for i in 0..64 {
            self.spend(FlashError::Erase)?;
            self.sectors[sector][i] = 0xff;
        }
        Ok(())
    }
    fn program(&mut self, sector: usize, offset: u32, data: &[u8]) -> Result<(), FlashError> {
        self.check(FlashError::Program)?;
        let s = self.sectors.get(sector).ok_or(FlashError::OutOfRange)?;
        let o = offset as usize;
        if o.checked_add(data.len()).is_none_or(|end| end > s.len()) {
            return Err(FlashError::OutOfRange);
        }
        for (i, b) in data.iter().enumerate() {
            self.spend(FlashError::Program)?;
            if !self.lose_programs {
                self.sectors[sector][o + i] &= b;
            }
        }
        Ok(())
    }
}

/// The counter as a decimal number in a file (host drones), replaced atomically: written to a
/// temporary file beside it, synced, renamed over it. A missing file is 0.
#[cfg(any(feature = "std", test))]
#[derive(Clone, Debug)]
pub struct FileBootCounter {
    path: std::path::PathBuf,
}

#[cfg(any(feature = "std", test))]
impl FileBootCounter {
    pub fn new(path: impl Into<std::path::PathBuf>) -> Self {
        FileBootCounter { path: path.into() }
    }

    /// The stored value (0 when the file does not exist).
    pub fn stored(&self) -> Result<u32, BootCounterError> {
        match std::fs::read_to_string(&self.path) {
            Ok(s) => s.trim().parse().map_err(|_| BootCounterError::File),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(_) => Err(BootCounterError::File),
        }
    }
}

#[cfg(any(feature = "std", test))]
impl BootCounter for FileBootCounter {
    fn advance(&mut self) -> Result<u32, BootCounterError> {
        use std::io::Write;
        let next = self
            .stored()?
            .checked_add(1)
            .ok_or(BootCounterError::Exhausted)?;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            writeln!(f, "{next}")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        };
        write().map_err(|_| BootCounterError::File)?;
        if self.stored()? != next {
            return Err(BootCounterError::Verify);
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_counter_counts_and_refuses_to_wrap() {
        let mut c = RamBootCounter::new(u32::MAX - 2);
        assert_eq!(Boot::advance(&mut c).map(Boot::value), Ok(u32::MAX - 1));
        assert_eq!(c.advance(), Ok(u32::MAX));
        assert_eq!(c.advance(), Err(BootCounterError::Exhausted));
    }

    #[test]
    fn flash_counter_alternates_sectors_and_survives_reopening() {
        let mut c = FlashBootCounter::new(RamFlash::default());
        assert_eq!(c.stored(), Ok(0));
        for want in 1..=5 {
            assert_eq!(c.advance(), Ok(want));
        }
        let flash = c.into_inner();
        // Both sectors hold a record: the last two values.
        let mut c = FlashBootCounter::new(flash);
        assert_eq!((c.record(0), c.record(1)), (Ok(Some(5)), Ok(Some(4))));
        assert_eq!(c.advance(), Ok(6));
    }

    /// Power lost after any byte of an advance: the next boot's value is above every value an
    /// earlier advance returned (the counter never goes back), and it never returns a value it did
    /// not store.
    #[test]
    fn power_loss_never_lowers_the_counter() {
        let mut base = FlashBootCounter::new(RamFlash::default());
        for _ in 0..3 {
            base.advance().unwrap();
        }
        let base = base.into_inner();
        // One advance costs at most 64 erased + 12 programmed bytes.
        for budget in 0..80 {
            let mut f = base.clone();
            f.power_budget = Some(budget);
            let mut c = FlashBootCounter::new(f);
            let r = c.advance();
            let mut f = c.into_inner();
            f.power_budget = None;
            let mut c = FlashBootCounter::new(f);
            let next = c.advance().unwrap();
            match r {
                Ok(v) => assert_eq!((v, next), (4, 5), "budget {budget}"),
                Err(e) => {
                    assert!(
                        matches!(
                            e,
                            BootCounterError::Flash(
                                FlashError::Read | FlashError::Erase | FlashError::Program
                            )
                        ),
                        "budget {budget}: {e:?}"
                    );
                    assert!(next >= 4, "budget {budget}: counter went back to {next}");
                }
            }
        }
    }

    #[test]
    fn file_counter_counts_across_instances() {
        let dir = std::env::temp_dir().join(std::format!("gapstream-boot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("boot");
        let _ = std::fs::remove_file(&path);
        assert_eq!(FileBootCounter::new(&path).advance(), Ok(1));
        assert_eq!(FileBootCounter::new(&path).advance(), Ok(2));
        assert_eq!(FileBootCounter::new(&path).stored(), Ok(2));
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(
            FileBootCounter::new(&path).advance(),
            Err(BootCounterError::File)
        );
        let mut missing_dir = FileBootCounter::new(dir.join("no-such-dir").join("boot"));
        assert_eq!(missing_dir.advance(), Err(BootCounterError::File));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_flash_that_cannot_be_written_gives_no_boot() {
        let f = RamFlash {
            power_budget: Some(0),
            ..RamFlash::default()
        };
        assert_eq!(
            Boot::advance(&mut FlashBootCounter::new(f)),
            Err(BootCounterError::Flash(FlashError::Read))
        );
    }

    /// Every error the driver reports reaches the caller as what it was (no boot, a typed error
    /// naming the operation), and the stored value is never lowered by it: a later advance on a
    /// healthy flash continues above every value given out before.
    #[test]
    fn driver_errors_are_typed_and_lose_nothing() {
        let mut c = FlashBootCounter::new(RamFlash::default());
        assert_eq!((c.advance(), c.advance()), (Ok(1), Ok(2)));
        let healthy = c.into_inner();
        for op in [FlashError::Read, FlashError::Erase, FlashError::Program] {
            let mut f = healthy.clone();
            f.fail = Some(op);
            let mut c = FlashBootCounter::new(f);
            let e = Boot::advance(&mut c).unwrap_err();
            assert_eq!(e, BootCounterError::Flash(op));
            assert!(std::format!("{e}").contains("does not stream"), "{e}");
            let mut f = c.into_inner();
            f.fail = None;
            let mut c = FlashBootCounter::new(f);
            assert_eq!(c.advance(), Ok(3), "{op:?}");
        }
    }

    /// A flash that takes programs without changing a bit (worn, or a driver reporting a write it
    /// did not do) is caught by the read-back: no boot.
    #[test]
    fn a_write_that_does_not_read_back_gives_no_boot() {
        let mut c = FlashBootCounter::new(RamFlash::default());
        assert_eq!(c.advance(), Ok(1));
        let mut f = c.into_inner();
        f.lose_programs = true;
        let mut c = FlashBootCounter::new(f);
        assert_eq!(Boot::advance(&mut c), Err(BootCounterError::Verify));
        // The erased sector lost the older record only: the counter still reads 1, the next
        // healthy advance gives 2 (nothing given out twice).
        assert_eq!(c.stored(), Ok(1));
        let mut f = c.into_inner();
        f.lose_programs = false;
        assert_eq!(FlashBootCounter::new(f).advance(), Ok(2));
    }

    #[test]
    fn accesses_outside_the_sectors_are_refused() {
        let mut f = RamFlash::default();
        let mut buf = [0u8; 4];
        assert_eq!(f.read(2, 0, &mut buf), Err(FlashError::OutOfRange));
        assert_eq!(f.read(0, 62, &mut buf), Err(FlashError::OutOfRange));
        assert_eq!(f.read(0, u32::MAX, &mut buf), Err(FlashError::OutOfRange));
        assert_eq!(f.erase(2), Err(FlashError::OutOfRange));
        assert_eq!(f.program(1, 61, &buf), Err(FlashError::OutOfRange));
        assert_eq!(f.sectors, RamFlash::default().sectors, "nothing written");
    }
}
