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
    /// Compress, then seal: the coding's mean FC cycles per frame (0, or absent, for raw frames).
    pub code_cycles: u64,
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
            code_cycles: u("code_cycles").unwrap_or(0),
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

/// The firmware's UART side of the drone's state (its last `FW state` line): bytes received, uDMA
/// reads, and bytes its ring lost, in all and by the drone loop's first read of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UartStats {
    pub received: u64,
    pub reads: u64,
    pub overruns: u64,
    pub overruns_before_stream: u64,
}

impl UartStats {
    pub fn parse(log: &str) -> Option<Self> {
        let f = fields(log, "FW state bytes=")?;
        let u = |k: &str| f.get(k)?.parse::<u64>().ok();
        Some(UartStats {
            received: u("received")?,
            reads: u("uart_reads")?,
            overruns: u("overruns")?,
            overruns_before_stream: u("overruns_before_stream")?,
        })
    }
}

/// What the ESP32 stand-in measured on the bus and its WiFi side (its `esp32-standin summary`
/// line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandinSummary {
    /// Fastest SCLK seen.
    pub sclk_max_hz: u64,
    /// Fastest SCLK while MISO carried the ESP32's lengths or packets.
    pub miso_data_max_hz: u64,
    /// Bits of those the stand-in corrupted (clocked above the board's MISO limit).
    pub miso_corrupted_bits: u64,
    pub transactions: u64,
    /// The WiFi rate it modelled, kbit/s of simulated time (0: none).
    pub wifi_kbps: u64,
    /// Most bytes it holds for WiFi before it stops arming SPI transactions.
    pub wifi_queue_bytes: u64,
    /// Bytes it put on the air, and the most it held for WiFi at once.
    pub wifi_bytes: u64,
    pub wifi_held_max: u64,
    /// Simulated time the GAP8 asked for a transaction while the WiFi side was full.
    pub wifi_stall_ns: u64,
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
            wifi_kbps: u("wifi_kbps").unwrap_or(0),
            wifi_queue_bytes: u("wifi_queue_bytes").unwrap_or(0),
            wifi_bytes: u("wifi_bytes").unwrap_or(0),
            wifi_held_max: u("wifi_held_max").unwrap_or(0),
            wifi_stall_ns: u("wifi_stall_ns").unwrap_or(0),
        })
    }
}

/// The WiFi side of the run: the rate the stand-in drained its queue at and the bytes each frame
/// took on the air (measured by the receiver over the steady state).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Wifi {
    /// Mbit/s of simulated time; 0: not limited.
    pub mbps: f64,
    /// Mean bytes received per frame, frame messages and what came between them.
    pub bytes_per_frame: Option<f64>,
}

impl Wifi {
    /// The most frames per second the WiFi carries (`None`: not limited, or unknown).
    pub fn budget_fps(&self) -> Option<f64> {
        let b = self.bytes_per_frame.filter(|b| *b > 0.0)?;
        (self.mbps > 0.0).then(|| self.mbps * 1e6 / (8.0 * b))
    }
}

/// The criteria of the run (`None`: not checked).
#[derive(Clone, Copy, Debug, Default)]
pub struct Criteria {
    pub min_frames: usize,
    /// period / (capture + encrypt + send) at most.
    pub max_ratio: Option<f64>,
    /// Frames per second at least; when the WiFi carries fewer, `wifi_share` of what it carries.
    pub min_fps: Option<f64>,
    /// The share of the WiFi's frame rate the stream must reach when the WiFi is the limit.
    pub wifi_share: f64,
    /// The GAP8's own rate at least: frames per second with the stand-in's WiFi stall taken out
    /// of the period (what the firmware and the SPI link sustain, whatever the WiFi).
    pub min_gap8_fps: Option<f64>,
    /// period / send at most: the link is the only limit.
    pub max_period_over_send: Option<f64>,
    /// The upstream (MISO) SPI clock at most, the downstream one at least.
    pub max_up_hz: Option<u64>,
    pub min_down_hz: Option<u64>,
    /// Every frame carries a valid state record whose sample was at most this old at the end of
    /// the frame's exposure, ms.
    pub max_state_age_ms: Option<f64>,
}

