//! The drone's entropy source: GAP8 has no hardware random number generator, so noisy
//! measurements are conditioned through SHA-256 into a pool, and [`PoolEntropy`] (the firmware's
//! `gapstream_drone::Entropy`) derives output from it. `gapstream_drone::rng::DrbgRng` then expands
//! 32 pool bytes per handshake message with ChaCha20.
//!
//! Inputs (see docs/hardware.md, "Entropy", for what each is worth):
//! - [`Source::DeviceSeed`]: 32 random bytes made on the host when the firmware is built with its
//!   pairing keys (`firmware/generated/`), different for every build; no entropy at run time, but
//!   two drones (or two builds) never share a pool;
//! - [`Source::PowerUpSram`]: L2 that nothing wrote since power-up (SRAM power-up state);
//! - [`Source::PixelNoise`]: the least significant bits of a sample of pixels of every captured
//!   frame (sensor read and shot noise);
//! - [`Source::Timing`]: FC-timer values at asynchronous events (capture completions, link
//!   interrupts, arrival of the receiver's messages), whose low bits carry clock jitter between
//!   the FLL-generated FC clock and the sensor / ESP32 / WiFi timing.
//!
//! Min-entropy is credited per source with deliberately low estimates, and only while a source
//! passes SP 800-90B's health tests (NIST SP 800-90B, "Recommendation for the Entropy Sources
//! Used for Random Bit Generation", 2018, 4.3-4.4): the repetition count test (a stuck camera or
//! memory gives long runs of one value) and the adaptive proportion test (one value too frequent
//! in a window of 512), with cut-offs from the entropy claimed per sample; the timing source is
//! tested on differences between timer values, so events at a fixed rate fail. The start-up test:
//! a source's credit is held back until 1024 of its samples passed. A source that fails once is
//! never credited again. Output is refused until 256 bits are credited. No health test can tell
//! a cleverly predictable source (a counter in the pixel LSBs) from noise: the tests catch
//! failures of the physical source, the low estimates are the margin.
//! On the GVSOC model every one of these sources is deterministic (memory starts as 0x57, the
//! camera reads PGM files, time is simulated): there the credit is a claim about hardware only,
//! and the handshakes of two runs of the same build draw the same numbers.

use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use gapstream_drone::{Entropy, EntropyError};

/// Where pool input comes from (mixed into the hash with its input so sources cannot collide).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Source {
    DeviceSeed = 1,
    PowerUpSram = 2,
    PixelNoise = 3,
    Timing = 4,
}

/// Credited min-entropy per input, in 1/64 bit (conservative, for hardware; see module docs).
const fn credit_64ths(source: Source, bytes: usize) -> u64 {
    match source {
        // Made on the host: keeps pools apart, credited nothing at run time.
        Source::DeviceSeed => 0,
        // SRAM power-up states are mostly fixed per cell; credit 1 bit per 64 bytes.
        Source::PowerUpSram => bytes as u64,
        // One LSB per sampled pixel is fed per byte of input here (8 pixels); credit 1/8 bit per
        // pixel, i.e. 1 bit per input byte.
        Source::PixelNoise => 64 * bytes as u64,
        // Low byte of a timer value at an asynchronous event: credit 1/4 bit per event.
        Source::Timing => 16,
    }
}

/// Bits to credit before any output.
pub const MIN_CREDIT_BITS: u64 = 256;

/// SP 800-90B repetition count test cut-off for a source claimed at >= 1/8 bit per sample with a
/// false-alarm probability of 2^-20: 1 + ceil(20 / (1/8)) = 161 identical samples in a row.
pub const REPETITION_CUTOFF: u32 = 161;

/// SP 800-90B (4.4.2) adaptive proportion test window for non-binary samples.
pub const APT_WINDOW: u32 = 512;

/// SP 800-90B (4.3) start-up test: samples of a source that must pass the health tests before
/// anything it gave is credited.
pub const STARTUP_SAMPLES: u64 = 1024;

