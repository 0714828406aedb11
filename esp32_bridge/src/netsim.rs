//! What the host bridge puts between itself and its WiFi clients so that the simulation is no
//! kinder than an AI-deck (`docs/stream.md`, "The WiFi model and lossy UDP"):
//!
//! - [`Air`]: the ESP32's radio as one shared channel of a set rate. Every byte written to any
//!   client (TCP or UDP) takes its airtime before it leaves; with the host bridge's backpressure
//!   (the SPI side is served only while some client's queue is below
//!   [`WifiModel::queue_bytes`], [`crate::forward::Bridge::wifi_backlogged`]) the GAP8 waits, as
//!   it does when the ESP32 stops arming SPI transactions;
//! - [`LossModel`]: seeded packet loss on the bridge's UDP output, independent or in bursts
//!   (the Gilbert–Elliott two-state model, E. N. Gilbert, "Capacity of a burst-noise channel",
//!   Bell System Technical Journal 1960; E. O. Elliott, 1963: a good state that loses nothing and
//!   a bad state that loses everything, mean burst length `B` = 1 / P(bad → good)).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The WiFi side's rate and queue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WifiModel {
    /// Application bytes per second on the air, all clients together, in Mbit/s.
    pub mbps: f64,
    /// The SPI side is not served while every client has this many bytes queued.
    pub queue_bytes: usize,
}

impl WifiModel {
    /// The AI-deck's measured rate (a 79,056-byte frame in 63 ms over the stock TCP path,
    /// crazyflie-firmware#1205: ~10 Mbit/s), with a queue of 32 KiB (ESP-IDF's default of 32
    /// WiFi transmit buffers of up to 1.6 KB holds about as much).
    pub const AI_DECK: WifiModel = WifiModel {
        mbps: 10.0,
        queue_bytes: 32 * 1024,
    };
}

/// The radio: one channel shared by every client.
#[derive(Debug)]
pub struct Air {
    ns_per_byte: f64,
    free_at: Mutex<Instant>,
}

impl Air {
    pub fn new(mbps: f64) -> Self {
        Air {
            ns_per_byte: 8_000.0 / mbps.max(1e-3),
            free_at: Mutex::new(Instant::now()),
        }
    }

    /// Reserves the airtime of `n` bytes after what is already on the air; returns the instant
    /// to send them at: the end of their airtime less [`Air::BURST`], so that a timer that wakes
    /// a millisecond late costs no airtime (the long-run rate is exact; bytes leave in bursts of at
    /// most that long, as WiFi aggregates frames).
    pub fn reserve(&self, n: usize) -> Instant {
        let mut f = self.free_at.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let start = (*f).max(now.checked_sub(Self::BURST).unwrap_or(now));
        *f = start + Duration::from_nanos((n as f64 * self.ns_per_byte) as u64);
        (*f).checked_sub(Self::BURST).unwrap_or(*f)
    }

    /// Longest burst on the air.
    pub const BURST: Duration = Duration::from_millis(2);
}

/// Loss on the bridge's UDP output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossModel {
    /// Long-run fraction of datagrams lost, in percent.
    pub percent: f64,
    /// Mean burst length in datagrams; at most 1: independent losses.
    pub burst: f64,
    pub seed: u64,
}

impl LossModel {
    /// `PERCENT` (independent) or `PERCENT:BURST` (Gilbert–Elliott, mean burst BURST datagrams),
    /// as `--udp-loss` takes it.
    pub fn parse(s: &str, seed: u64) -> Result<LossModel, String> {
        let (p, b) = match s.split_once(':') {
            Some((p, b)) => (p, Some(b)),
            None => (s, None),
        };
        let percent: f64 = p.trim().trim_end_matches('%').parse().map_err(|_| {
            format!("--udp-loss {s}: expected PERCENT or PERCENT:BURST, e.g. 5 or 10:4")
        })?;
        if !(0.0..100.0).contains(&percent) {
            return Err(format!("--udp-loss {s}: the loss must be 0 to below 100 %"));
        }
        let burst = match b {
            None => 1.0,
            Some(b) => {
                let v: f64 = b
                    .trim()
                    .parse()
                    .map_err(|_| format!("--udp-loss {s}: the burst length must be a number"))?;
                if !(1.0..=1000.0).contains(&v) {
                    return Err(format!(
                        "--udp-loss {s}: the mean burst length must be 1 to 1000"
                    ));
                }
                v
            }
        };
        // P(good -> bad) = p / (B (1 - p)) must be a probability.
        if burst > 1.0 && percent / 100.0 / (burst * (1.0 - percent / 100.0)) > 1.0 {
            return Err(format!(
                "--udp-loss {s}: no two-state chain has that loss and burst length"
            ));
        }
        Ok(LossModel {
            percent,
            burst,
            seed,
        })
    }

