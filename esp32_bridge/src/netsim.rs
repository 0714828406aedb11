//! What the host bridge puts between itself and its WiFi clients so that the simulation is no
//! kinder than an AI-deck (`docs/stream.md`, "The WiFi model and lossy UDP"):
//!
//! - [`Air`]: the ESP32's radio as one shared channel of a set rate. Every byte written to any
//!   client (TCP or UDP) takes its airtime before it leaves; with the host bridge's backpressure
//!   (the SPI side is served only while some client's queue is below
//!   [`WifiModel::queue_bytes`], [`crate::forward::Bridge::wifi_backlogged`]) the GAP8 waits, as
//!   it does when the ESP32 stops arming SPI transactions;
//! - [`Channel`]: the access point's channel that the decks of a swarm share (one medium): every
//!   byte of every bridge on it also takes its airtime at the channel's rate, so N decks together
//!   get no more than the channel carries, not N times a deck's rate;
//! - [`LossModel`]: seeded packet loss on the bridge's UDP output, independent or in bursts
//!   (the Gilbert–Elliott two-state model, E. N. Gilbert, "Capacity of a burst-noise channel",
//!   Bell System Technical Journal 1960; E. O. Elliott, 1963: a good state that loses nothing and
//!   a bad state that loses everything, mean burst length `B` = 1 / P(bad → good)).
//!
//! The arithmetic is [`Timeline`]'s, on a clock of plain nanoseconds: [`Air`] reads the clock from
//! [`Instant`], the tests drive it with a simulated one.

use std::sync::{Arc, Mutex};
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

/// The default rate of a swarm's shared channel, in Mbit/s: Espressif's in-air TCP figure for
/// one ESP32 (ESP-IDF "Wi-Fi performance and power save" guide: TCP 20, UDP 30), taken as all
/// that the medium gives the decks on it together.
pub const CHANNEL_MBPS: f64 = 20.0;

/// Longest burst on the air: a booking may start this long before the request (a sender whose
/// timer wakes a millisecond late loses no airtime; bytes leave in bursts of at most this long,
/// as WiFi aggregates frames).
pub const BURST_NS: f64 = 2e6;

/// Airtime booked on one transmitter or medium, on a clock of nanoseconds from any origin: one
/// transmission after the other at a set rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timeline {
    ns_per_byte: f64,
    free_at: f64,
}

impl Timeline {
    /// A timeline of `mbps` Mbit/s, free from time 0.
    pub fn new(mbps: f64) -> Self {
        Timeline {
            ns_per_byte: 8_000.0 / mbps.max(1e-3),
            free_at: f64::NEG_INFINITY,
        }
    }

    /// Books the airtime of `n` bytes asked for at `now`: after what is already booked, at the
    /// earliest [`BURST_NS`] before `now`. Returns the end of their airtime.
    pub fn book(&mut self, now: f64, n: usize) -> f64 {
        let start = self.free_at.max(now - BURST_NS);
        self.free_at = start + n as f64 * self.ns_per_byte;
        self.free_at
    }
}

/// The medium a swarm's decks share: the access point's channel. Each [`Air`] on it books every
/// byte on the deck's own timeline (its rate, the ESP32's path) and on the channel's; the bytes
/// leave when both are done. Alone on it, a deck keeps its own rate; together, the decks share
/// the channel's rate, taking turns in the order they ask (as WiFi's contention gives each
/// station its turn), and a deck with less to send leaves its share to the others.
#[derive(Debug)]
pub struct Channel {
    epoch: Instant,
    mbps: f64,
    timeline: Mutex<Timeline>,
}

impl Channel {
    pub fn new(mbps: f64) -> Arc<Channel> {
        Arc::new(Channel {
            epoch: Instant::now(),
            mbps,
            timeline: Mutex::new(Timeline::new(mbps)),
        })
    }

    /// The channel's rate in Mbit/s.
    pub fn mbps(&self) -> f64 {
        self.mbps
    }
}

/// The radio of one deck: its own rate, and the channel it shares, if any.
#[derive(Debug)]
pub struct Air {
    epoch: Instant,
    own: Mutex<Timeline>,
    channel: Option<Arc<Channel>>,
}

impl Air {
    /// A deck alone on its channel.
    pub fn new(mbps: f64) -> Self {
        Air {
            epoch: Instant::now(),
            own: Mutex::new(Timeline::new(mbps)),
            channel: None,
        }
    }

    /// A deck on `channel`, shared with the other decks on it.
    pub fn on_channel(mbps: f64, channel: Arc<Channel>) -> Self {
        Air {
            epoch: channel.epoch,
            own: Mutex::new(Timeline::new(mbps)),
            channel: Some(channel),
        }
    }

    /// Reserves the airtime of `n` bytes after what is already on the air; returns the instant
    /// to send them at: the end of their airtime less [`Air::BURST`], so that a timer that wakes
    /// a millisecond late costs no airtime (the long-run rate is exact; bytes leave in bursts of at
    /// most that long, as WiFi aggregates frames).
    pub fn reserve(&self, n: usize) -> Instant {
        let now = self.epoch.elapsed().as_nanos() as f64;
        let at = self.book(now, n) - BURST_NS;
        self.epoch + Duration::from_nanos(at.max(0.0) as u64)
    }