/// The health tests' cut-offs for one source, from the min-entropy `H` claimed per health-tested
/// sample (one byte) and a false-alarm probability of 2^-20 (SP 800-90B 4.4):
/// repetition count `1 + ceil(20 / H)`, adaptive proportion `1 + CRITBINOM(512, 2^-H, 1 - 2^-20)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cutoffs {
    repetition: u32,
    proportion: u32,
}

/// Per source: the byte each health test sees and the `H` claimed for it.
/// - device seed, SRAM: raw bytes, H = 1/8 (RCT 161, APT 497);
/// - pixel noise: bytes of 8 packed LSBs, credited 1 bit, H = 1 (RCT 21, APT 311);
/// - timing: the low byte of the difference between consecutive timer values, credited 1/4 bit,
///   H = 1/4 (RCT 81, APT 468). Differences, not raw values: events at a fixed rate give a timer
///   whose low byte changes every time but is fully predictable; its differences are constant.
const fn cutoffs(source: Source) -> Cutoffs {
    match source {
        Source::DeviceSeed | Source::PowerUpSram => Cutoffs {
            repetition: REPETITION_CUTOFF,
            proportion: 497,
        },
        Source::PixelNoise => Cutoffs {
            repetition: 21,
            proportion: 311,
        },
        Source::Timing => Cutoffs {
            repetition: 81,
            proportion: 468,
        },
    }
}

/// Health of one source: SP 800-90B's repetition count and adaptive proportion tests over the
/// bytes it feeds, and its start-up count.
#[derive(Clone, Copy, Debug)]
struct Health {
    cut: Cutoffs,
    last: Option<u8>,
    run: u32,
    /// Adaptive proportion test: the window's first sample, its count, samples seen in the window.
    apt_first: u8,
    apt_count: u32,
    apt_seen: u32,
    /// Samples tested so far.
    samples: u64,
    failed: bool,
}

impl Health {
    const fn new(source: Source) -> Self {
        Health::with(cutoffs(source))
    }

    const fn with(cut: Cutoffs) -> Self {
        Health {
            cut,
            last: None,
            run: 0,
            apt_first: 0,
            apt_count: 0,
            apt_seen: 0,
            samples: 0,
            failed: false,
        }
    }

    /// Feeds raw bytes; returns false once the source is considered stuck (for good).
    fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            self.samples += 1;
            // Repetition count test.
            if self.last == Some(b) {
                self.run += 1;
                if self.run >= self.cut.repetition {
                    self.failed = true;
                }
            } else {
                self.last = Some(b);
                self.run = 1;
            }
            // Adaptive proportion test: count the window's first value over the window.
            if self.apt_seen == 0 {
                self.apt_first = b;
                self.apt_count = 1;
            } else if b == self.apt_first {
                self.apt_count += 1;
                if self.apt_count >= self.cut.proportion {
                    self.failed = true;
                }
            }
            self.apt_seen += 1;
            if self.apt_seen == APT_WINDOW {
                self.apt_seen = 0;
            }
        }
        !self.failed
    }

    /// The start-up tests are over: enough samples passed.
    fn started(&self) -> bool {
        !self.failed && self.samples >= STARTUP_SAMPLES
    }
}

/// Counters of the pool, for the firmware's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub credited_bits: u64,
    pub inputs: u64,
    pub outputs: u64,
    /// Sources found stuck (bit = `Source as u8`).
    pub stuck_sources: u8,
}

/// A SHA-256 pool: `state = SHA-256(state ‖ source ‖ len ‖ input)` on input,
/// `out_i = SHA-256(state ‖ "out" ‖ counter)` then `state = SHA-256(state ‖ "next")` on output
/// (forward secrecy: the state that produced an output is gone afterwards).
pub struct EntropyPool {
    state: [u8; 32],
    credit_64ths: u64,
    health: [Health; 5],
    /// Credit given per source, withdrawn when the source fails its health test.
    given: [u64; 5],
    /// Credit earned per source during its start-up test, given once the test is passed.
    pending: [u64; 5],
    /// The previous timer value (the timing source's health tests see differences).
    last_timer: Option<u32>,
    stats: PoolStats,
    counter: u64,
    /// Timer values collected since the last hash.
    timing: [u8; TIMING_BATCH * 4],
    timing_len: usize,
}