/// The boot-counter checks of a run on a flash kept from an earlier run (`make gvsoc-boot-twice`).
#[derive(Clone, Debug, Default)]
pub struct BootCheck {
    /// The boot counter this run must have.
    pub expect: Option<u32>,
    /// What the firmware printed (`FW boot counter N`) and what the receiver's authenticated
    /// ACCEPT carried.
    pub fw_boot: Option<u32>,
    pub rx_boot: Option<u32>,
    /// An earlier boot's HELLO and KEY_ACK were replayed first: how the drone answered the
    /// HELLO, and the firmware's `FW upstream refused` line (total refused, its reason).
    pub replay: Option<crate::receiver::ReplayOutcome>,
    pub fw_refused: u64,
    pub fw_refused_reason: Option<String>,
}

impl BootCheck {
    /// The firmware's boot counter and refusal lines.
    pub fn parse_fw(&mut self, log: &str) {
        self.fw_boot = log
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("FW boot counter ")?.trim().parse().ok());
        if let Some(line) = log
            .lines()
            .rev()
            .find(|l| l.starts_with("FW upstream refused "))
        {
            let f = fields(line, "FW upstream refused ").unwrap_or_default();
            self.fw_refused = f.get("total").and_then(|t| t.parse().ok()).unwrap_or(0);
            self.fw_refused_reason = line.split_once(" last: ").map(|(_, r)| r.to_string());
        }
    }
}

/// Everything the verdict looks at.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inputs<'a> {
    pub matches: &'a [Option<usize>],
    pub fw: Option<&'a FwSummary>,
    pub spi: Option<SpiClocks>,
    pub standin: Option<StandinSummary>,
    pub suite: &'a str,
    pub wifi: Wifi,
    pub boot: Option<&'a BootCheck>,
    /// Per received frame, its state record (None: the frame had none).
    pub states: &'a [Option<gapstream_protocol::state::StateRecord>],
    /// The firmware's UART counters (None: no state path, or a firmware that does not print them).
    pub uart: Option<UartStats>,
    pub codec: Codec<'a>,
}

/// What the frames were coded with before sealing, and what that gave.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Codec<'a> {
    /// `raw`, `jpeg`, `jpegls`.
    pub name: &'a str,
    /// The coder's quality (0 for raw frames).
    pub quality: u8,
    /// Mean sealed payload bytes per verified frame (the coded length; the frame size for raw).
    pub bytes_per_frame: Option<f64>,
    /// A raw frame's bytes: the compression ratio is this over `bytes_per_frame`.
    pub raw_bytes: usize,
}

/// The state ages of the frames that carry a valid record, µs (the sample's age at the end of the
/// exposure).
fn state_ages_us(states: &[Option<gapstream_protocol::state::StateRecord>]) -> Vec<u64> {
    states
        .iter()
        .filter_map(|r| r.as_ref().and_then(|r| r.age_us()))
        .collect()
}

/// The GAP8's own frame period in FC cycles: the period with the time the stand-in's full WiFi
/// queue held the GAP8 back taken out (spread over the steady state's frame intervals).
pub fn gap8_period_cycles(f: &FwSummary, standin: Option<StandinSummary>) -> u64 {
    let stall = standin.map_or(0, |s| s.wifi_stall_ns);
    let intervals = f.frames.saturating_sub(1).max(1);
    let stall_cycles = (stall as u128 * f.fc_hz as u128 / 1_000_000_000) as u64 / intervals;
    f.period_cycles.saturating_sub(stall_cycles)
}

