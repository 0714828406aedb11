//! `gvsoc-e2e`: the host side of `make gvsoc-e2e`.
//!
//! ```text
//! gvsoc-e2e frames --out DIR --count 11          input PGMs for the camera model
//! gvsoc-e2e run --elf FW --model esp32_standin.so --keys receiver.key --inputs DIR ...
//! ```
//! `run` starts the GAP8 model through the GAP SDK's `gapy` (ai_deck board; the camera model reads
//! DIR/in%d.pgm, the board's wifi device is replaced by the ESP32 stand-in), receives and verifies
//! the stream, then prints the verdict. One line per error; exit status 1 on failure.
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use gapstream_protocol::handshake::{Identity, Role};
use gapstream_protocol::suite::{KexMode, Suite};
use gvsoc_e2e::{coded, pgm, receiver, report};

#[derive(Parser)]
#[command(about = "End-to-end run of the gapstream GAP8 firmware on the GVSOC AI-deck model")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write the input frames DIR/in0.pgm .. in{count-1}.pgm.
    Frames {
        #[arg(long)]
        out: PathBuf,
        #[arg(long, default_value_t = 11)]
        count: u32,
        #[arg(long, default_value_t = 0x6a70_7374)]
        seed: u64,
        /// Write the frame set instead (the `frameset` crate: scikit-image's photographs cut to
        /// 324x244 grey, and the synthetic pattern; needs the project venv); `--count` is ignored.
        #[arg(long)]
        photos: bool,
    },
    /// Run the firmware on the model and check the stream.
    Run(Box<RunArgs>),
}