/// Timer values hashed together.
const TIMING_BATCH: usize = 16;

impl Default for EntropyPool {
    fn default() -> Self {
        Self::new()
    }
}

impl EntropyPool {
    pub fn new() -> Self {
        EntropyPool {
            state: [0; 32],
            credit_64ths: 0,
            health: [
                Health::new(Source::DeviceSeed),
                Health::new(Source::DeviceSeed),
                Health::new(Source::PowerUpSram),
                Health::new(Source::PixelNoise),
                Health::new(Source::Timing),
            ],
            given: [0; 5],
            pending: [0; 5],
            last_timer: None,
            stats: PoolStats::default(),
            counter: 0,
            timing: [0; TIMING_BATCH * 4],
            timing_len: 0,
        }
    }

    /// Mixes `input` in; credits it if its source is healthy.
    pub fn absorb(&mut self, source: Source, input: &[u8]) {
        let mut h = Sha256::new();
        h.update(self.state);
        h.update([source as u8]);
        h.update((input.len() as u64).to_le_bytes());
        h.update(input);
        let mut out: [u8; 32] = h.finalize().into();
        self.state.copy_from_slice(&out);
        out.zeroize();
        self.stats.inputs += 1;
        let healthy = self.health[source as usize].feed(input);
        self.credit(source, healthy, credit_64ths(source, input.len()));
    }

    /// Credits a healthy input once its source passed the start-up tests (until then the credit
    /// waits); a source that failed loses everything it was credited, and earns nothing again.
    fn credit(&mut self, source: Source, healthy: bool, amount: u64) {
        let i = source as usize;
        if healthy {
            self.pending[i] = self.pending[i].saturating_add(amount);
            if self.health[i].started() {
                self.given[i] = self.given[i].saturating_add(self.pending[i]);
                self.credit_64ths = self.credit_64ths.saturating_add(self.pending[i]);
                self.pending[i] = 0;
            }
        } else {
            self.credit_64ths = self.credit_64ths.saturating_sub(self.given[i]);
            self.given[i] = 0;
            self.pending[i] = 0;
            self.stats.stuck_sources |= 1 << source as u8;
        }
        self.stats.credited_bits = self.credit_64ths / 64;
    }

    /// Mixes in a timer value taken at an asynchronous event. Values are collected and hashed
    /// 16 at a time (one SHA-256 block): events come with every SPI packet, and a hash per event
    /// would cost the FC more than the packet. Output first mixes in what is collected.
    pub fn absorb_timing(&mut self, timer: u32) {
        let n = self.timing_len;
        self.timing[n * 4..n * 4 + 4].copy_from_slice(&timer.to_le_bytes());
        self.timing_len += 1;
        // Only the low byte is jitter; the health tests look at the low byte of the difference
        // from the previous value (a fixed event rate gives a constant one), the hash gets all
        // four bytes. The first value has no difference: mixed in, not credited.
        if let Some(last) = self.last_timer.replace(timer) {
            let delta = timer.wrapping_sub(last) as u8;
            let healthy = self.health[Source::Timing as usize].feed(&[delta]);
            self.credit(Source::Timing, healthy, credit_64ths(Source::Timing, 1));
        }
        if self.timing_len == TIMING_BATCH {
            self.flush_timing();
        }
    }

    fn flush_timing(&mut self) {
        if self.timing_len == 0 {
            return;
        }
        let mut h = Sha256::new();
        h.update(self.state);
        h.update([Source::Timing as u8]);
        h.update(&self.timing[..self.timing_len * 4]);
        let mut out: [u8; 32] = h.finalize().into();
        self.state.copy_from_slice(&out);
        out.zeroize();
        self.timing.zeroize();
        self.timing_len = 0;
        self.stats.inputs += 1;
    }