/// The fields of the machine-readable line that ends a run, in order. New fields go at the end.
pub fn summary_fields(i: &Inputs) -> Vec<(&'static str, String)> {
    let exact = i.matches.iter().filter(|m| m.is_some()).count();
    let (fps, cap, seal, send, period, code) = i.fw.map_or((0.0, 0.0, 0.0, 0.0, 0.0, 0.0), |f| {
        let ms = |c: u64| c as f64 * 1e3 / f.fc_hz.max(1) as f64;
        (
            f.fps,
            ms(f.capture_cycles),
            ms(f.seal_cycles),
            ms(f.send_cycles),
            ms(f.period_cycles),
            ms(f.code_cycles),
        )
    });
    let spi = i.spi.unwrap_or_default();
    vec![
        ("fps", format!("{fps:.1}")),
        ("frames", i.matches.len().to_string()),
        ("byte_exact", exact.to_string()),
        ("capture_ms", format!("{cap:.1}")),
        ("seal_ms", format!("{seal:.1}")),
        ("send_ms", format!("{send:.1}")),
        ("period_ms", format!("{period:.1}")),
        ("spi_down_hz", spi.down_hz.to_string()),
        ("spi_up_hz", spi.up_hz.to_string()),
        ("suite", i.suite.to_string()),
        ("wifi_mbps", i.wifi.mbps.to_string()),
        (
            "state_age_max_ms",
            state_ages_us(i.states)
                .iter()
                .max()
                .map_or("none".to_string(), |m| format!("{:.2}", *m as f64 / 1e3)),
        ),
        (
            "codec",
            if i.codec.name.is_empty() {
                "raw"
            } else {
                i.codec.name
            }
            .to_string(),
        ),
        ("quality", i.codec.quality.to_string()),
        (
            "bytes_per_frame",
            format!("{:.0}", i.codec.bytes_per_frame.unwrap_or(0.0)),
        ),
        ("codec_ms", format!("{code:.2}")),
        (
            "ratio",
            match i.codec.bytes_per_frame {
                Some(b) if b > 0.0 && i.codec.raw_bytes > 0 => {
                    format!("{:.2}", i.codec.raw_bytes as f64 / b)
                }
                _ => "0".to_string(),
            },
        ),
    ]
}

