//! Stream metrics: counters, latency percentiles, process and SoC sampling, and the CSV written
//! every 0.5 s (fps, goodput, latency, loss, handshake and rekey costs, CPU, memory, temperature).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The metrics CSV header (one row per sampling interval).
pub const CSV_HEADER: &str = "t_s,fps,goodput_mbps,latency_p50_ms,latency_p95_ms,latency_p99_ms,frames,lost,tag_failures,replays,malformed,handshakes,handshake_ms,handshake_tx_bytes,handshake_rx_bytes,rekeys,key_epoch,cpu_pct,rss_kib,temp_c,fec_recovered,fec_unrecoverable_blocks,fec_redundancy_pct";

/// Per-frame log header (for the latency CDF of `gapstream report`), then the frame's stamp on
/// this machine's clock and the drone's state (empty without one; [`crate::drone_state`]).
pub const FRAMES_HEADER: &str = "t_s,seq,bytes,latency_ms,receive_unix_ns,stamp_unix_ns,stamp_uncertainty_ms,state_flags,stm32_us,state_age_ms,x_m,y_m,z_m,vx_m_s,vy_m_s,vz_m_s,qx,qy,qz,qw,roll_rate_rad_s,pitch_rate_rad_s,yaw_rate_rad_s";

/// The per-frame log's columns after `receive_unix_ns` for a frame stamped `stamp_ns` (with its
/// uncertainty, when estimated) and its state.
pub fn state_columns(
    stamp_ns: u64,
    uncertainty_ms: Option<f64>,
    state: Option<&crate::drone_state::DroneState>,
) -> String {
    let u = uncertainty_ms
        .map(|u| format!("{u:.3}"))
        .unwrap_or_default();
    let Some(s) = state else {
        return format!("{stamp_ns},{u},,,,,,,,,,,,,,,,");
    };
    let r = &s.record;
    let age = s.age_ms().map(|a| format!("{a:.3}")).unwrap_or_default();
    let mut out = format!("{stamp_ns},{u},{},{},{age}", r.flags, r.sample.stm32_us);
    for v in s
        .position_m
        .iter()
        .chain(&s.velocity_m_s)
        .chain(&s.orientation)
        .chain(&s.rates_rad_s)
    {
        out.push_str(&format!(",{v}"));
    }
    out
}

/// Percentile by nearest rank (`p` in 0..=100) of an ascending-sorted slice; `None` when empty.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// p50 / p95 / p99 of a set of samples.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

impl Percentiles {
    /// Sorts `samples` in place; `None` when empty.
    pub fn of(samples: &mut [f64]) -> Option<Self> {
        samples.sort_by(f64::total_cmp);
        Some(Percentiles {
            p50: percentile_sorted(samples, 50.0)?,
            p95: percentile_sorted(samples, 95.0)?,
            p99: percentile_sorted(samples, 99.0)?,
        })
    }
}

/// Everything the receiver counts. Cumulative since the receiver started.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Frames decrypted, verified and delivered.
    pub frames: u64,
    /// Payload bytes of those frames (goodput counts these).
    pub payload_bytes: u64,
    /// Frames never seen (gaps in the sequence numbers).
    pub lost: u64,
    /// Frames whose authentication tag did not verify.
    pub tag_failures: u64,
    /// Frames rejected as replays.
    pub replays: u64,
    /// Malformed CPX / frame messages (bad length, garbled header, truncated).
    pub malformed: u64,
    /// Frames of a key epoch this receiver holds no key for (just after joining a running group
    /// while its key is on the way, after leaving it, or with a forged epoch number). Not in the
    /// CSV; printed in the summary.
    pub no_key: u64,
    /// Completed handshakes (reconnects add one each).
    pub handshakes: u64,
    /// Handshake attempts that failed on a remote cause (the drone refused the HELLO, or an
    /// ACCEPT did not authenticate). Not in the CSV; the closing diagnosis uses it.
    pub handshake_failures: u64,
    /// Duration of the last handshake.
    pub handshake_ms: f64,
    /// Bytes the receiver sent / received in the last handshake.
    pub handshake_tx_bytes: u64,
    pub handshake_rx_bytes: u64,
    /// Rekeys completed.
    pub rekeys: u64,
    /// Current key epoch.
    pub key_epoch: u64,
    /// Forward error correction over UDP (zeros without it).
    pub fec: crate::fec_rx::FecCounters,
}