    /// Feeds the least significant bit of every `stride`-th pixel of a frame (packed 8 per byte).
    pub fn absorb_pixel_lsbs(&mut self, frame: &[u8], stride: usize) {
        let stride = stride.max(1);
        let mut packed = [0u8; 128];
        let mut n = 0usize;
        let mut bit = 0u32;
        for (i, p) in frame.iter().step_by(stride).enumerate() {
            packed[n] |= (p & 1) << (i % 8);
            bit += 1;
            if bit == 8 {
                bit = 0;
                n += 1;
                if n == packed.len() {
                    self.absorb(Source::PixelNoise, &packed);
                    packed = [0; 128];
                    n = 0;
                }
            }
        }
        let len = n + (bit > 0) as usize;
        if len > 0 {
            self.absorb(Source::PixelNoise, &packed[..len]);
        }
    }

    pub fn stats(&self) -> PoolStats {
        self.stats
    }

    /// Fills `dest`, or refuses while fewer than [`MIN_CREDIT_BITS`] are credited.
    pub fn fill(&mut self, dest: &mut [u8]) -> Result<(), EntropyError> {
        if self.credit_64ths / 64 < MIN_CREDIT_BITS {
            return Err(EntropyError);
        }
        self.flush_timing();
        for chunk in dest.chunks_mut(32) {
            let mut h = Sha256::new();
            h.update(self.state);
            h.update(b"out");
            h.update(self.counter.to_le_bytes());
            let mut out: [u8; 32] = h.finalize().into();
            chunk.copy_from_slice(&out[..chunk.len()]);
            out.zeroize();
            self.counter += 1;
        }
        let mut h = Sha256::new();
        h.update(self.state);
        h.update(b"next");
        let mut next: [u8; 32] = h.finalize().into();
        self.state.copy_from_slice(&next);
        next.zeroize();
        self.stats.outputs += 1;
        Ok(())
    }
}

impl Drop for EntropyPool {
    fn drop(&mut self) {
        self.state.zeroize();
        self.timing.zeroize();
    }
}

/// The pool shared by the camera (pixel noise, capture timing), the link (interrupt timing) and
/// the drone's `Entropy` (single-threaded firmware: `Rc<RefCell<..>>`).
pub type SharedPool = alloc::rc::Rc<core::cell::RefCell<EntropyPool>>;

/// `gapstream_drone::Entropy` over a [`SharedPool`].
pub struct PoolEntropy(pub SharedPool);