/// The machine-readable line that ends a run: `gvsoc-e2e summary key=value ...`.
pub fn summary_line(i: &Inputs) -> String {
    let mut s = String::from("gvsoc-e2e summary");
    for (k, v) in summary_fields(i) {
        let _ = write!(s, " {k}={v}");
    }
    s
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
        if st.wifi_kbps > 0 {
            let _ = writeln!(
                s,
                "gvsoc-e2e: ESP32 stand-in WiFi: {:.3} Mbit/s of simulated time, {} bytes on the air, held at most {} of {} bytes, the GAP8 held back {:.1} ms by the full queue",
                st.wifi_kbps as f64 / 1e3,
                st.wifi_bytes,
                st.wifi_held_max,
                st.wifi_queue_bytes,
                st.wifi_stall_ns as f64 / 1e6
            );
        }
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
    if let Some(b) = i.boot {
        boot_verdict(b, &mut s, &mut fail);
    }
    state_verdict(i.states, criteria.max_state_age_ms, &mut s, &mut fail);
    uart_verdict(
        i.uart,
        criteria.max_state_age_ms.is_some(),
        &mut s,
        &mut fail,
    );
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
            let budget = i.wifi.budget_fps();
            if let (Some(b), Some(bytes)) = (budget, i.wifi.bytes_per_frame) {
                let _ = writeln!(
                    s,
                    "gvsoc-e2e: WiFi {} Mbit/s, {bytes:.0} bytes per frame on the air: it carries {b:.2} frames per second",
                    i.wifi.mbps
                );
            }
            if let Some(min) = criteria.min_fps {
                let (want, why) = match budget {
                    Some(b) if criteria.wifi_share * b < min => (
                        criteria.wifi_share * b,
                        format!(
                            "{:.0} % of the {b:.2} the WiFi carries",
                            criteria.wifi_share * 100.0
                        ),
                    ),
                    _ => (min, format!("{min}")),
                };
                if f.fps < want {
                    fail(
                        &mut s,
                        format!(
                            "{:.2} frames per second, at least {want:.2} wanted ({why})",
                            f.fps
                        ),
                    );
                }
            }
            let own = gap8_period_cycles(f, i.standin);
            let own_fps = f.fc_hz as f64 / own.max(1) as f64;
            if own != f.period_cycles {
                let _ = writeln!(
                    s,
                    "gvsoc-e2e: the GAP8 alone (the WiFi's hold-back taken out of the period): period {:.2} ms, {own_fps:.2} frames per second",
                    ms(own)
                );
            }
            if let Some(min) = criteria.min_gap8_fps {
                if own_fps < min {
                    fail(
                        &mut s,
                        format!(
                            "the GAP8 alone sustains {own_fps:.2} frames per second, at least {min} wanted"
                        ),
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

/// The UART under the state path: bytes per uDMA read, and, when the state is checked, no byte
/// lost while streaming (the ring may lap only while the drone loop is away before the stream:
/// start-up and the handshake).
fn uart_verdict(
    uart: Option<UartStats>,
    check: bool,
    s: &mut String,
    fail: &mut impl FnMut(&mut String, String),
) {
    let Some(u) = uart else { return };
    let _ = writeln!(
        s,
        "gvsoc-e2e: UART from the STM32 stand-in: {} bytes in {} uDMA reads ({:.1} per read), {} lost to the ring before the stream, {} after",
        u.received,
        u.reads,
        u.received as f64 / u.reads.max(1) as f64,
        u.overruns_before_stream,
        u.overruns.saturating_sub(u.overruns_before_stream)
    );
    if check && u.overruns > u.overruns_before_stream {
        fail(
            s,
            format!(
                "the UART ring lost {} bytes while streaming",
                u.overruns - u.overruns_before_stream
            ),
        );
    }
}

/// The drone's state in the frames: how many carried a record, the sample's age at the end of each
/// frame's exposure, and the criterion (every frame a valid, fresh record at most that old).
fn state_verdict(
    states: &[Option<gapstream_protocol::state::StateRecord>],
    max_ms: Option<f64>,
    s: &mut String,
    fail: &mut impl FnMut(&mut String, String),
) {
    let with = states.iter().filter(|r| r.is_some()).count();
    let valid = states.iter().flatten().filter(|r| r.is_valid()).count();
    let stale = states.iter().flatten().filter(|r| r.is_stale()).count();
    let ages = state_ages_us(states);
    if with == 0 && max_ms.is_none() {
        return;
    }
    let list: Vec<String> = states
        .iter()
        .map(|r| match r.as_ref().map(|r| (r.is_valid(), r.age_us())) {
            None => "-".to_string(),
            Some((false, _)) => "none".to_string(),
            Some((true, Some(a))) => format!("{:.2}", a as f64 / 1e3),
            Some((true, None)) => "late".to_string(),
        })
        .collect();
    let _ = writeln!(
        s,
        "gvsoc-e2e: drone state: {with} of {} frames with a state record, {valid} with a sample, {stale} stale; age at the end of exposure, ms: {}",
        states.len(),
        list.join(", ")
    );
    if let (Some(min), Some(max)) = (ages.iter().min(), ages.iter().max()) {
        let mean = ages.iter().sum::<u64>() as f64 / ages.len() as f64;
        let _ = writeln!(
            s,
            "gvsoc-e2e: state age min {:.2} ms, mean {:.2} ms, max {:.2} ms",
            *min as f64 / 1e3,
            mean / 1e3,
            *max as f64 / 1e3
        );
    }
    // The arrival stamps' jitter: the STM32 stand-in's time is the simulated time of a message's
    // first bit, the arrival the drone's clock at its last byte, so arrival − STM32 time is a
    // constant (the clocks' offset, the message's 3.47 ms on the line) plus the stamp's delay.
    let lags: Vec<i64> = states
        .iter()
        .flatten()
        .filter(|r| r.is_valid())
        .map(|r| r.arrival_us as i64 - r.sample.stm32_us as i64)
        .collect();
    if let (Some(min), Some(max)) = (lags.iter().min(), lags.iter().max()) {
        let _ = writeln!(
            s,
            "gvsoc-e2e: state arrival stamps: arrival - STM32 send time spread {} us over {} frames (the stamps' jitter)",
            max - min,
            lags.len()
        );
    }
    let Some(max_ms) = max_ms else { return };
    let bad = states
        .iter()
        .filter(|r| {
            !r.as_ref().is_some_and(|r| {
                r.is_valid()
                    && !r.is_stale()
                    && r.age_us().is_some_and(|a| a as f64 <= max_ms * 1e3)
            })
        })
        .count();
    if states.is_empty() || bad > 0 {
        fail(
            s,
            format!(
                "{bad} of {} frames without a state sample at most {max_ms} ms old at the end of the exposure",
                states.len()
            ),
        );
    }
}

fn boot_verdict(b: &BootCheck, s: &mut String, fail: &mut impl FnMut(&mut String, String)) {
    use crate::receiver::ReplayOutcome;
    let show = |v: Option<u32>| v.map_or("none".to_string(), |v| v.to_string());
    let _ = writeln!(
        s,
        "gvsoc-e2e: boot counter: the firmware printed {}, the drone's authenticated ACCEPT carried {}",
        show(b.fw_boot),
        show(b.rx_boot)
    );
    if let Some(want) = b.expect {
        if b.fw_boot != Some(want) || b.rx_boot != Some(want) {
            fail(s, format!("boot counter {want} wanted on both sides"));
        }
    }
    let Some(outcome) = &b.replay else { return };
    let _ = writeln!(
        s,
        "gvsoc-e2e: the earlier boot's HELLO replayed: {}",
        match outcome {
            ReplayOutcome::Accept { same: false } =>
                "the drone answered with a new ACCEPT (not the recorded one)".to_string(),
            ReplayOutcome::Accept { same: true } =>
                "the drone answered with the recorded ACCEPT, byte for byte".to_string(),
            ReplayOutcome::Alert(c) => format!("the drone refused it (ALERT code {c})"),
            ReplayOutcome::Nothing => "no answer".to_string(),
        }
    );
    let _ = writeln!(
        s,
        "gvsoc-e2e: the earlier boot's KEY_ACK replayed: the firmware refused {} message(s){}",
        b.fw_refused,
        b.fw_refused_reason
            .as_ref()
            .map_or(String::new(), |r| format!(" (last: {r})"))
    );
    if *outcome == (ReplayOutcome::Accept { same: true }) {
        fail(
            s,
            "the drone repeated an earlier boot's ACCEPT: its session keys repeat".into(),
        );
    }
    if b.fw_refused == 0 {
        fail(
            s,
            "the firmware refused nothing: the replayed KEY_ACK was taken".into(),
        );
    }
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
            wifi: Wifi::default(),
            boot: None,
            codec: Codec::default(),
            states: &[],
            uart: None,
        }
    }

    /// The firmware's UART counters: printed, and with the state criterion on, a byte lost while
    /// streaming fails the run (laps before the stream, during the handshake, do not).
    #[test]
    fn uart_losses_while_streaming_fail() {
        let log = "FW state uart_baud=115200 max_age_ms=50\n\
            FW state bytes=2243 states=55 others=0 bad_crc=0 skipped=31 overruns=2649 received=4920 uart_reads=372 overruns_before_stream=2649 poll_cycles=1 poll_cycles_first=1\n";
        let u = UartStats::parse(log).unwrap();
        assert_eq!(
            u,
            UartStats {
                received: 4920,
                reads: 372,
                overruns: 2649,
                overruns_before_stream: 2649,
            }
        );
        assert!(UartStats::parse("FW state uart_baud=115200 max_age_ms=50\n").is_none());
        let f = FwSummary::parse(LOG).unwrap();
        let good: Vec<Option<usize>> = (0..3).map(Some).collect();
        let mut i = inputs(&good, Some(&f));
        i.uart = Some(u);
        let c = Criteria {
            max_state_age_ms: Some(12.0),
            ..Criteria::default()
        };
        let (text, _) = verdict(&i, c);
        assert!(
            text.contains("4920 bytes in 372 uDMA reads (13.2 per read), 2649 lost to the ring before the stream, 0 after"),
            "{text}"
        );
        assert!(!text.contains("while streaming"), "{text}");
        i.uart = Some(UartStats {
            overruns: 2650,
            ..u
        });
        let (text, ok) = verdict(&i, c);
        assert!(
            !ok && text.contains("the UART ring lost 1 bytes while streaming"),
            "{text}"
        );
        // Without the state criterion the counters are printed, not checked.
        let (text, _) = verdict(&i, Criteria::default());
        assert!(
            !text.contains("while streaming") && text.contains("1 after"),
            "{text}"
        );
    }

    #[test]
    fn boot_checks_need_the_counter_and_the_refusal() {
        use crate::receiver::ReplayOutcome;
        let log = "FW boot counter 2\nFW upstream refused n=1 total=1 last: control message rejected: tag\n";
        let mut b = BootCheck {
            expect: Some(2),
            rx_boot: Some(2),
            replay: Some(ReplayOutcome::Accept { same: false }),
            ..BootCheck::default()
        };
        b.parse_fw(log);
        assert_eq!((b.fw_boot, b.fw_refused), (Some(2), 1));
        assert_eq!(
            b.fw_refused_reason.as_deref(),
            Some("control message rejected: tag")
        );
        let f = FwSummary::parse(LOG).unwrap();
        let good: Vec<Option<usize>> = (0..6).map(|i| Some(i * 4 % 11)).collect();
        let c = Criteria {
            min_frames: 5,
            ..Criteria::default()
        };
        let mut i = inputs(&good, Some(&f));
        i.boot = Some(&b);
        let (text, ok) = verdict(&i, c);
        assert!(ok, "{text}");
        assert!(text.contains("a new ACCEPT"), "{text}");
        // Each failure on its own.
        type Spoil = fn(&mut BootCheck);
        let cases: [(&str, Spoil); 4] = [
            ("boot counter 2 wanted", |b| b.fw_boot = Some(1)),
            ("boot counter 2 wanted", |b| b.rx_boot = None),
            ("session keys repeat", |b| {
                b.replay = Some(ReplayOutcome::Accept { same: true })
            }),
            ("replayed KEY_ACK was taken", |b| b.fw_refused = 0),
        ];
        for (want, spoil) in cases {
            let mut bad = b.clone();
            spoil(&mut bad);
            let mut i = inputs(&good, Some(&f));
            i.boot = Some(&bad);
            let (text, ok) = verdict(&i, c);
            assert!(!ok && text.contains(want), "{want}: {text}");
        }
    }

    /// The state criterion: every frame a valid, fresh record at most that old; the line lists
    /// each frame's age; the summary gives the largest.
    #[test]
    fn state_ages_are_printed_and_checked() {
        use gapstream_protocol::state::{StateRecord, StateSample};
        let rec = |age_us: u64| {
            StateRecord::new(
                Some((StateSample::default(), 1_000_000 - age_us)),
                1_000_000,
                50_000,
            )
        };
        let f = FwSummary::parse(LOG).unwrap();
        let good: Vec<Option<usize>> = (0..3).map(Some).collect();
        let c = Criteria {
            max_state_age_ms: Some(12.0),
            ..Criteria::default()
        };
        let states = [Some(rec(3_500)), Some(rec(11_990)), Some(rec(87))];
        let mut i = inputs(&good, Some(&f));
        i.states = &states;
        let (text, ok) = verdict(&i, c);
        assert!(ok, "{text}");
        assert!(
            text.contains("3 of 3 frames with a state record, 3 with a sample, 0 stale; age at the end of exposure, ms: 3.50, 11.99, 0.09"),
            "{text}"
        );
        assert!(text.contains("max 11.99 ms"), "{text}");
        // Arrivals 996,500 / 988,010 / 999,913 µs, STM32 times 0: a spread of 11,903 µs.
        assert!(text.contains("spread 11903 us over 3 frames"), "{text}");
        assert!(summary_line(&i).contains(" state_age_max_ms=11.99 "));
        // Too old, stale, no sample, no record: each fails.
        let cases: [Option<StateRecord>; 4] = [
            Some(rec(12_001)),
            Some(rec(60_000)),
            Some(StateRecord::new(None, 1_000_000, 50_000)),
            None,
        ];
        for bad in cases {
            let states = [Some(rec(1_000)), bad, Some(rec(1_000))];
            let mut i = inputs(&good, Some(&f));
            i.states = &states;
            let (text, ok) = verdict(&i, c);
            assert!(
                !ok && text.contains("1 of 3 frames without a state sample"),
                "{bad:?}: {text}"
            );
        }
        // No criterion and no records: nothing said, the summary says none.
        let i = inputs(&good, Some(&f));
        assert!(!verdict(&i, Criteria::default()).0.contains("drone state"));
        assert!(summary_line(&i).contains(" state_age_max_ms=none "));
    }

    #[test]
    fn verdict_checks_every_criterion() {
        let f = FwSummary::parse(LOG).unwrap();
        let c = Criteria {
            min_frames: 5,
            max_ratio: Some(0.6),
            min_fps: Some(14.0),
            wifi_share: 0.95,
            min_gap8_fps: Some(14.0),
            max_period_over_send: Some(1.2),
            max_up_hz: Some(7_200_000),
            min_down_hz: Some(20_000_000),
            max_state_age_ms: None,
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
            "gvsoc-e2e summary fps=14.7 frames=6 byte_exact=6 capture_ms=66.0 seal_ms=8.0 send_ms=60.0 period_ms=68.0 spi_down_hz=30000000 spi_up_hz=7058823 suite=chacha20poly1305 wifi_mbps=0 state_age_max_ms=none codec=raw quality=0 bytes_per_frame=0 codec_ms=0.00 ratio=0"
        );
        let mut i = inputs(&good, Some(&f));
        i.wifi.mbps = 12.5;
        assert!(summary_line(&i).contains(" wifi_mbps=12.5 "));
        let coded = FwSummary {
            code_cycles: 540_000,
            fc_hz: 240_000_000,
            ..f
        };
        let mut i = inputs(&good, Some(&coded));
        i.codec = Codec {
            name: "jpeg",
            quality: 75,
            bytes_per_frame: Some(14_321.4),
            raw_bytes: 79_056,
        };
        assert!(
            summary_line(&i)
                .ends_with(" codec=jpeg quality=75 bytes_per_frame=14321 codec_ms=2.25 ratio=5.52"),
            "{}",
            summary_line(&i)
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

    /// Under a WiFi slower than the link the fps criterion follows the WiFi (95 % of what it
    /// carries), and the GAP8's own rate (the stand-in's hold-back taken out) keeps the firmware's.
    #[test]
    fn the_criteria_follow_the_wifi() {
        // 14.71 fps; 3,400,000 cycles at 50 MHz per frame, 8 frames.
        let f = FwSummary::parse(LOG).unwrap();
        let good: Vec<Option<usize>> = (0..8).map(|i| Some(i * 4 % 11)).collect();
        let c = Criteria {
            min_frames: 8,
            min_fps: Some(35.0),
            wifi_share: 0.95,
            min_gap8_fps: Some(20.0),
            ..Criteria::default()
        };
        // The WiFi carries 15 fps (8 Mbit/s, 66,667 bytes a frame): 14.25 wanted.
        let mut i = inputs(&good, Some(&f));
        i.wifi = Wifi {
            mbps: 8.0,
            bytes_per_frame: Some(66_666.67),
        };
        assert!((i.wifi.budget_fps().unwrap() - 15.0).abs() < 1e-3);
        // 7 intervals of 30 ms hold-back each: the GAP8 alone runs a 1,900,000-cycle period.
        i.standin = Some(StandinSummary {
            wifi_kbps: 8000,
            wifi_stall_ns: 7 * 30_000_000,
            ..StandinSummary::default()
        });
        assert_eq!(gap8_period_cycles(&f, i.standin), 1_900_000);
        let (text, ok) = verdict(&i, c);
        assert!(ok, "{text}");
        assert!(
            text.contains("it carries 15.00 frames per second"),
            "{text}"
        );
        // Slower than 95 % of the WiFi's rate: fails.
        i.wifi.bytes_per_frame = Some(60_000.0);
        let (text, ok) = verdict(&i, c);
        assert!(
            !ok && text.contains("% of the 16.67 the WiFi carries"),
            "{text}"
        );
        // A WiFi faster than the firmware: the old floor holds, and fails at 14.71 fps.
        i.wifi.mbps = 100.0;
        let (text, ok) = verdict(&i, c);
        assert!(!ok && text.contains("at least 35.00 wanted (35)"), "{text}");
        // The firmware slowed down behind a slow WiFi: its own rate gives it away.
        i.wifi.mbps = 8.0;
        i.wifi.bytes_per_frame = Some(66_666.67);
        i.standin = Some(StandinSummary {
            wifi_kbps: 8000,
            wifi_stall_ns: 7 * 5_000_000,
            ..StandinSummary::default()
        });
        let (text, ok) = verdict(&i, c);
        assert!(!ok && text.contains("the GAP8 alone sustains"), "{text}");
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
