//! The drone's state record: where the drone was when a frame was exposed, carried in the frame's
//! associated data (`docs/protocol.md` §6), so a forged pose is refused like a forged pixel.
//!
//! The flight controller (the Crazyflie's STM32) sends its state estimate to the GAP8 over the
//! deck's UART about every 10 ms (`gapstream_drone::state`: NanoCockpit's `!STA` message); the drone keeps the latest
//! sample with its arrival time on the GAP8's clock and puts it, with the time the frame's exposure
//! ended, into the record of every frame. A sample older than the drone's bound at the end of the
//! exposure is sent flagged [`STALE`], not hidden; without any sample the record says so (no
//! [`VALID`]).
//!
//! Record version 1, 52 bytes, little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 1 | record version (1) |
//! | 1 | 1 | record length in bytes (52) |
//! | 2 | 2 | flags: bit 0 [`VALID`], bit 1 [`STALE`]; the others 0 |
//! | 4 | 4 | the sample's STM32 time, µs (as the flight controller sends it: wraps every 71.6 min) |
//! | 8 | 8 | the sample's arrival on the GAP8, µs of the drone's clock |
//! | 16 | 8 | the end of the frame's exposure, µs of the drone's clock |
//! | 24 | 6 | position x, y, z, mm (i16 each) |
//! | 30 | 6 | velocity x, y, z, mm/s |
//! | 36 | 6 | acceleration x, y, z, mm/s² |
//! | 42 | 4 | attitude quaternion, compressed ([`quat`]) |
//! | 46 | 6 | body rates roll, pitch, yaw, mrad/s |
//!
//! Bytes 24..52 are the STM32's message fields in its own order and units, copied as they came.

/// Record version this crate writes and reads.
pub const STATE_RECORD_VERSION: u8 = 1;
/// Bytes of a version-1 record.
pub const STATE_RECORD_LEN: usize = 52;
/// Flag: the drone held a sample from the flight controller when the exposure ended.
pub const VALID: u16 = 1 << 0;
/// Flag: that sample was older than the drone's bound at the end of the exposure.
pub const STALE: u16 = 1 << 1;
const KNOWN_FLAGS: u16 = VALID | STALE;

/// One state estimate of the flight controller, in the units it sends (the `!STA` message of
/// NanoCockpit's STM32 application: E. Cereda, A. Giusti, D. Palossi, "NanoCockpit", 2026).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StateSample {
    /// The flight controller's time of the estimate, µs (u32: wraps every 71.6 min).
    pub stm32_us: u32,
    /// Position in the flight controller's world frame, mm.
    pub position_mm: [i16; 3],
    /// Velocity in the world frame, mm/s.
    pub velocity_mm_s: [i16; 3],
    /// Acceleration, mm/s².
    pub accel_mm_s2: [i16; 3],
    /// Attitude quaternion, compressed ([`quat::compress`]).
    pub quat: u32,
    /// Body rates roll, pitch, yaw, mrad/s.
    pub rates_mrad_s: [i16; 3],
}

/// Bytes of a [`StateSample`]'s fields after the timestamp (position .. rates), as both the
/// STM32's message and the record lay them out.
pub const SAMPLE_FIELDS_LEN: usize = 28;

impl StateSample {
    /// Position .. rates in wire order (28 bytes).
    pub fn encode_fields(&self) -> [u8; SAMPLE_FIELDS_LEN] {
        let mut b = [0u8; SAMPLE_FIELDS_LEN];
        let mut at = 0;
        for v in self
            .position_mm
            .iter()
            .chain(&self.velocity_mm_s)
            .chain(&self.accel_mm_s2)
        {
            b[at..at + 2].copy_from_slice(&v.to_le_bytes());
            at += 2;
        }
        b[at..at + 4].copy_from_slice(&self.quat.to_le_bytes());
        at += 4;
        for v in &self.rates_mrad_s {
            b[at..at + 2].copy_from_slice(&v.to_le_bytes());
            at += 2;
        }
        b
    }