/// CPU and memory of this process, from `/proc/self`.
pub struct ProcSampler {
    last_cpu_s: Option<f64>,
    last_at: Instant,
}

impl Default for ProcSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcSampler {
    pub fn new() -> Self {
        ProcSampler {
            last_cpu_s: Self::cpu_seconds(),
            last_at: Instant::now(),
        }
    }

    /// utime + stime of this process in seconds (USER_HZ is 100 on every Linux architecture this
    /// runs on: x86-64, arm64, riscv64).
    fn cpu_seconds() -> Option<f64> {
        let stat = fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which is in parentheses and may contain spaces).
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        // rest[0] is field 3 (state); utime is field 14, stime field 15.
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        Some((utime + stime) / 100.0)
    }

    /// CPU use since the previous call, in percent of one core.
    pub fn cpu_percent(&mut self) -> Option<f64> {
        let now = Instant::now();
        let cpu = Self::cpu_seconds()?;
        let wall = now.duration_since(self.last_at).as_secs_f64();
        let prev = self.last_cpu_s.replace(cpu);
        self.last_at = now;
        match prev {
            Some(p) if wall > 0.0 => Some(((cpu - p) / wall * 100.0).max(0.0)),
            _ => None,
        }
    }

    /// Resident set size in KiB (`VmRSS` of `/proc/self/status`).
    pub fn rss_kib() -> Option<u64> {
        let status = fs::read_to_string("/proc/self/status").ok()?;
        parse_vmrss(&status)
    }
}

fn parse_vmrss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// SoC temperature in °C from `/sys/class/thermal`, when the machine has a thermal zone.
/// Prefers a zone whose type names the CPU / SoC (`cpu-thermal` on a Raspberry Pi, `x86_pkg_temp`).
pub fn soc_temperature_c() -> Option<f64> {
    soc_temperature_in(Path::new("/sys/class/thermal"))
}

