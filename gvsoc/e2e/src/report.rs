//! The run's verdict: the firmware's own figures (its `FW summary` line, in FC cycles), the
//! received frames matched byte for byte against the inputs, and the run's criteria.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// `key=value` fields of the last line starting with `prefix` (e.g. `"FW summary "`).
pub fn fields(log: &str, prefix: &str) -> Option<BTreeMap<String, String>> {
    let line = log.lines().rev().find(|l| l.starts_with(prefix))?;
    Some(
        line[prefix.len()..]
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// The firmware's summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FwSummary {
    pub frames: u64,
    pub period_cycles: u64,
    pub fps: f64,
    pub capture_cycles: u64,
    pub seal_cycles: u64,
    pub send_cycles: u64,
    pub sum_cycles: u64,
    pub ratio: f64,
    pub fc_hz: u64,
}

impl FwSummary {
    pub fn parse(log: &str) -> Option<Self> {
        let f = fields(log, "FW summary ")?;
        let u = |k: &str| f.get(k)?.parse::<u64>().ok();
        let x = |k: &str| f.get(k)?.parse::<f64>().ok();
        Some(FwSummary {
            frames: u("frames")?,
            period_cycles: u("period_cycles")?,
            fps: x("fps")?,
            capture_cycles: u("capture_cycles")?,
            seal_cycles: u("seal_cycles")?,
            send_cycles: u("send_cycles")?,
            sum_cycles: u("sum_cycles")?,
            ratio: x("ratio")?,
            fc_hz: u("fc_hz")?,
        })
    }
}

/// Which input frame each received frame is (byte for byte), `None` if it is none of them.
pub fn match_frames(inputs: &[Vec<u8>], received: &[Vec<u8>]) -> Vec<Option<usize>> {
    received
        .iter()
        .map(|r| inputs.iter().position(|i| i == r))
        .collect()
}

/// The SPI clocks the firmware set (its `FW spi` line: the driver's divider of the FC clock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpiClocks {
    pub up_hz: u64,
    pub down_hz: u64,
}

impl SpiClocks {
    pub fn parse(log: &str) -> Option<Self> {
        let f = fields(log, "FW spi ")?;
        Some(SpiClocks {
            up_hz: f.get("spi_up_hz")?.parse().ok()?,
            down_hz: f.get("spi_down_hz")?.parse().ok()?,
        })
    }
}

/// What the ESP32 stand-in measured on the bus (its `esp32-standin summary` line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandinSummary {
    /// Fastest SCLK seen.
    pub sclk_max_hz: u64,
    /// Fastest SCLK while MISO carried the ESP32's lengths or packets.
    pub miso_data_max_hz: u64,
    /// Bits of those the stand-in corrupted (clocked above the board's MISO limit).
    pub miso_corrupted_bits: u64,
    pub transactions: u64,
}

impl StandinSummary {
    pub fn parse(log: &str) -> Option<Self> {
        let f = fields(log, "esp32-standin summary ")?;
        let u = |k: &str| f.get(k)?.parse::<u64>().ok();
        Some(StandinSummary {
            sclk_max_hz: u("sclk_max_hz")?,
            miso_data_max_hz: u("miso_data_max_hz")?,
            miso_corrupted_bits: u("miso_corrupted_bits")?,
            transactions: u("transactions")?,
        })
    }
}

/// The criteria of the run (`None`: not checked).
#[derive(Clone, Copy, Debug, Default)]
pub struct Criteria {
    pub min_frames: usize,
    /// period / (capture + encrypt + send) at most.
    pub max_ratio: Option<f64>,
    /// Frames per second at least.
    pub min_fps: Option<f64>,
    /// period / send at most: the link is the only limit.
    pub max_period_over_send: Option<f64>,
    /// The upstream (MISO) SPI clock at most, the downstream one at least.
    pub max_up_hz: Option<u64>,
    pub min_down_hz: Option<u64>,
}