#[derive(Args)]
struct RunArgs {
    /// The firmware ELF (make -C firmware platform=gvsoc).
    #[arg(long)]
    elf: PathBuf,
    /// The ESP32 stand-in DPI model (gvsoc/e2e/esp32_standin.so).
    #[arg(long)]
    model: PathBuf,
    /// The STM32 stand-in DPI model on the GAP8's UART (gvsoc/e2e/stm32_standin.so): prints the
    /// firmware's console and sends the flight controller's state messages. Without it the
    /// board's own UART device prints the console and no state comes.
    #[arg(long)]
    stm32_model: Option<PathBuf>,
    /// The STM32 stand-in's state messages: one every this many simulated µs (10000: 100 Hz).
    #[arg(long, default_value_t = 10_000)]
    state_period_us: u64,
    /// Criterion: the state's age at the end of every frame's exposure at most, ms (the
    /// firmware's records; not checked when absent).
    #[arg(long)]
    max_state_age_ms: Option<f64>,
    /// The receiver's pairing file (the firmware was built with the matching drone.key).
    #[arg(long)]
    keys: PathBuf,
    /// Folder with the input frames in0.pgm, in1.pgm, ...
    #[arg(long)]
    inputs: PathBuf,
    /// GVSOC work directory.
    #[arg(long)]
    work: PathBuf,
    /// Frames the firmware sends (its FRAMES setting).
    #[arg(long, default_value_t = 8)]
    frames: usize,
    /// TCP port of the stand-in's WiFi side.
    #[arg(long, default_value_t = 5731)]
    port: u16,
    /// Frame suite the receiver asks for.
    #[arg(long, default_value = "chacha20poly1305")]
    suite: String,
    /// Key establishment the receiver asks for inside the handshake.
    #[arg(long, default_value = "x25519")]
    kex: String,
    /// ESP32 reaction time to the GAP8's ready line, simulated ns.
    #[arg(long, default_value_t = 20_000)]
    latency_ns: u64,
    /// Give up after this many seconds of wall-clock time.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
    /// Criteria: byte-exact frames at least.
    #[arg(long, default_value_t = 16)]
    min_frames: usize,
    /// period / (capture + encrypt + send) at most (not checked when absent).
    #[arg(long)]
    max_ratio: Option<f64>,
    /// Frames per simulated second at least; when the WiFi carries fewer, --wifi-share of what it
    /// carries.
    #[arg(long)]
    min_fps: Option<f64>,
    /// The share of the WiFi's frame rate the stream must reach when the WiFi is the limit.
    #[arg(long, default_value_t = 0.95)]
    wifi_share: f64,
    /// The GAP8's own rate at least: frames per second with the time the stand-in's full WiFi
    /// queue held it back taken out of the period.
    #[arg(long)]
    min_gap8_fps: Option<f64>,
    /// WiFi rate of the ESP32 stand-in in Mbit/s of simulated time (0: not limited).
    #[arg(long, default_value_t = 10.0)]
    wifi_mbps: f64,
    /// Bytes the stand-in holds for WiFi before it stops arming SPI transactions.
    #[arg(long, default_value_t = 82_000)]
    wifi_queue_bytes: u64,
    /// period / send at most: the link is the only limit.
    #[arg(long)]
    max_period_over_send: Option<f64>,
    /// Upstream (MISO read) SPI clock at most, in Hz.
    #[arg(long)]
    max_up_hz: Option<u64>,
    /// Downstream (transmit-only) SPI clock at least, in Hz.
    #[arg(long)]
    min_down_hz: Option<u64>,
    /// The stand-in's MISO limit in Hz (the AI-deck's board: 7.2 MHz).
    #[arg(long, default_value_t = 7_200_000)]
    miso_max_hz: u64,
    /// The negative check: succeed only if the stand-in corrupted MISO bits and the run failed.
    #[arg(long)]
    expect_miso_corruption: bool,
    /// Boot from the flash image an earlier run left in the work directory (what the firmware
    /// wrote there, the boot counter, is kept) instead of writing a fresh one.
    #[arg(long)]
    keep_flash: bool,
    /// Keep the session's HELLO, ACCEPT and first KEY_ACK in this file (what an attacker on the
    /// WiFi side can record).
    #[arg(long)]
    record_session: Option<PathBuf>,
    /// Replay a recorded session's HELLO and KEY_ACK before the receiver's own session; the
    /// firmware must refuse the KEY_ACK.
    #[arg(long)]
    replay_session: Option<PathBuf>,
    /// The boot counter the firmware and the drone's ACCEPT must show.
    #[arg(long)]
    expect_boot: Option<u32>,
    /// What the firmware codes frames with before sealing (its CODEC): raw, jpeg (then every
    /// frame must be the host encoder's file for an input and decode with jpeg-decoder) or jpegls
    /// (the host encoder's stream for an input, decoded bit-exact by gapstream_jpegls and, with
    /// --charls-python, by CharLS).
    #[arg(long, default_value = "raw", value_parser = ["raw", "jpeg", "jpegls"])]
    codec: String,
    /// A Python with imagecodecs (the project venv's): CharLS decodes every received JPEG-LS
    /// frame too, which must give its input back bit-exact.
    #[arg(long)]
    charls_python: Option<PathBuf>,
    /// Send SET_QUALITY with this quality (over the authenticated control channel) once
    /// --set-quality-after frames were verified; the JPEG frames after it must be the host
    /// encoder's files at the new quality.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=100), requires = "set_quality_after")]
    set_quality: Option<u8>,
    /// See --set-quality.
    #[arg(long, requires = "set_quality")]
    set_quality_after: Option<usize>,
    /// Criterion: at least this many verified frames coded (JPEG / JPEG-LS pixel format; a
    /// frame whose code did not fit the firmware's buffer goes out raw and does not count).
    #[arg(long, default_value_t = 0)]
    min_coded: usize,
    /// The firmware's JPEG quality (its QUALITY).
    #[arg(long, default_value_t = 75, value_parser = clap::value_parser!(u8).range(1..=100))]
    quality: u8,
    /// Restart intervals of the firmware's JPEG files (one per cluster core, its CORES).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u8).range(1..=8))]
    bands: u8,
}