    /// The fields from their 28 wire bytes and the timestamp.
    pub fn decode_fields(stm32_us: u32, b: &[u8; SAMPLE_FIELDS_LEN]) -> Self {
        let i = |at: usize| i16::from_le_bytes([b[at], b[at + 1]]);
        StateSample {
            stm32_us,
            position_mm: [i(0), i(2), i(4)],
            velocity_mm_s: [i(6), i(8), i(10)],
            accel_mm_s2: [i(12), i(14), i(16)],
            quat: u32::from_le_bytes([b[18], b[19], b[20], b[21]]),
            rates_mrad_s: [i(22), i(24), i(26)],
        }
    }
}

/// The record of one frame (version 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StateRecord {
    /// [`VALID`], [`STALE`].
    pub flags: u16,
    /// When the sample arrived on the GAP8, µs of the drone's clock (0 without a sample).
    pub arrival_us: u64,
    /// When the frame's exposure ended, µs of the drone's clock.
    pub exposure_end_us: u64,
    /// The sample (all zero without one).
    pub sample: StateSample,
}

/// Why bytes are not a state record this crate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateError {
    /// Fewer bytes than the record needs.
    Truncated { needed: usize, have: usize },
    /// A record version this crate does not know (the frame still authenticated: it is the
    /// drone's own data, only newer).
    UnknownVersion(u8),
    /// The length byte disagrees with the version's length.
    BadLength { version: u8, len: u8 },
    /// A flag this version does not define is set.
    UnknownFlags(u16),
}

impl core::fmt::Display for StateError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            StateError::Truncated { needed, have } => {
                write!(f, "state record truncated: {have} of {needed} bytes")
            }
            StateError::UnknownVersion(v) => write!(f, "state record version {v} is not known"),
            StateError::BadLength { version, len } => {
                write!(f, "state record version {version} with length {len}")
            }
            StateError::UnknownFlags(x) => write!(f, "state record flags {x:#06x} not defined"),
        }
    }
}

impl core::error::Error for StateError {}

impl StateRecord {
    /// A record with `sample` taken at `arrival_us`, for a frame whose exposure ended at
    /// `exposure_end_us`; [`STALE`] when the sample is older than `max_age_us` then (or arrived
    /// after it: a clock that went backwards is not a fresh sample).
    pub fn new(sample: Option<(StateSample, u64)>, exposure_end_us: u64, max_age_us: u64) -> Self {
        match sample {
            None => StateRecord {
                flags: 0,
                arrival_us: 0,
                exposure_end_us,
                sample: StateSample::default(),
            },
            Some((sample, arrival_us)) => {
                let fresh = exposure_end_us
                    .checked_sub(arrival_us)
                    .is_some_and(|age| age <= max_age_us);
                StateRecord {
                    flags: VALID | if fresh { 0 } else { STALE },
                    arrival_us,
                    exposure_end_us,
                    sample,
                }
            }
        }
    }

    /// A sample was held when the exposure ended.
    pub fn is_valid(&self) -> bool {
        self.flags & VALID != 0
    }

    /// The sample was older than the drone's bound.
    pub fn is_stale(&self) -> bool {
        self.flags & STALE != 0
    }

    /// The sample's age at the end of the exposure, µs (None without a sample, or when it arrived
    /// after the exposure ended).
    pub fn age_us(&self) -> Option<u64> {
        if !self.is_valid() {
            return None;
        }
        self.exposure_end_us.checked_sub(self.arrival_us)
    }

    pub fn encode(&self) -> [u8; STATE_RECORD_LEN] {
        let mut b = [0u8; STATE_RECORD_LEN];
        b[0] = STATE_RECORD_VERSION;
        b[1] = STATE_RECORD_LEN as u8;
        b[2..4].copy_from_slice(&self.flags.to_le_bytes());
        b[4..8].copy_from_slice(&self.sample.stm32_us.to_le_bytes());
        b[8..16].copy_from_slice(&self.arrival_us.to_le_bytes());
        b[16..24].copy_from_slice(&self.exposure_end_us.to_le_bytes());
        b[24..].copy_from_slice(&self.sample.encode_fields());
        b
    }