/// Everything the verdict looks at.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inputs<'a> {
    pub matches: &'a [Option<usize>],
    pub fw: Option<&'a FwSummary>,
    pub spi: Option<SpiClocks>,
    pub standin: Option<StandinSummary>,
    pub suite: &'a str,
}

/// The machine-readable line that ends a run.
pub fn summary_line(i: &Inputs) -> String {
    let exact = i.matches.iter().filter(|m| m.is_some()).count();
    let (fps, cap, seal, send, period) = i.fw.map_or((0.0, 0.0, 0.0, 0.0, 0.0), |f| {
        let ms = |c: u64| c as f64 * 1e3 / f.fc_hz.max(1) as f64;
        (
            f.fps,
            ms(f.capture_cycles),
            ms(f.seal_cycles),
            ms(f.send_cycles),
            ms(f.period_cycles),
        )
    });
    let spi = i.spi.unwrap_or_default();
    format!(
        "gvsoc-e2e summary fps={fps:.1} frames={} byte_exact={exact} capture_ms={cap:.1} seal_ms={seal:.1} send_ms={send:.1} period_ms={period:.1} spi_down_hz={} spi_up_hz={} suite={}",
        i.matches.len(),
        spi.down_hz,
        spi.up_hz,
        i.suite
    )
}