impl Entropy for PoolEntropy {
    fn fill(&mut self, dest: &mut [u8]) -> Result<(), EntropyError> {
        self.0.borrow_mut().fill(dest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn refuses_output_until_enough_is_credited() {
        let mut p = EntropyPool::new();
        let mut out = [0u8; 32];
        p.absorb(Source::DeviceSeed, &[7; 32]);
        assert_eq!(
            p.fill(&mut out),
            Err(EntropyError),
            "a device seed alone is not entropy"
        );
        // 1 bit per byte of packed LSBs, credited once the start-up tests saw 1024 bytes.
        p.absorb(Source::PixelNoise, &noisy(1, 1023));
        assert_eq!(p.fill(&mut out), Err(EntropyError));
        p.absorb(Source::PixelNoise, &noisy(2, 1));
        assert!(p.fill(&mut out).is_ok());
        assert_eq!(p.stats().credited_bits, 1024);
    }

    #[test]
    fn a_stuck_source_is_detected_and_not_credited() {
        let mut p = EntropyPool::new();
        // A black frame: every sampled LSB 0.
        p.absorb_pixel_lsbs(&vec![0u8; 324 * 244], 16);
        assert_eq!(p.stats().credited_bits, 0);
        assert_eq!(p.stats().stuck_sources, 1 << Source::PixelNoise as u8);
        // Once stuck, stays uncredited (a flapping source is not trusted again).
        p.absorb(Source::PixelNoise, &noisy(3, 1000));
        assert_eq!(p.stats().credited_bits, 0);
        let mut out = [0u8; 8];
        assert!(p.fill(&mut out).is_err());
    }

    #[test]
    fn outputs_differ_and_depend_on_every_input() {
        let feed = |extra: u8| {
            let mut p = EntropyPool::new();
            p.absorb(Source::PowerUpSram, &noisy(9, 2048));
            // Two frames: 2 x 618 bytes of packed LSBs pass the start-up tests.
            p.absorb_pixel_lsbs(&noisy(10, 324 * 244), 16);
            p.absorb_pixel_lsbs(&noisy(11, 324 * 244), 16);
            p.absorb_timing(0x1234_5600 | extra as u32);
            let mut a = [0u8; 48];
            let mut b = [0u8; 48];
            p.fill(&mut a).unwrap();
            p.fill(&mut b).unwrap();
            (a, b)
        };
        let (a, b) = feed(1);
        assert_ne!(a, b, "two outputs of one pool differ");
        assert_ne!(a[..32], a[32..], "blocks of one output differ");
        let (c, _) = feed(2);
        assert_ne!(a, c, "one timing bit changes the output");
        assert_eq!(feed(1).0, a, "deterministic for the same inputs");
    }

    #[test]
    fn pixel_lsbs_pack_the_stride_samples() {
        // Pixels 0, 16, 32, ... have LSBs 1,0,1,0..: packed bytes 0b0101_0101.
        let frame: Vec<u8> = (0..16 * 16).map(|i| ((i / 16) % 2 == 0) as u8).collect();
        let mut a = EntropyPool::new();
        a.absorb_pixel_lsbs(&frame, 16);
        let mut b = EntropyPool::new();
        b.absorb(Source::PixelNoise, &[0x55, 0x55]);
        let (mut x, mut y) = ([0u8; 32], [0u8; 32]);
        a.credit_64ths = 1 << 20;
        b.credit_64ths = 1 << 20;
        a.fill(&mut x).unwrap();
        b.fill(&mut y).unwrap();
        assert_eq!(x, y);
    }

    #[test]
    fn repetition_cutoff_matches_sp800_90b_formula() {
        // C = 1 + ceil(-log2(alpha) / H) with alpha = 2^-20, H = 1/8.
        assert_eq!(REPETITION_CUTOFF, 1 + 20 * 8);
        let mut h = Health::new(Source::PowerUpSram);
        assert!(h.feed(&[3; 160]));
        assert!(!h.feed(&[3]));
    }

    /// `1 + CRITBINOM(W, p, 1 - alpha)`: one more than the smallest k with P(X <= k) >= 1 - alpha,
    /// X ~ Binomial(W, p) (SP 800-90B 4.4.2), summed in log space.
    fn apt_cutoff(h: f64) -> u32 {
        let (w, p) = (APT_WINDOW as f64, (-h).exp2());
        let ln_fact = |n: u32| (1..=n).map(|i| (i as f64).ln()).sum::<f64>();
        let mut cdf = 0.0;
        for k in 0..=APT_WINDOW {
            let kf = k as f64;
            let ln = ln_fact(APT_WINDOW) - ln_fact(k) - ln_fact(APT_WINDOW - k)
                + kf * p.ln()
                + (w - kf) * (1.0 - p).ln();
            cdf += ln.exp();
            if cdf >= 1.0 - (-20f64).exp2() {
                return 1 + k;
            }
        }
        APT_WINDOW + 1
    }

    #[test]
    fn finding3_health_cutoffs_match_sp800_90b_formulas() {
        for (source, h) in [
            (Source::PowerUpSram, 0.125),
            (Source::PixelNoise, 1.0),
            (Source::Timing, 0.25),
        ] {
            let c = cutoffs(source);
            assert_eq!(c.repetition, 1 + (20.0 / h) as u32, "{source:?}");
            assert_eq!(c.proportion, apt_cutoff(h), "{source:?}");
        }
        // SP 800-90B Table 2 (W = 512): H = 1 -> 311, H = 0.5 -> 410, H = 4 -> 62.
        assert_eq!(
            (apt_cutoff(1.0), apt_cutoff(0.5), apt_cutoff(4.0)),
            (311, 410, 62)
        );
    }

    #[test]
    fn finding3_healthy_noise_passes_every_test() {
        let mut p = EntropyPool::new();
        for k in 0..50 {
            p.absorb(Source::PixelNoise, &noisy(100 + k, 1000));
        }
        let mut t = 0u32;
        for k in 0..5000u64 {
            t = t.wrapping_add(10_000 + noisy(k, 1)[0] as u32);
            p.absorb_timing(t);
        }
        assert_eq!(p.stats().stuck_sources, 0);
        assert_eq!(p.stats().credited_bits, 50_000 + 4999 / 4);
    }

    /// Pixels whose sampled LSBs are all 0 but for a few that change (a dark, mostly clipped
    /// scene): runs shorter than the repetition cut-off, yet 15 of 16 bytes the same. Credited
    /// in full before the adaptive proportion test; now the source is stuck, credited nothing.
    #[test]
    fn finding3_mostly_constant_pixel_lsbs_trip_the_adaptive_proportion_test() {
        let glitchy: Vec<u8> = noisy(5, 4096)
            .iter()
            .enumerate()
            .map(|(i, &r)| if i % 16 == 5 { r | 1 } else { 0 })
            .collect();
        let mut h = Health::new(Source::PixelNoise);
        // No run reaches the repetition cut-off (21): only the proportion test can see it.
        assert!(glitchy.split(|&b| b != 0).all(|run| run.len() < 21));
        assert!(!h.feed(&glitchy), "the adaptive proportion test trips");
        let mut p = EntropyPool::new();
        p.absorb(Source::PixelNoise, &glitchy);
        assert_eq!(p.stats().credited_bits, 0);
        assert_eq!(p.stats().stuck_sources, 1 << Source::PixelNoise as u8);
        assert!(p.fill(&mut [0u8; 32]).is_err());
    }

    /// A timer read at events that come at a fixed rate: its low byte differs every time (232 is
    /// added modulo 256), so a test of the raw values passes it, yet every value is predictable.
    /// The differences are constant: the repetition count test trips and nothing is credited.
    #[test]
    fn finding3_timer_at_a_fixed_rate_gets_no_credit() {
        let mut p = EntropyPool::new();
        for k in 0..4096u32 {
            p.absorb_timing(0x1000_0000 + k * 1000);
        }
        assert_eq!(p.stats().credited_bits, 0);
        assert_eq!(p.stats().stuck_sources, 1 << Source::Timing as u8);
        assert!(p.fill(&mut [0u8; 32]).is_err());
        // Two rates mixed unevenly (15 of 16 events 1000 cycles apart): no run of one difference
        // is long, but one difference dominates every window: the proportion test trips.
        let mut p = EntropyPool::new();
        let mut t = 0u32;
        for k in 0..4096u32 {
            t = t.wrapping_add(if k % 16 == 15 { 1300 } else { 1000 });
            p.absorb_timing(t);
        }
        assert_eq!(p.stats().credited_bits, 0);
        assert_eq!(p.stats().stuck_sources, 1 << Source::Timing as u8);
    }

    /// SP 800-90B's start-up test: nothing a source gives is credited before 1024 of its samples
    /// passed the health tests; a source failing during start-up is never credited.
    #[test]
    fn finding3_startup_test_withholds_credit_for_1024_samples() {
        let mut p = EntropyPool::new();
        p.absorb(Source::PixelNoise, &noisy(7, 1000));
        assert_eq!(p.stats().credited_bits, 0, "start-up not over");
        assert!(p.fill(&mut [0u8; 32]).is_err());
        p.absorb(Source::PixelNoise, &noisy(8, 24));
        assert_eq!(
            p.stats().credited_bits,
            1024,
            "start-up passed: all released"
        );
        // A source that is stuck during its start-up: its pending credit is dropped.
        let mut p = EntropyPool::new();
        p.absorb(Source::PixelNoise, &noisy(9, 900));
        p.absorb(Source::PixelNoise, &[0; 30]);
        p.absorb(Source::PixelNoise, &noisy(10, 900));
        assert_eq!(p.stats().credited_bits, 0);
        assert_eq!(p.stats().stuck_sources, 1 << Source::PixelNoise as u8);
    }
}