    /// Parses exactly one record (`b` is the record's bytes, as long as its length byte says).
    pub fn decode(b: &[u8]) -> Result<Self, StateError> {
        if b.len() < 2 {
            return Err(StateError::Truncated {
                needed: 2,
                have: b.len(),
            });
        }
        if b[0] != STATE_RECORD_VERSION {
            return Err(StateError::UnknownVersion(b[0]));
        }
        if b[1] as usize != STATE_RECORD_LEN {
            return Err(StateError::BadLength {
                version: b[0],
                len: b[1],
            });
        }
        if b.len() != STATE_RECORD_LEN {
            return Err(StateError::Truncated {
                needed: STATE_RECORD_LEN,
                have: b.len(),
            });
        }
        let flags = u16::from_le_bytes([b[2], b[3]]);
        if flags & !KNOWN_FLAGS != 0 {
            return Err(StateError::UnknownFlags(flags));
        }
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let fields: &[u8; SAMPLE_FIELDS_LEN] = b[24..].try_into().unwrap();
        Ok(StateRecord {
            flags,
            arrival_us: u64_at(8),
            exposure_end_us: u64_at(16),
            sample: StateSample::decode_fields(
                u32::from_le_bytes(b[4..8].try_into().unwrap()),
                fields,
            ),
        })
    }
}

/// The "smallest three" quaternion compression of the Crazyflie firmware (`quatcompress.h`,
/// J. A. Preiss 2016, as NanoCockpit's STM32 application sends it): the index of the largest
/// component (2 bits), then for each other component in order x, y, z, w a sign bit and 9 bits of
/// magnitude in units of `(1/√2) / 511`; the largest is made positive (q and −q are the same
/// rotation) and recovered as `√(1 − Σ others²)`. Error ≤ 0.0014 per component. Decompression
/// needs a square root, so it lives with the receiver (`gapstream`).
pub mod quat {
    const SQRT1_2: f32 = core::f32::consts::FRAC_1_SQRT_2;

    /// Compresses a unit quaternion `[x, y, z, w]` (normalised by the caller).
    pub fn compress(q: [f32; 4]) -> u32 {
        let mut largest = 0;
        for i in 1..4 {
            if q[i].abs() > q[largest].abs() {
                largest = i;
            }
        }
        let negate = q[largest] < 0.0;
        let mut comp = largest as u32;
        for (i, v) in q.iter().enumerate() {
            if i == largest {
                continue;
            }
            let negbit = ((*v < 0.0) ^ negate) as u32;
            // As the C code: truncation of a value rounded by + 0.5 (magnitudes are ≥ 0).
            let mag = (511.0 * (v.abs() / SQRT1_2) + 0.5) as u32;
            comp = (comp << 10) | (negbit << 9) | mag.min(511);
        }
        comp
    }