/// The verdict: the text to print and whether every criterion holds.
pub fn verdict(i: &Inputs, criteria: Criteria) -> (String, bool) {
    let matches = i.matches;
    let mut s = String::new();
    let mut ok = true;
    let mut fail = |s: &mut String, msg: String| {
        ok = false;
        let _ = writeln!(s, "gvsoc-e2e: FAIL: {msg}");
    };
    let exact = matches.iter().filter(|m| m.is_some()).count();
    let order: Vec<String> = matches
        .iter()
        .map(|m| m.map_or("?".to_string(), |i| i.to_string()))
        .collect();
    let _ = writeln!(
        s,
        "gvsoc-e2e: {} frames received and verified by the receiver, {} byte-exact with an input frame (input frames {})",
        matches.len(),
        exact,
        order.join(", ")
    );
    if let Some(st) = i.standin {
        let _ = writeln!(
            s,
            "gvsoc-e2e: ESP32 stand-in: fastest SCLK {:.3} MHz, MISO carrying its lengths/packets at up to {:.3} MHz, {} MISO bits corrupted, {} transactions",
            st.sclk_max_hz as f64 / 1e6,
            st.miso_data_max_hz as f64 / 1e6,
            st.miso_corrupted_bits,
            st.transactions
        );
        if st.miso_corrupted_bits > 0 {
            fail(
                &mut s,
                format!(
                    "the ESP32 stand-in corrupted {} MISO bits of its lengths and packets, clocked at up to {:.3} MHz: the AI-deck's board corrupts MISO above 7.2 MHz, so the GAP8 must read the ESP32 at the upstream clock (SPI_UP_HZ <= 7200000)",
                    st.miso_corrupted_bits,
                    st.miso_data_max_hz as f64 / 1e6
                ),
            );
        }
    }
    if exact < matches.len() {
        fail(
            &mut s,
            "a received frame differs from every input frame".into(),
        );
    }
    if matches.windows(2).any(|w| w[0].is_some() && w[0] == w[1]) {
        fail(
            &mut s,
            "the same input frame was received twice in a row (a stale buffer)".into(),
        );
    }
    if exact < criteria.min_frames {
        fail(
            &mut s,
            format!(
                "{exact} byte-exact frames, at least {} wanted",
                criteria.min_frames
            ),
        );
    }
    match i.spi {
        Some(c) => {
            let _ = writeln!(
                s,
                "gvsoc-e2e: SPI clocks set by the GAP8 driver: upstream (MISO read) {} Hz, downstream (transmit only) {} Hz",
                c.up_hz, c.down_hz
            );
            if let Some(max) = criteria.max_up_hz.filter(|&m| c.up_hz > m) {
                fail(
                    &mut s,
                    format!("upstream SPI clock {} Hz above {max} Hz", c.up_hz),
                );
            }
            if let Some(min) = criteria.min_down_hz.filter(|&m| c.down_hz < m) {
                fail(
                    &mut s,
                    format!("downstream SPI clock {} Hz below {min} Hz", c.down_hz),
                );
            }
        }
        None if criteria.max_up_hz.is_some() || criteria.min_down_hz.is_some() => {
            fail(&mut s, "the firmware printed no `FW spi` line".into());
        }
        None => {}
    }
    match i.fw {
        None => fail(&mut s, "the firmware printed no `FW summary` line".into()),
        Some(f) => {
            let ms = |c: u64| c as f64 * 1e3 / f.fc_hz.max(1) as f64;
            let _ = writeln!(
                s,
                "gvsoc-e2e: per frame, steady state over {} frames, FC at {:.0} MHz (simulated):",
                f.frames,
                f.fc_hz as f64 / 1e6
            );
            let _ = writeln!(s, "    stage                       cycles        ms");
            for (name, c) in [
                ("capture (CPI, uDMA)", f.capture_cycles),
                ("encrypt + tag (cluster+FC)", f.seal_cycles),
                ("SPI send to the ESP32", f.send_cycles),
                ("one after the other (sum)", f.sum_cycles),
                ("frame period", f.period_cycles),
            ] {
                let _ = writeln!(s, "    {name:<26} {c:>10} {:>9.2}", ms(c));
            }
            let over_send = f.period_cycles as f64 / f.send_cycles.max(1) as f64;
            let _ = writeln!(
                s,
                "gvsoc-e2e: {:.2} frames per simulated second; period / sum = {:.3}; period / send = {:.3}",
                f.fps, f.ratio, over_send
            );
            if let Some(max) = criteria.max_ratio {
                if !(f.ratio > 0.0 && f.ratio <= max) {
                    fail(
                        &mut s,
                        format!(
                            "period / sum of the stages {:.3} above {max:.2}: the stages do not overlap",
                            f.ratio
                        ),
                    );
                }
            }
            if let Some(min) = criteria.min_fps {
                if f.fps < min {
                    fail(
                        &mut s,
                        format!("{:.2} frames per second, at least {min} wanted", f.fps),
                    );
                }
            }
            if let Some(max) = criteria.max_period_over_send {
                if !(over_send > 0.0 && over_send <= max) {
                    fail(
                        &mut s,
                        format!(
                            "period / send {over_send:.3} above {max:.2}: something other than the link limits the frame rate"
                        ),
                    );
                }
            }
        }
    }
    let _ = writeln!(s, "gvsoc-e2e: {}", if ok { "ok" } else { "FAILED" });
    (s, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "FW start frames=8\nFW frame n=1 seq=0 capture_cycles=5\n\
        FW summary frames=8 period_cycles=3400000 fps=14.71 capture_cycles=3300000 seal_cycles=400000 send_cycles=3000000 sum_cycles=6700000 ratio=0.507 fc_hz=50000000\nFW exit status=0\n";

    #[test]
    fn parses_the_summary_line() {
        let f = FwSummary::parse(LOG).unwrap();
        assert_eq!(f.frames, 8);
        assert_eq!(f.sum_cycles, 6_700_000);
        assert!((f.ratio - 0.507).abs() < 1e-9);
        assert!(FwSummary::parse("FW summary frames=x").is_none());
        assert_eq!(fields(LOG, "FW exit ").unwrap()["status"], "0");
    }

    fn inputs<'a>(m: &'a [Option<usize>], f: Option<&'a FwSummary>) -> Inputs<'a> {
        Inputs {
            matches: m,
            fw: f,
            spi: Some(SpiClocks {
                up_hz: 7_058_823,
                down_hz: 30_000_000,
            }),
            standin: Some(StandinSummary::default()),
            suite: "chacha20poly1305",
        }
    }

    #[test]
    fn verdict_checks_every_criterion() {
        let f = FwSummary::parse(LOG).unwrap();
        let c = Criteria {
            min_frames: 5,
            max_ratio: Some(0.6),
            min_fps: Some(14.0),
            max_period_over_send: Some(1.2),
            max_up_hz: Some(7_200_000),
            min_down_hz: Some(20_000_000),
        };
        let good: Vec<Option<usize>> = (0..6).map(|i| Some(i * 4 % 11)).collect();
        assert!(verdict(&inputs(&good, Some(&f)), c).1);
        let mut bad = good.clone();
        bad[2] = None;
        assert!(
            !verdict(&inputs(&bad, Some(&f)), c).1,
            "a frame that matches no input"
        );
        assert!(
            !verdict(&inputs(&good[..4], Some(&f)), c).1,
            "too few frames"
        );
        let stale = vec![Some(1), Some(1), Some(2), Some(3), Some(4), Some(5)];
        assert!(!verdict(&inputs(&stale, Some(&f)), c).1, "a repeated frame");
        let slow = FwSummary { ratio: 0.9, ..f };
        assert!(!verdict(&inputs(&good, Some(&slow)), c).1, "no overlap");
        assert!(!verdict(&inputs(&good, None), c).1, "no summary");
        let few = FwSummary { fps: 10.0, ..f };
        assert!(!verdict(&inputs(&good, Some(&few)), c).1, "too slow");
        let sealed = FwSummary {
            send_cycles: 2_000_000,
            ..f
        };
        assert!(
            !verdict(&inputs(&good, Some(&sealed)), c).1,
            "the link is not the limit"
        );
        let mut i = inputs(&good, Some(&f));
        i.spi = Some(SpiClocks {
            up_hz: 9_615_384,
            down_hz: 9_615_384,
        });
        let (text, ok) = verdict(&i, c);
        assert!(!ok && text.contains("upstream SPI clock"), "{text}");
        let mut i = inputs(&good, Some(&f));
        i.standin = Some(StandinSummary {
            miso_corrupted_bits: 31,
            miso_data_max_hz: 9_615_384,
            ..StandinSummary::default()
        });
        let (text, ok) = verdict(&i, c);
        assert!(!ok && text.contains("corrupted 31 MISO bits"), "{text}");
    }

    #[test]
    fn the_summary_line_has_the_keys_in_order() {
        let f = FwSummary::parse(LOG).unwrap();
        let good: Vec<Option<usize>> = (0..6).map(|i| Some(i * 4 % 11)).collect();
        assert_eq!(
            summary_line(&inputs(&good, Some(&f))),
            "gvsoc-e2e summary fps=14.7 frames=6 byte_exact=6 capture_ms=66.0 seal_ms=8.0 send_ms=60.0 period_ms=68.0 spi_down_hz=30000000 spi_up_hz=7058823 suite=chacha20poly1305"
        );
        let log = "FW spi spi_up_hz=6944444 spi_down_hz=25000000 asked_up_hz=7200000 asked_down_hz=30000000 (x)\nesp32-standin summary sclk_max_hz=25000000 miso_data_max_hz=6944444 miso_corrupted_bits=0 transactions=99\n";
        assert_eq!(
            SpiClocks::parse(log),
            Some(SpiClocks {
                up_hz: 6_944_444,
                down_hz: 25_000_000
            })
        );
        assert_eq!(StandinSummary::parse(log).unwrap().transactions, 99);
    }

    #[test]
    fn matching_is_byte_exact() {
        let inputs = vec![vec![1u8, 2, 3], vec![4u8, 5, 6]];
        assert_eq!(
            match_frames(&inputs, &[vec![4, 5, 6], vec![1, 2, 4], vec![1, 2, 3]]),
            vec![Some(1), None, Some(0)]
        );
    }
}