/// CharLS (imagecodecs, through `py`) on the `.jls` files in `received`: how many decode
/// bit-exact to one of the input PGMs, of how many.
fn charls_check(
    py: &std::path::Path,
    received: &std::path::Path,
    inputs: &std::path::Path,
) -> Result<(usize, usize), String> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("charls_check.py");
    let out = Command::new(py)
        .arg(&script)
        .arg(received)
        .arg(inputs)
        .output()
        .map_err(|e| format!("{}: {e}", py.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("charls_check "))
        .ok_or_else(|| format!("no result line from {}", script.display()))?;
    let mut it = line.split_whitespace().filter_map(|kv| kv.split_once('='));
    let mut get = |k: &str| {
        it.find(|(key, _)| *key == k)
            .and_then(|(_, v)| v.parse::<usize>().ok())
            .ok_or_else(|| format!("charls_check: no {k}="))
    };
    let exact = get("exact")?;
    let frames = get("frames")?;
    Ok((exact, frames))
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("gvsoc-e2e: error: {msg}");
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    match Cli::parse().cmd {
        Cmd::Frames {
            out,
            count,
            seed,
            photos,
        } => {
            if let Err(e) = std::fs::create_dir_all(&out) {
                return fail(format!("{}: {e}", out.display()));
            }
            if photos {
                let set = match frameset::standard_set() {
                    Ok(s) => s,
                    Err(e) => return fail(format!("the frame set: {e}")),
                };
                for (i, p) in set.iter().enumerate() {
                    let path = out.join(format!("in{i}.pgm"));
                    let bytes = pgm::encode(p.width, p.height, &p.pixels);
                    if let Err(e) = std::fs::write(&path, bytes) {
                        return fail(format!("{}: {e}", path.display()));
                    }
                }
                let names: Vec<&str> = set.iter().map(|p| p.name.as_str()).collect();
                println!(
                    "gvsoc-e2e: {} input frames in {} (the frame set: {})",
                    set.len(),
                    out.display(),
                    names.join(", ")
                );
                return ExitCode::SUCCESS;
            }
            for i in 0..count {
                let p = out.join(format!("in{i}.pgm"));
                let px = pgm::input_frame(seed, i);
                if let Err(e) = std::fs::write(&p, pgm::encode(pgm::WIDTH, pgm::HEIGHT, &px)) {
                    return fail(format!("{}: {e}", p.display()));
                }
            }
            println!("gvsoc-e2e: {count} input frames in {}", out.display());
            ExitCode::SUCCESS
        }
        Cmd::Run(a) => run(*a),
    }
}

fn abs(p: &std::path::Path) -> Result<PathBuf, String> {
    std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))
}