    /// The three small components `(index of the largest, [others in order])` with their signs,
    /// as `f32`; the largest is `√(1 − Σ others²)`.
    pub fn small_three(comp: u32) -> (usize, [f32; 3]) {
        let largest = (comp >> 30) as usize;
        let mut out = [0f32; 3];
        let mut c = comp;
        for slot in (0..3).rev() {
            let mag = c & 511;
            let neg = (c >> 9) & 1 == 1;
            c >>= 10;
            let v = SQRT1_2 * (mag as f32) / 511.0;
            out[slot] = if neg { -v } else { v };
        }
        (largest, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_sample() -> impl Strategy<Value = StateSample> {
        (
            any::<u32>(),
            any::<[i16; 3]>(),
            any::<[i16; 3]>(),
            any::<[i16; 3]>(),
            any::<u32>(),
            any::<[i16; 3]>(),
        )
            .prop_map(|(stm32_us, p, v, a, quat, r)| StateSample {
                stm32_us,
                position_mm: p,
                velocity_mm_s: v,
                accel_mm_s2: a,
                quat,
                rates_mrad_s: r,
            })
    }

    proptest! {
        #[test]
        fn record_round_trip(sample in arb_sample(), flags in 0u16..4, a in any::<u64>(), e in any::<u64>()) {
            let r = StateRecord { flags, arrival_us: a, exposure_end_us: e, sample };
            let b = r.encode();
            prop_assert_eq!(b.len(), STATE_RECORD_LEN);
            prop_assert_eq!(StateRecord::decode(&b), Ok(r));
        }

        #[test]
        fn decode_is_total(b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Ok(r) = StateRecord::decode(&b) {
                prop_assert_eq!(&r.encode()[..], &b[..]);
            }
        }

        /// Compression as the reference (NanoCockpit's quatcompress.py, float32): the three
        /// small components come back within half a step, the index is the largest's.
        #[test]
        fn quat_compression_keeps_components(x in -1f32..1., y in -1f32..1., z in -1f32..1., w in -1f32..1.) {
            let n = (x * x + y * y + z * z + w * w).sqrt_approx();
            prop_assume!(n > 1e-3);
            let q = [x / n, y / n, z / n, w / n];
            let (largest, small) = quat::small_three(quat::compress(q));
            let mut l = 0;
            for i in 1..4 { if q[i].abs() > q[l].abs() { l = i; } }
            prop_assert_eq!(largest, l);
            let sign = if q[l] < 0.0 { -1.0 } else { 1.0 };
            let mut k = 0;
            for (i, qi) in q.iter().enumerate() {
                if i == l { continue; }
                prop_assert!((small[k] - sign * qi).abs() <= 0.5 * core::f32::consts::FRAC_1_SQRT_2 / 511.0 + 1e-6,
                    "component {} {} vs {}", i, small[k], sign * qi);
                k += 1;
            }
        }
    }

    trait SqrtApprox {
        fn sqrt_approx(self) -> Self;
    }
    impl SqrtApprox for f32 {
        fn sqrt_approx(self) -> f32 {
            // Newton from 1: enough for the tests' normalisation (f32 precision after 30 steps).
            let mut g = if self > 1.0 { self } else { 1.0 };
            for _ in 0..30 {
                g = 0.5 * (g + self / g);
            }
            g
        }
    }

    #[test]
    fn staleness_is_flagged_not_hidden() {
        let s = StateSample {
            stm32_us: 7,
            ..StateSample::default()
        };
        let fresh = StateRecord::new(Some((s, 1_000)), 9_000, 12_000);
        assert!(fresh.is_valid() && !fresh.is_stale());
        assert_eq!(fresh.age_us(), Some(8_000));
        let stale = StateRecord::new(Some((s, 1_000)), 20_000, 12_000);
        assert!(stale.is_valid() && stale.is_stale());
        assert_eq!(stale.sample, s, "a stale sample is still sent");
        assert_eq!(stale.age_us(), Some(19_000));
        let late = StateRecord::new(Some((s, 30_000)), 20_000, 12_000);
        assert!(late.is_stale() && late.age_us().is_none());
        let none = StateRecord::new(None, 20_000, 12_000);
        assert!(!none.is_valid() && none.age_us().is_none());
    }

    #[test]
    fn typed_errors() {
        let mut b = StateRecord::default().encode();
        assert_eq!(
            StateRecord::decode(&b[..1]),
            Err(StateError::Truncated { needed: 2, have: 1 })
        );
        assert_eq!(
            StateRecord::decode(&b[..51]),
            Err(StateError::Truncated {
                needed: 52,
                have: 51
            })
        );
        b[2] = 4;
        assert_eq!(StateRecord::decode(&b), Err(StateError::UnknownFlags(4)));
        b[2] = 0;
        b[1] = 50;
        assert_eq!(
            StateRecord::decode(&b),
            Err(StateError::BadLength {
                version: 1,
                len: 50
            })
        );
        b[0] = 2;
        assert_eq!(StateRecord::decode(&b), Err(StateError::UnknownVersion(2)));
    }

    /// Values the reference (NanoCockpit's quatcompress.py with numpy float32) gives.
    #[test]
    fn quat_known_values() {
        // Identity: w largest (index 3), the others 0.
        assert_eq!(quat::compress([0.0, 0.0, 0.0, 1.0]), 3 << 30);
        // -identity: negated so w is positive, the zeros get the sign bit (as the reference).
        assert_eq!(
            quat::compress([0.0, 0.0, 0.0, -1.0]),
            3 << 30 | 0x200 << 20 | 0x200 << 10 | 0x200
        );
        // 90° about z: z = w = √½, equal: the first largest (index 2) wins, as numpy's argmax.
        let h = core::f32::consts::FRAC_1_SQRT_2;
        let c = quat::compress([0.0, 0.0, h, h]);
        assert_eq!(c >> 30, 2);
        assert_eq!(c & 1023, 511, "w = +√½ in the last slot at full scale");
    }
}