fn soc_temperature_in(root: &Path) -> Option<f64> {
    let mut zones: Vec<PathBuf> = fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("thermal_zone"))
        })
        .collect();
    zones.sort();
    let read = |z: &PathBuf| -> Option<f64> {
        let milli: f64 = fs::read_to_string(z.join("temp"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        Some(milli / 1000.0)
    };
    let preferred = zones.iter().find(|z| {
        fs::read_to_string(z.join("type"))
            .map(|t| {
                let t = t.to_ascii_lowercase();
                t.contains("cpu") || t.contains("soc") || t.contains("x86_pkg")
            })
            .unwrap_or(false)
    });
    preferred
        .and_then(read)
        .or_else(|| zones.iter().find_map(read))
}

/// Rolling window of what happened since the last CSV row.
#[derive(Default)]
pub struct Window {
    pub frames: u64,
    pub payload_bytes: u64,
    pub latencies_ms: Vec<f64>,
}

/// One CSV row.
#[derive(Clone, Debug, Default)]
pub struct Row {
    pub t_s: f64,
    pub fps: f64,
    pub goodput_mbps: f64,
    pub latency: Option<Percentiles>,
    pub counters: Counters,
    pub cpu_pct: Option<f64>,
    pub rss_kib: Option<u64>,
    pub temp_c: Option<f64>,
}

/// Interval between CSV rows.
pub const INTERVAL: Duration = Duration::from_millis(500);

/// Path of the per-frame log written next to a metrics CSV: `run.csv` -> `run.frames.csv`.
pub fn frames_path(metrics: &Path) -> PathBuf {
    let stem = metrics
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    metrics.with_file_name(format!("{stem}.frames.csv"))
}

/// The one counters path's arithmetic: per-frame samples in, a [`Row`] every [`INTERVAL`] out
/// (fps, goodput, latency percentiles, CPU, memory, temperature), and the run's latencies for the
/// closing summary. No I/O but `/proc` and `/sys` reads; the receiver owns one and publishes its
/// rows to every output ([`crate::receiver::bus::Status`]).
pub struct Meter {
    start: Instant,
    last_row: Instant,
    proc_: ProcSampler,
    /// The window in progress.
    pub window: Window,
    /// Latencies of the whole run, for the final summary.
    pub all_latencies_ms: Vec<f64>,
    /// Last computed row.
    pub last: Row,
}

impl Default for Meter {
    fn default() -> Self {
        Self::new()
    }
}

impl Meter {
    pub fn new() -> Self {
        let now = Instant::now();
        Meter {
            start: now,
            last_row: now,
            proc_: ProcSampler::new(),
            window: Window::default(),
            all_latencies_ms: Vec::new(),
            last: Row::default(),
        }
    }

    /// Records one delivered frame.
    pub fn frame(&mut self, payload_bytes: usize, latency_ms: Option<f64>) {
        self.window.frames += 1;
        self.window.payload_bytes += payload_bytes as u64;
        if let Some(l) = latency_ms {
            self.window.latencies_ms.push(l);
            self.all_latencies_ms.push(l);
        }
    }

    /// A row when [`INTERVAL`] has passed (or when `force`).
    pub fn tick(&mut self, counters: &Counters, force: bool) -> Option<Row> {
        let now = Instant::now();
        let dt = now.duration_since(self.last_row);
        if dt < INTERVAL && !force {
            return None;
        }
        let secs = dt.as_secs_f64().max(1e-9);
        let w = std::mem::take(&mut self.window);
        let mut lat = w.latencies_ms;
        let row = Row {
            t_s: now.duration_since(self.start).as_secs_f64(),
            fps: w.frames as f64 / secs,
            goodput_mbps: w.payload_bytes as f64 * 8.0 / secs / 1e6,
            latency: Percentiles::of(&mut lat),
            counters: counters.clone(),
            cpu_pct: self.proc_.cpu_percent(),
            rss_kib: ProcSampler::rss_kib(),
            temp_c: soc_temperature_c(),
        };
        self.last_row = now;
        self.last = row.clone();
        Some(row)
    }

    /// Seconds since the meter started.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

/// The metrics CSV and the per-frame log next to it (`run.csv`, `run.frames.csv`).
pub struct CsvLog {
    csv: io::BufWriter<fs::File>,
    frames_csv: io::BufWriter<fs::File>,
}

impl CsvLog {
    pub fn create(p: &Path) -> io::Result<Self> {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let mut csv = io::BufWriter::new(fs::File::create(p)?);
        writeln!(csv, "{CSV_HEADER}")?;
        let mut frames_csv = io::BufWriter::new(fs::File::create(frames_path(p))?);
        writeln!(frames_csv, "{FRAMES_HEADER}")?;
        Ok(CsvLog { csv, frames_csv })
    }

    /// One per-frame line (`t_s` since the run started, `receive_unix_ns` when it was delivered,
    /// then `state`: [`state_columns`]).
    pub fn frame(
        &mut self,
        t_s: f64,
        seq: u64,
        payload_bytes: usize,
        latency_ms: Option<f64>,
        receive_unix_ns: u64,
        state: &str,
    ) -> io::Result<()> {
        let f = &mut self.frames_csv;
        let l = latency_ms.map(|l| format!("{l:.4}")).unwrap_or_default();
        writeln!(
            f,
            "{t_s:.4},{seq},{payload_bytes},{l},{receive_unix_ns},{state}"
        )
    }

    /// One row; both files are flushed.
    pub fn row(&mut self, row: &Row) -> io::Result<()> {
        writeln!(self.csv, "{}", csv_line(row))?;
        self.csv.flush()?;
        self.frames_csv.flush()
    }
}

/// A [`Meter`] writing its rows into a [`CsvLog`] (tools and tests; the receiver writes the CSV
/// from its bus).
pub struct MetricsLog {
    pub meter: Meter,
    csv: Option<CsvLog>,
}

impl MetricsLog {
    /// Without a path, only keeps the numbers.
    pub fn new(csv_path: Option<&Path>) -> io::Result<Self> {
        Ok(MetricsLog {
            meter: Meter::new(),
            csv: csv_path.map(CsvLog::create).transpose()?,
        })
    }

    /// Records one delivered frame.
    pub fn frame(
        &mut self,
        seq: u64,
        payload_bytes: usize,
        latency_ms: Option<f64>,
    ) -> io::Result<()> {
        self.meter.frame(payload_bytes, latency_ms);
        let t = self.meter.elapsed().as_secs_f64();
        match &mut self.csv {
            Some(c) => {
                let now = crate::sim::unix_ns();
                c.frame(
                    t,
                    seq,
                    payload_bytes,
                    latency_ms,
                    now,
                    &state_columns(now, None, None),
                )
            }
            None => Ok(()),
        }
    }

    /// Writes a row when [`INTERVAL`] has passed (or when `force`). Returns the row when one was written.
    pub fn tick(&mut self, counters: &Counters, force: bool) -> io::Result<Option<Row>> {
        let Some(row) = self.meter.tick(counters, force) else {
            return Ok(None);
        };
        if let Some(c) = &mut self.csv {
            c.row(&row)?;
        }
        Ok(Some(row))
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// One CSV line for a row (empty fields for values this machine cannot give).
pub fn csv_line(r: &Row) -> String {
    let c = &r.counters;
    let (p50, p95, p99) = match r.latency {
        Some(p) => (
            format!("{:.3}", p.p50),
            format!("{:.3}", p.p95),
            format!("{:.3}", p.p99),
        ),
        None => Default::default(),
    };
    format!(
        "{:.3},{:.2},{:.3},{p50},{p95},{p99},{},{},{},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{:.1}",
        r.t_s,
        r.fps,
        r.goodput_mbps,
        c.frames,
        c.lost,
        c.tag_failures,
        c.replays,
        c.malformed,
        c.handshakes,
        c.handshake_ms,
        c.handshake_tx_bytes,
        c.handshake_rx_bytes,
        c.rekeys,
        c.key_epoch,
        opt(r.cpu_pct.map(|v| format!("{v:.1}"))),
        opt(r.rss_kib),
        opt(r.temp_c.map(|v| format!("{v:.1}"))),
        c.fec.recovered,
        c.fec.unrecoverable_blocks,
        c.fec.redundancy_pct,
    )
}

/// The one-line terminal status.
pub fn status_line(r: &Row, suite: &str) -> String {
    let c = &r.counters;
    let lat = match r.latency {
        Some(p) => format!("lat p50 {:.1} ms p95 {:.1} ms", p.p50, p.p95),
        None => "lat -".into(),
    };
    let fec = if c.fec.on {
        format!(
            "  fec {:.0}% rec {} unrec {}",
            c.fec.redundancy_pct, c.fec.recovered, c.fec.unrecoverable_blocks
        )
    } else {
        String::new()
    };
    format!(
        "{:7.1}s  {:5.1} fps  {:6.2} Mb/s  {lat}  frames {}  lost {}  tag-fail {}  replays {}  epoch {}{fec}  {suite}",
        r.t_s, r.fps, r.goodput_mbps, c.frames, c.lost, c.tag_failures, c.replays, c.key_epoch
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-frame log's name, as docs/stream.md gives it.
    #[test]
    fn frames_log_name_is_the_documented_one() {
        assert_eq!(
            frames_path(Path::new("out/run.csv")),
            Path::new("out/run.frames.csv")
        );
        let doc = include_str!("../../docs/stream.md");
        assert!(doc.contains("`--metrics run.csv`") && doc.contains("writes `run.frames.csv`"));
        assert!(!doc.contains("FILE.frames.csv"));
    }

    #[test]
    fn percentiles_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        v.reverse();
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!((p.p50, p.p95, p.p99), (50.0, 95.0, 99.0));
        assert_eq!(Percentiles::of(&mut []), None);
        let mut one = [7.0];
        assert_eq!(Percentiles::of(&mut one).unwrap().p99, 7.0);
    }

    #[test]
    fn vmrss_parses() {
        assert_eq!(
            parse_vmrss("Name:\tx\nVmRSS:\t   1234 kB\nVmSwap: 0 kB\n"),
            Some(1234)
        );
        assert_eq!(parse_vmrss("Name: x\n"), None);
    }

    #[test]
    fn proc_sampling_on_this_machine() {
        let mut s = ProcSampler::new();
        // Burn a little CPU so the delta is measurable.
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        std::thread::sleep(Duration::from_millis(20));
        let cpu = s.cpu_percent().expect("/proc/self/stat readable");
        assert!((0.0..=100.0 * 64.0).contains(&cpu));
        assert!(ProcSampler::rss_kib().expect("VmRSS") > 100);
    }

    #[test]
    fn thermal_zone_preference() {
        let d = tempfile::tempdir().unwrap();
        for (zone, ty, temp) in [
            ("thermal_zone0", "acpitz", "30000"),
            ("thermal_zone1", "x86_pkg_temp", "51500"),
        ] {
            let z = d.path().join(zone);
            fs::create_dir(&z).unwrap();
            fs::write(z.join("type"), ty).unwrap();
            fs::write(z.join("temp"), temp).unwrap();
        }
        assert_eq!(soc_temperature_in(d.path()), Some(51.5));
        assert_eq!(soc_temperature_in(&d.path().join("missing")), None);
    }

    #[test]
    fn csv_rows_have_header_arity() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.csv");
        let mut log = MetricsLog::new(Some(&p)).unwrap();
        log.frame(0, 79056, Some(1.5)).unwrap();
        log.frame(1, 79056, None).unwrap();
        log.tick(
            &Counters {
                frames: 2,
                ..Default::default()
            },
            true,
        )
        .unwrap()
        .unwrap();
        drop(log);
        let text = fs::read_to_string(&p).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(CSV_HEADER));
        let row = lines.next().unwrap();
        assert_eq!(
            row.split(',').count(),
            CSV_HEADER.split(',').count(),
            "{row}"
        );
        let frames = fs::read_to_string(frames_path(&p)).unwrap();
        assert_eq!(frames.lines().count(), 3);
        for l in frames.lines() {
            assert_eq!(
                l.split(',').count(),
                FRAMES_HEADER.split(',').count(),
                "{l}"
            );
        }
    }

    #[test]
    fn state_columns_have_header_arity() {
        use gapstream_protocol::state::{StateRecord, StateSample, VALID};
        let s = crate::drone_state::DroneState::from_record(StateRecord {
            flags: VALID,
            arrival_us: 10,
            exposure_end_us: 3_010,
            sample: StateSample {
                stm32_us: 77,
                position_mm: [1000, 0, 1000],
                quat: 3 << 30,
                ..StateSample::default()
            },
        });
        let fixed = 5; // t_s .. receive_unix_ns
        for cols in [
            state_columns(5, Some(1.25), Some(&s)),
            state_columns(5, None, None),
        ] {
            assert_eq!(
                cols.split(',').count() + fixed,
                FRAMES_HEADER.split(',').count()
            );
        }
        let c = state_columns(5, Some(1.25), Some(&s));
        assert!(
            c.starts_with("5,1.250,1,77,3.000,1,0,1,0,0,0,0,0,0,1,"),
            "{c}"
        );
    }
}