    /// [`Air::reserve`] on the clock of nanoseconds since the air (or its channel) was made:
    /// the end of the bytes' airtime on the deck's timeline and on the channel's.
    pub fn book(&self, now: f64, n: usize) -> f64 {
        let own = self
            .own
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .book(now, n);
        match &self.channel {
            Some(c) => own.max(
                c.timeline
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .book(now, n),
            ),
            None => own,
        }
    }

    /// Longest burst on the air.
    pub const BURST: Duration = Duration::from_nanos(BURST_NS as u64);
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

    /// Decks that send as fast as the model lets them, on a simulated clock: each asks for its
    /// next `chunk` bytes when the previous ones left (as the host bridge's writers do), from
    /// `ready[i]` on at most `demand[i]` Mbit/s (None: always something to send). Returns each
    /// deck's bytes sent in `secs` seconds.
    fn simulate(
        own_mbps: f64,
        channel_mbps: Option<f64>,
        demand: &[Option<f64>],
        chunk: usize,
        secs: f64,
    ) -> Vec<u64> {
        let end = secs * 1e9;
        let channel = channel_mbps.map(Channel::new);
        let airs: Vec<Air> = demand
            .iter()
            .map(|_| match &channel {
                Some(c) => Air::on_channel(own_mbps, c.clone()),
                None => Air::new(own_mbps),
            })
            .collect();
        // When each deck has its next chunk: at once, or once its demand brought it.
        let mut ready = vec![0.0f64; demand.len()];
        let next_ready = |i: usize, ready: &mut Vec<f64>| -> f64 {
            if let Some(mbps) = demand[i] {
                ready[i] += chunk as f64 * 8_000.0 / mbps;
            }
            ready[i]
        };
        let mut next: Vec<f64> = (0..demand.len())
            .map(|i| next_ready(i, &mut ready))
            .collect();
        let mut sent = vec![0u64; demand.len()];
        loop {
            // The deck whose request comes first (the lowest index on a tie).
            let (i, &t) = next
                .iter()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(b.1))
                .unwrap();
            if t >= end {
                return sent;
            }
            let leave = (airs[i].book(t, chunk) - BURST_NS).max(t);
            if leave < end {
                sent[i] += chunk as u64;
            }
            next[i] = leave.max(next_ready(i, &mut ready));
        }
    }

    fn mbps(bytes: u64, secs: f64) -> f64 {
        bytes as f64 * 8.0 / secs / 1e6
    }

    /// One deck alone keeps its own rate, with or without a faster channel; N decks on one
    /// channel share its rate (N × their own rate when it carries that much), each the same.
    #[test]
    fn decks_on_one_channel_share_its_rate() {
        let secs = 20.0;
        for (own, channel, n, each) in [
            (10.0, None, 1, 10.0),
            (10.0, Some(20.0), 1, 10.0),
            (10.0, Some(20.0), 2, 10.0),
            (10.0, Some(20.0), 4, 5.0),
            (10.0, Some(20.0), 8, 2.5),
            (10.0, Some(30.0), 3, 10.0),
            (10.0, Some(30.0), 6, 5.0),
            (10.0, None, 8, 10.0),
        ] {
            for chunk in [1460, 1030] {
                let got = simulate(own, channel, &vec![None; n], chunk, secs);
                let rates: Vec<f64> = got.iter().map(|&b| mbps(b, secs)).collect();
                for r in &rates {
                    assert!(
                        (r - each).abs() < 0.01 * each,
                        "own {own}, channel {channel:?}, {n} decks, chunk {chunk}: {rates:?}"
                    );
                }
                if let Some(c) = channel {
                    let sum: f64 = rates.iter().sum();
                    assert!(sum <= c * 1.001, "{sum} > {c}");
                }
            }
        }
    }

    /// A deck with less to send than its share leaves the rest of the channel to the others.
    #[test]
    fn a_quiet_deck_leaves_its_share_to_the_others() {
        let secs = 20.0;
        let got = simulate(10.0, Some(20.0), &[Some(2.0), None, None, None], 1460, secs);
        let rates: Vec<f64> = got.iter().map(|&b| mbps(b, secs)).collect();
        assert!((rates[0] - 2.0).abs() < 0.02, "{rates:?}");
        for r in &rates[1..] {
            assert!((r - 6.0).abs() < 0.06, "{rates:?}");
        }
    }

    /// Bytes booked on two airs of one channel add up on the channel, whatever the order.
    #[test]
    fn bookings_of_two_decks_add_up_on_their_channel() {
        let c = Channel::new(8.0); // 1 µs per byte
        let (a, b) = (
            Air::on_channel(8.0, c.clone()),
            Air::on_channel(8.0, c.clone()),
        );
        let mut last = 0.0;
        for k in 0..1000 {
            last = if k % 2 == 0 { &a } else { &b }.book(0.0, 1000);
        }
        // 1 MB at 1 MB/s from at most one burst before time 0.
        assert!((last - (1e9 - BURST_NS)).abs() < 1.0, "{last}");
        assert_eq!(c.mbps(), 8.0);
    }
}