    /// A fresh channel of this model (one per client; `stream` varies the seed).
    pub fn channel(&self, stream: u64) -> LossChannel {
        let p = self.percent / 100.0;
        let (g2b, b2g) = if self.burst <= 1.0 {
            (p, 1.0 - p)
        } else {
            // Stationary P(bad) = g2b / (g2b + b2g) = p.
            let b2g = 1.0 / self.burst;
            (p * b2g / (1.0 - p), b2g)
        };
        LossChannel {
            iid: self.burst <= 1.0,
            p,
            g2b,
            b2g,
            bad: false,
            rng: self.seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03,
            lost: 0,
            passed: 0,
        }
    }
}

/// One client's lossy channel.
#[derive(Clone, Debug)]
pub struct LossChannel {
    iid: bool,
    p: f64,
    g2b: f64,
    b2g: f64,
    bad: bool,
    rng: u64,
    pub lost: u64,
    pub passed: u64,
}

impl LossChannel {
    /// splitmix64: a uniform number in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether the next datagram is lost.
    pub fn lose(&mut self) -> bool {
        let lost = if self.iid {
            self.uniform() < self.p
        } else {
            let u = self.uniform();
            self.bad = if self.bad {
                u >= self.b2g
            } else {
                u < self.g2b
            };
            self.bad
        };
        if lost {
            self.lost += 1;
        } else {
            self.passed += 1;
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The long-run loss and the mean burst length are what was asked for, and a seed replays.
    #[test]
    fn loss_rate_and_burst_length_are_as_asked_and_reproducible() {
        for (spec, want_p, want_burst) in [
            ("5", 0.05, 1.0 / 0.95),
            ("10:4", 0.10, 4.0),
            ("1", 0.01, 1.0 / 0.99),
        ] {
            let m = LossModel::parse(spec, 7).unwrap();
            let mut c = m.channel(1);
            let n = 400_000;
            let seq: Vec<bool> = (0..n).map(|_| c.lose()).collect();
            let lost = seq.iter().filter(|&&x| x).count() as f64;
            let bursts = seq.windows(2).filter(|w| !w[0] && w[1]).count() as f64;
            let p = lost / n as f64;
            assert!((p - want_p).abs() < 0.1 * want_p, "{spec}: loss {p}");
            let mean_burst = lost / bursts;
            assert!(
                (mean_burst - want_burst).abs() < 0.1 * want_burst,
                "{spec}: burst {mean_burst}"
            );
            let mut again = m.channel(1);
            assert!(seq.iter().take(1000).all(|&x| x == again.lose()));
        }
        assert!(LossModel::parse("100", 0).is_err());
        assert!(LossModel::parse("5:0.5", 0).is_err());
        assert!(LossModel::parse("x", 0).is_err());
        assert_eq!(LossModel::parse("5%", 0).unwrap().percent, 5.0);
    }

    #[test]
    fn airtime_adds_up_at_the_rate() {
        let air = Air::new(8.0); // 1 MB/s: 1 µs per byte
        let t0 = Instant::now();
        let mut end = t0;
        for _ in 0..1000 {
            end = air.reserve(1000);
        }
        let d = end.duration_since(t0).as_secs_f64() + Air::BURST.as_secs_f64();
        assert!((0.997..1.1).contains(&d), "{d}");
    }
}