fn run(a: RunArgs) -> ExitCode {
    let (elf, model, inputs_dir) = match (abs(&a.elf), abs(&a.model), abs(&a.inputs)) {
        (Ok(e), Ok(m), Ok(i)) => (e, m, i),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return fail(e),
    };
    let Some(suite) = Suite::from_name(&a.suite) else {
        return fail(format!("unknown suite {}", a.suite));
    };
    let Some(mode) = KexMode::from_name(&a.kex) else {
        return fail(format!("unknown key-establishment mode {}", a.kex));
    };
    let identity: Identity = match std::fs::read_to_string(&a.keys)
        .map_err(|e| e.to_string())
        .and_then(|t| Identity::from_pairing_text(&t).map_err(|e| e.to_string()))
    {
        Ok((Role::Receiver, id)) => id,
        Ok((Role::Drone, _)) => {
            return fail(format!(
                "{}: this is the drone's key file",
                a.keys.display()
            ));
        }
        Err(e) => return fail(format!("{}: {e}", a.keys.display())),
    };
    let mut inputs = Vec::new();
    for i in 0.. {
        let p = inputs_dir.join(format!("in{i}.pgm"));
        if !p.exists() {
            break;
        }
        match pgm::read(&p) {
            Ok(px) => inputs.push(px),
            Err(e) => return fail(e),
        }
    }
    if inputs.is_empty() {
        return fail(format!(
            "no input frames {}/in0.pgm ...",
            inputs_dir.display()
        ));
    }
    if let Err(e) = std::fs::create_dir_all(&a.work) {
        return fail(format!("{}: {e}", a.work.display()));
    }
    let work = match abs(&a.work) {
        Ok(w) => w,
        Err(e) => return fail(e),
    };

    // The GAP SDK's run flow for the ai_deck board: ROM boot from a HyperFlash image.
    let opts = [
        format!(
            "--config-opt=camera/image-stream={}/in%d.pgm",
            inputs_dir.display()
        ),
        "--config-opt=**/devices/wifi/generator=generators/v1/devices/spim_verif_gen".into(),
        "--config-opt=**/devices/wifi/type=dpi".into(),
        format!("--config-opt=**/devices/wifi/module={}", model.display()),
        "--config-opt=**/devices/wifi/gpio/esp_rtt=gpio18".into(),
        "--config-opt=**/devices/wifi/gpio/gap_rtt=gpio3".into(),
        format!("--config-opt=**/devices/wifi/port={}", a.port),
        format!("--config-opt=**/devices/wifi/latency_ns={}", a.latency_ns),
        format!("--config-opt=**/devices/wifi/miso_max_hz={}", a.miso_max_hz),
        format!(
            "--config-opt=**/devices/wifi/wifi_kbps={}",
            (a.wifi_mbps * 1e3).round() as u64
        ),
        format!(
            "--config-opt=**/devices/wifi/wifi_queue_bytes={}",
            a.wifi_queue_bytes
        ),
        "--config-opt=**/runner/boot/mode=flash".into(),
    ];
    let mut opts = opts.to_vec();
    if let Some(m) = &a.stm32_model {
        match abs(m) {
            Ok(m) => {
                opts.push(format!(
                    "--config-opt=**/devices/uart/module={}",
                    m.display()
                ));
                opts.push(format!(
                    "--config-opt=**/devices/uart/period_us={}",
                    a.state_period_us
                ));
            }
            Err(e) => return fail(e),
        }
    }
    let replay = match &a.replay_session {
        None => None,
        Some(p) => match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|t| receiver::Recorded::from_text(&t))
        {
            Ok(r) => Some(r),
            Err(e) => return fail(format!("{}: {e}", p.display())),
        },
    };
    // The flash image lives in the work directory (`target.board.devices.flash.img`); GVSOC's
    // HyperFlash model maps it and writes back what the firmware programs. `--image --flash`
    // writes a fresh one first; without them the model boots what the last run left.
    let flash_img = work.join("target.board.devices.flash.img");
    if a.keep_flash && !flash_img.exists() {
        return fail(format!(
            "{}: no flash image from an earlier run to boot again",
            flash_img.display()
        ));
    }
    let steps: &[&str] = if a.keep_flash {
        &["run", "--exec-prepare", "--exec"]
    } else {
        &["run", "--image", "--flash", "--exec-prepare", "--exec"]
    };
    let mut cmd = Command::new("stdbuf");
    cmd.args(["-oL", "-eL", "gapy", "--target=ai_deck", "--platform=gvsoc"])
        .arg(format!("--work-dir={}", work.display()))
        .args(&opts)
        .args(steps)
        .arg(format!("--binary={}", elf.display()))
        .stdout(Stdio::piped());
    eprintln!(
        "gvsoc-e2e: starting the GAP8 model: gapy --target=ai_deck --platform=gvsoc {} run ... --binary={}",
        opts.join(" "),
        elf.display()
    );
    let t0 = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return fail(format!(
                "cannot start gapy (load the GAP SDK environment): {e}"
            ));
        }
    };
    let stdout = child.stdout.take().expect("piped");
    let log_thread = std::thread::spawn(move || {
        let mut log = String::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("  | {line}");
            log.push_str(&line);
            log.push('\n');
        }
        log
    });
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = t0 + Duration::from_secs(a.timeout);
    let rx_cfg = receiver::RxConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], a.port)),
        identity,
        suite,
        mode,
        frames: a.frames,
        stop: stop.clone(),
        deadline,
        record: a.record_session.clone(),
        replay,
        set_quality: a.set_quality_after.zip(a.set_quality),
    };
    let rx_thread = std::thread::spawn(move || receiver::receive(rx_cfg));

    // Wait for the simulator (the firmware exits after its frames), killing it at the deadline.
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return fail(format!("waiting for gapy: {e}")),
        }
    };
    // Give the receiver a moment for the last bytes, then stop it.
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let log = log_thread.join().unwrap_or_default();
    let rx = match rx_thread.join() {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return fail(e),
        Err(_) => return fail("the receiver thread panicked"),
    };
    let wall = t0.elapsed().as_secs_f64();
    match status {
        None => eprintln!(
            "gvsoc-e2e: the simulation did not end within {} s: killed",
            a.timeout
        ),
        Some(s) if !s.success() => eprintln!("gvsoc-e2e: the simulation exited with {s}"),
        Some(_) => {}
    }
    if let Some(h) = &rx.handshake {
        println!("gvsoc-e2e: handshake {h}");
    }
    println!(
        "gvsoc-e2e: receiver counters: tag failures {}, replays {}, lost {}, rejected messages {}",
        rx.tag_failures, rx.replays, rx.lost, rx.rejected
    );
    let received: Vec<Vec<u8>> = rx
        .frames
        .iter()
        .filter(|f| f.authenticated || suite == Suite::None)
        .map(|f| f.pixels.clone())
        .collect();
    let out_dir = work.join("received");
    let _ = std::fs::create_dir_all(&out_dir);
    for entry in std::fs::read_dir(&out_dir).into_iter().flatten().flatten() {
        // What an earlier run left.
        let _ = std::fs::remove_file(entry.path());
    }
    for (i, f) in rx.frames.iter().enumerate() {
        let ext = match f.pixel_format {
            3 => "jpg",
            4 => "jls",
            _ => "pgm",
        };
        let path = out_dir.join(format!("frame{i}_seq{}.{ext}", f.seq));
        if ext != "pgm" {
            let _ = std::fs::write(path, &f.pixels);
        } else if usize::from(f.width) * usize::from(f.height) == f.pixels.len() {
            let _ = std::fs::write(
                path,
                pgm::encode(f.width.into(), f.height.into(), &f.pixels),
            );
        }
    }
    let n_in = inputs.len();
    let (w, h) = (pgm::WIDTH as u16, pgm::HEIGHT as u16);
    let mut decode_failures = 0usize;
    let matches = match a.codec.as_str() {
        "jpeg" => {
            // The files at the built-in quality, then (SET_QUALITY) at the requested one: a
            // match's index modulo the inputs is the input, its quotient the quality.
            let qualities: Vec<u8> = std::iter::once(a.quality).chain(a.set_quality).collect();
            let mut expected = Vec::new();
            for &q in &qualities {
                match coded::expected_jpeg(&inputs, w, h, q, a.bands) {
                    Ok(e) => expected.extend(e),
                    Err(e) => return fail(format!("the host JPEG encoder: {e}")),
                }
            }
            let at = report::match_frames(&expected, &received);
            let mut psnrs = Vec::new();
            for (k, (f, m)) in received.iter().zip(&at).enumerate() {
                match coded::decode_jpeg(f, w, h) {
                    Ok(px) => {
                        if let Some(i) = m {
                            psnrs.push(coded::psnr(&inputs[*i % n_in], &px));
                        }
                    }
                    Err(e) => {
                        decode_failures += 1;
                        eprintln!("gvsoc-e2e: error: verified frame {k} does not decode: {e}");
                    }
                }
            }
            let mean = psnrs.iter().sum::<f64>() / psnrs.len().max(1) as f64;
            println!(
                "gvsoc-e2e: jpeg: {} of {} verified frames decoded by jpeg-decoder, {} byte-identical to the host encoder's file of their input (quality {}, {} bands); mean PSNR {mean:.2} dB",
                received.len() - decode_failures,
                received.len(),
                at.iter().filter(|m| m.is_some()).count(),
                qualities
                    .iter()
                    .map(u8::to_string)
                    .collect::<Vec<_>>()
                    .join(" then "),
                a.bands
            );
            if let (Some(q), Some(after)) = (a.set_quality, rx.quality_requested_after) {
                let quality_of: Vec<Option<u8>> =
                    at.iter().map(|m| m.map(|i| qualities[i / n_in])).collect();
                let first = quality_of.iter().position(|&x| x == Some(q));
                let old_after = first.map_or(0, |f| {
                    quality_of[f..]
                        .iter()
                        .filter(|&&x| x == Some(a.quality))
                        .count()
                });
                println!(
                    "gvsoc-e2e: SET_QUALITY {q} sent after frame {after}: frames {} at quality {}, {} at quality {q}{}",
                    quality_of.iter().filter(|&&x| x == Some(a.quality)).count(),
                    a.quality,
                    quality_of.iter().filter(|&&x| x == Some(q)).count(),
                    first.map_or(String::new(), |f| format!(" (from frame {f} on)")),
                );
                if first.is_none() || old_after > 0 {
                    decode_failures += 1;
                    eprintln!(
                        "gvsoc-e2e: error: SET_QUALITY {q}: the firmware did not switch to it for good ({old_after} frames at {} after the first at {q})",
                        a.quality
                    );
                }
            } else if a.set_quality.is_some() {
                decode_failures += 1;
                eprintln!("gvsoc-e2e: error: SET_QUALITY was never sent (too few frames)");
            }
            at.into_iter().map(|m| m.map(|i| i % n_in)).collect()
        }
        "jpegls" => {
            let (expected, expected_bands) = match coded::expected_jpegls(&inputs, w, h, a.bands) {
                Ok(e) => e,
                Err(e) => return fail(format!("the host JPEG-LS encoder: {e}")),
            };
            let matched = report::match_frames(&expected, &received);
            // Bands of each byte-identical frame (the plan the firmware's BandChooser took from
            // the frame itself, the host's rule: the only stream expected for its input).
            let mut band_counts: Vec<(usize, usize)> = Vec::new();
            for b in matched.iter().flatten().map(|&i| expected_bands[i]) {
                match band_counts.iter_mut().find(|(n, _)| *n == b) {
                    Some((_, c)) => *c += 1,
                    None => band_counts.push((b, 1)),
                }
            }
            band_counts.sort_unstable_by_key(|x| std::cmp::Reverse(x.0));
            let bands = band_counts
                .iter()
                .map(|(b, c)| format!("{c} in {b} bands"))
                .collect::<Vec<_>>()
                .join(", ");
            let mut at: Vec<Option<usize>> = matched.iter().map(|m| m.map(|i| i % n_in)).collect();
            let formats: Vec<u8> = rx
                .frames
                .iter()
                .filter(|f| f.authenticated || suite == Suite::None)
                .map(|f| f.pixel_format)
                .collect();
            let (mut exact, mut raw) = (0usize, 0usize);
            for (k, (f, m)) in received.iter().zip(at.iter_mut()).enumerate() {
                if formats[k] == gapstream_protocol::wire::PixelFormat::Grey8.code() {
                    // A frame whose code did not fit the firmware's coded buffer goes out raw
                    // (counted there, coder_errors=): lossless too, checked byte for byte.
                    raw += 1;
                    *m = inputs.iter().position(|i| i == f);
                    if m.is_some() {
                        exact += 1;
                    } else {
                        decode_failures += 1;
                        eprintln!("gvsoc-e2e: error: raw frame {k} is no input frame");
                    }
                    continue;
                }
                match coded::decode_jpegls(f, w, h) {
                    Ok(px) => {
                        if inputs.contains(&px) {
                            exact += 1;
                        } else {
                            decode_failures += 1;
                            eprintln!(
                                "gvsoc-e2e: error: verified frame {k} decodes to no input frame (lossless)"
                            );
                        }
                        if m.is_some_and(|i| inputs[i] != px) {
                            decode_failures += 1;
                            eprintln!(
                                "gvsoc-e2e: error: verified frame {k} does not decode to its input"
                            );
                        }
                    }
                    Err(e) => {
                        decode_failures += 1;
                        eprintln!("gvsoc-e2e: error: verified frame {k} does not decode: {e}");
                    }
                }
            }
            // The rule, frame by frame: each coded frame must be byte for byte the host's stream
            // of its input with the plan the host's chooser takes from that input (so the
            // firmware took the same plan); the plans are listed in order.
            let mut off_rule = 0usize;
            let mut plans = Vec::new();
            for (k, f) in received.iter().enumerate() {
                if formats[k] == gapstream_protocol::wire::PixelFormat::Grey8.code() {
                    plans.push("raw".to_string());
                    continue;
                }
                match matched[k] {
                    Some(i) => plans.push(expected_bands[i].to_string()),
                    None => {
                        off_rule += 1;
                        plans.push("?".into());
                        let input = coded::decode_jpegls(f, w, h)
                            .ok()
                            .and_then(|px| inputs.iter().position(|i| *i == px));
                        eprintln!(
                            "gvsoc-e2e: error: coded frame {k} ({} B) is not the host's stream of its input (input {input:?}) with the plan the rule takes from it ({} bands)",
                            f.len(),
                            input.map_or("?".into(), |i| expected_bands[i].to_string())
                        );
                    }
                }
            }
            decode_failures += off_rule;
            println!(
                "gvsoc-e2e: jpegls: {} of {} verified frames bit-exact to an input frame ({} JPEG-LS decoded by gapstream_jpegls, {} byte-identical to the host encoder's stream of their input with the plan chosen from the frame itself: {bands}; {raw} sent raw: their code did not fit the coded buffer)",
                exact,
                received.len(),
                received.len() - raw,
                at.iter()
                    .zip(&formats)
                    .filter(|(m, f)| m.is_some() && **f != 0)
                    .count(),
            );
            println!(
                "gvsoc-e2e: jpegls: bands per frame, in order (the host's rule from each frame; {off_rule} off it): {}",
                plans.join(",")
            );
            if let Some(py) = &a.charls_python {
                match charls_check(py, &out_dir, &inputs_dir) {
                    Ok((ok, n)) => {
                        println!(
                            "gvsoc-e2e: jpegls: {ok} of {n} received frames decoded bit-exact to an input frame by CharLS (imagecodecs)"
                        );
                        if ok != n || n + raw != received.len() {
                            decode_failures += 1;
                            eprintln!(
                                "gvsoc-e2e: error: CharLS decoded {ok} of {n} frames bit-exact"
                            );
                        }
                    }
                    Err(e) => {
                        decode_failures += 1;
                        eprintln!("gvsoc-e2e: error: CharLS check: {e}");
                    }
                }
            }
            at
        }
        _ => report::match_frames(&inputs, &received),
    };
    if a.codec != "raw" {
        let padded = rx.frames.iter().filter(|f| f.padded).count();
        let coded: Vec<usize> = received.iter().map(Vec::len).collect();
        let mean = coded.iter().sum::<usize>() as f64 / coded.len().max(1) as f64;
        println!(
            "gvsoc-e2e: padding: {padded} of {} frames padded inside the AEAD; coded payload mean {mean:.0} B (min {}, max {}), {} B of wire per frame with the padding and framing",
            rx.frames.len(),
            coded.iter().min().unwrap_or(&0),
            coded.iter().max().unwrap_or(&0),
            receiver::bytes_per_frame(&rx.frames).map_or("-".into(), |b| format!("{b:.0}")),
        );
    }
    let payload_bytes = (!received.is_empty())
        .then(|| received.iter().map(|f| f.len() as f64).sum::<f64>() / received.len() as f64);
    let fw = report::FwSummary::parse(&log);
    let standin = report::StandinSummary::parse(&log);
    let frames: Vec<receiver::Received> = rx
        .frames
        .iter()
        .filter(|f| f.authenticated || suite == Suite::None)
        .cloned()
        .collect();
    let boot = (a.expect_boot.is_some() || a.replay_session.is_some()).then(|| {
        let mut b = report::BootCheck {
            expect: a.expect_boot,
            rx_boot: rx.drone_boot,
            replay: rx.replay.clone(),
            ..report::BootCheck::default()
        };
        b.parse_fw(&log);
        b
    });
    let states: Vec<_> = frames.iter().map(|f| f.state).collect();
    let ri = report::Inputs {
        matches: &matches,
        fw: fw.as_ref(),
        spi: report::SpiClocks::parse(&log),
        standin,
        suite: suite.name(),
        wifi: report::Wifi {
            mbps: a.wifi_mbps,
            bytes_per_frame: receiver::bytes_per_frame(&frames),
        },
        boot: boot.as_ref(),
        states: &states,
        uart: report::UartStats::parse(&log),
        codec: report::Codec {
            name: &a.codec,
            quality: if a.codec == "jpeg" {
                a.set_quality.unwrap_or(a.quality)
            } else {
                0
            },
            bytes_per_frame: payload_bytes,
            raw_bytes: pgm::WIDTH * pgm::HEIGHT,
        },
    };
    let (text, ok) = report::verdict(
        &ri,
        report::Criteria {
            min_frames: a.min_frames,
            max_ratio: a.max_ratio,
            min_fps: a.min_fps,
            wifi_share: a.wifi_share,
            min_gap8_fps: a.min_gap8_fps,
            max_period_over_send: a.max_period_over_send,
            max_up_hz: a.max_up_hz,
            min_down_hz: a.min_down_hz,
            max_state_age_ms: a.max_state_age_ms,
        },
    );
    print!("{text}");
    println!(
        "gvsoc-e2e: wall-clock {wall:.1} s; received frames in {}",
        out_dir.display()
    );
    let fw_ok = report::fields(&log, "FW exit ")
        .is_some_and(|f| f.get("status").map(String::as_str) == Some("0"));
    if !fw_ok {
        eprintln!("gvsoc-e2e: error: the firmware did not exit with status 0");
    }
    let coded_frames = rx
        .frames
        .iter()
        .filter(|f| (f.authenticated || suite == Suite::None) && f.pixel_format != 0)
        .count();
    let coded_ok = coded_frames >= a.min_coded;
    if a.codec != "raw" {
        println!(
            "gvsoc-e2e: {}: {coded_frames} of {} verified frames coded, {} sent raw (the firmware's coder_errors)",
            if coded_ok { "ok" } else { "FAIL" },
            received.len(),
            received.len() - coded_frames
        );
    }
    let passed =
        ok && coded_ok && fw_ok && decode_failures == 0 && status.is_some_and(|s| s.success());
    println!("{}", report::summary_line(&ri));
    if a.expect_miso_corruption {
        let corrupted = standin.map_or(0, |s| s.miso_corrupted_bits);
        return if corrupted > 0 && !passed {
            println!(
                "gvsoc-e2e: negative check ok: with MISO clocked above 7.2 MHz the stand-in corrupted {corrupted} bits and the stream failed, as it would on an AI-deck"
            );
            ExitCode::SUCCESS
        } else {
            fail(format!(
                "negative check: expected the stand-in to corrupt MISO and the run to fail (corrupted bits {corrupted}, run {})",
                if passed { "passed" } else { "failed" }
            ))
        };
    }
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
