//! The live viewer in real browsers: headless Chromium (Debian's `chromium`) and headless Firefox
//! (Debian's `firefox-esr`), both installed by `scripts/setup.sh` from `scripts/setup.d/stream.apt`,
//! load the page, and each screenshot must show the frame pushed over the page's WebSocket: the test
//! finds the frame in the screenshot's pixels and reads the frame number burned into it back out,
//! and checks that the page asked for no PNG (no polling). Each browser starts with
//! a fresh profile and needs no network (the page and the frame come from 127.0.0.1).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use gapstream::receiver::frame::test_frame;
use gapstream::viewer::{Viewer, ViewerState};
use gapstream_drone::testpattern::{self, Stamp};

/// RGB screenshot.
struct Shot {
    w: usize,
    h: usize,
    rgb: Vec<u8>,
}

fn load_rgb(p: &Path) -> Shot {
    let bytes = std::fs::read(p).unwrap();
    let mut dec = png::Decoder::new(std::io::BufReader::new(std::io::Cursor::new(bytes)));
    dec.set_transformations(png::Transformations::normalize_to_color8());
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    let ch = match info.color_type {
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        c => panic!("unexpected screenshot colour type {c:?}"),
    };
    let rgb = buf[..info.buffer_size()]
        .chunks(ch)
        .flat_map(|p| [p[0], p[1], p[2]])
        .collect();
    Shot {
        w: info.width as usize,
        h: info.height as usize,
        rgb,
    }
}

/// Headless Firefox ESR: `--screenshot` waits for the page's load event (the page holds it with a
/// load gate until its first pushed frame is drawn).
/// What a browser run left: its exit status (None: killed after the time limit) and stderr.
pub struct Ran {
    pub status: Option<std::process::ExitStatus>,
    pub stderr: Vec<u8>,
}

/// The file ends with PNG's IEND chunk (a browser on a loaded machine may pause for more than the
/// poll interval while writing its screenshot).
fn complete_png(p: &Path) -> bool {
    const IEND: [u8; 12] = [0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82];
    std::fs::read(p).is_ok_and(|b| b.ends_with(&IEND))
}

/// Runs a headless browser for at most `limit` of wall clock (a loaded machine once left headless
/// Chromium hanging after its screenshot): stops waiting as soon as the screenshot exists and has
/// stayed the same size for a moment, then kills what is left.
fn run_bounded(cmd: &mut Command, out: &Path, missing: &str, limit: Duration) -> Ran {
    use std::process::Stdio;
    use std::time::Instant;
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect(missing);
    let mut stderr = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stderr, &mut v);
        v
    });
    let t0 = Instant::now();
    let mut last_len = None;
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        let len = std::fs::metadata(out)
            .map(|m| m.len())
            .ok()
            .filter(|&n| n > 0);
        if len.is_some() && len == last_len && complete_png(out) {
            break None; // the screenshot is written; the browser only lingers
        }
        last_len = len;
        if t0.elapsed() > limit {
            break None;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ran {
        status,
        stderr: reader.join().unwrap_or_default(),
    }
}

/// Screenshots with a browser started by `launch(profile)`, at most 3 attempts of 45 s each, every
/// one with a fresh profile: headless Chromium now and then never writes its screenshot on a busy
/// machine (a run normally takes ~7 s), which is the browser's start-up, not the page under test.
/// Panics with every attempt's status and stderr if none wrote one.
fn screenshot(
    name: &str,
    out: &Path,
    profile: &Path,
    missing: &str,
    launch: impl Fn(&Path) -> Command,
) {
    let mut tried = String::new();
    for attempt in 1..=3 {
        let _ = std::fs::remove_file(out);
        let dir = profile.join(format!("attempt{attempt}"));
        std::fs::create_dir_all(&dir).unwrap();
        let ran = run_bounded(&mut launch(&dir), out, missing, Duration::from_secs(45));
        if complete_png(out) {
            return;
        }
        tried.push_str(&format!(
            "attempt {attempt}: {:?}\n{}\n",
            ran.status,
            String::from_utf8_lossy(&ran.stderr)
        ));
    }
    panic!("{name} wrote no screenshot in 3 attempts of 45 s:\n{tried}");
}

pub fn run_firefox(url: &str, out: &Path, profile: &Path) {
    let missing = "Debian's `firefox-esr` must be installed (make setup installs it from scripts/setup.d/stream.apt)";
    screenshot("firefox", out, profile, missing, |profile| {
        let mut c = Command::new("firefox-esr");
        c.args(["--headless", "--no-remote", "--profile"])
            .arg(profile)
            .args(["--window-size", "1100,620", "--screenshot"])
            .arg(out)
            .arg(url)
            .env("MOZ_DISABLE_AUTO_SAFE_MODE", "1");
        c
    });
}

pub fn run_chromium(url: &str, out: &Path, profile: &Path) {
    let missing = "Debian's `chromium` must be installed (make setup installs it from scripts/setup.d/stream.apt)";
    screenshot("chromium", out, profile, missing, |profile| {
        let mut c = Command::new("chromium");
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
            "--window-size=1100,620",
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", out.display()))
        .arg(url);
        c
    });
}

#[test]
fn headless_chromium_shows_a_decoded_frame() {
    shows_a_decoded_frame("chromium", run_chromium, 1234, false);
}

#[test]
fn headless_firefox_shows_a_decoded_frame() {
    shows_a_decoded_frame("firefox", run_firefox, 4321, false);
}

/// A JPEG frame goes to the page as the verified file and the browser's own decoder shows it.
#[test]
fn headless_chromium_shows_a_jpeg_frame_from_its_file() {
    shows_a_decoded_frame("chromium", run_chromium, 2345, true);
}

#[test]
fn headless_firefox_shows_a_jpeg_frame_from_its_file() {
    shows_a_decoded_frame("firefox", run_firefox, 5432, true);
}

/// Largest difference between a browser's decoding of the drone's JPEG and the receiver's
/// (`jpeg-decoder`), in grey levels: two IDCT implementations of the same file (both browsers
/// decode with libjpeg-turbo), each rounding its own way. Measured: 1 (Chromium and Firefox ESR of
/// Debian 12, about 2.5 % of the pixels off by 1, the rest equal).
const JPEG_DECODERS_DIFFER_BY: u8 = 2;

/// Serves one frame stamped `frame`, screenshots the page with `browser` and finds the frame in it.
/// `jpeg`: the frame is the drone's JPEG file (quality 90), sent to the page as is; the screenshot
/// must show the receiver's decoding of that file within [`JPEG_DECODERS_DIFFER_BY`].
fn shows_a_decoded_frame(name: &str, browser: fn(&str, &Path, &Path), frame: u32, jpeg: bool) {
    let state = ViewerState::new(false);
    let v = Viewer::start("127.0.0.1:0", state.clone()).unwrap();
    let mut pixels = vec![0u8; 324 * 244];
    let stamp = Stamp {
        frame,
        capture_ns: 5_000_000_000,
    };
    testpattern::render(&mut pixels, 324, 244, stamp).unwrap();
    let mut f = test_frame(frame as u64, 324, 244, pixels.clone());
    if jpeg {
        use gapstream::codec::{self, Codec, HostCoder};
        use gapstream_drone::{FrameCoder, FrameFormat, PixelFormat};
        let mut file = Vec::new();
        let coded = HostCoder::new(Codec::Jpeg, 90)
            .code(FrameFormat::HM01B0, &pixels, &mut file)
            .unwrap();
        assert_eq!(coded, Some(PixelFormat::Jpeg));
        // What the receiver delivers: its own decoding as the samples, the file as verified.
        pixels = codec::decode(PixelFormat::Jpeg, 324, 244, &file)
            .unwrap()
            .unwrap();
        f = test_frame(frame as u64, 324, 244, pixels.clone());
        f.header.pixel_format = PixelFormat::Jpeg.code();
        f.coded = Some(Arc::from(file));
        let m = state.frame_message(&f).unwrap();
        assert_eq!(&m[..4], b"GSJ1", "the page gets the file");
        assert_eq!(&m[20..], f.coded.as_deref().unwrap());
    }
    state.publish_frame(Arc::new(f));
    state.update_stats(|s| {
        s.connection = "streaming".into();
        s.suite = "chacha20poly1305".into();
    });
    let d = tempfile::tempdir().unwrap();
    let shot_path = d.path().join("shot.png");
    let t0 = std::time::Instant::now();
    browser(&v.url(), &shot_path, &d.path().join("profile"));
    eprintln!("{name}: screenshot in {:.1} s", t0.elapsed().as_secs_f64());
    let shot = load_rgb(&shot_path);
    assert!(
        state.frames_pushed() >= 1,
        "{name}: no frame was pushed over the WebSocket"
    );
    assert_eq!(state.png_served(), 0, "{name}: the page requested a PNG");
    // The frame is scaled to the window by whole multiples: 2x (648 x 488) in 1100 x 620. Find its top-left corner: the first pixel from which
    // sampling every second pixel gives back a frame whose burned-in stamp decodes.
    let mut found = None;
    'search: for y0 in 0..shot.h.saturating_sub(488) {
        for x0 in 0..shot.w.saturating_sub(648).min(200) {
            // Quick reject on two pixels of the code strip before sampling the whole crop.
            let grey = |x: usize, y: usize| shot.rgb[(y * shot.w + x) * 3];
            if grey(x0 + 2 * 11, y0 + 2 * 8).abs_diff(pixels[8 * 324 + 11]) > 40
                || grey(x0 + 2 * 17, y0 + 2 * 8).abs_diff(pixels[8 * 324 + 17]) > 40
            {
                continue;
            }
            let mut crop = vec![0u8; 324 * 244];
            for y in 0..244 {
                for x in 0..324 {
                    crop[y * 324 + x] = grey(x0 + 2 * x, y0 + 2 * y);
                }
            }
            if let Some(s) = testpattern::decode(&crop, 324, 244) {
                found = Some((x0, y0, s, crop));
                break 'search;
            }
        }
    }
    // GAPSTREAM_KEEP_SCREENSHOT=FILE keeps Chromium's screenshot (docs/img/viewer.png).
    let keep = std::env::var_os("GAPSTREAM_KEEP_SCREENSHOT").filter(|_| name == "chromium");
    if let Some(k) = &keep {
        std::fs::copy(&shot_path, k).unwrap();
    }
    let (x0, y0, s, _) = found.unwrap_or_else(|| {
        panic!(
            "{name}: no decoded frame in the screenshot ({}x{})",
            shot.w, shot.h
        )
    });
    assert_eq!(s, stamp, "frame found at ({x0},{y0}) carries another stamp");
    // And the picture itself is the frame, not just its stamp: at the exact 2x offset (the search
    // stops at the first offset whose sampling decodes, which may be a pixel early) nearly every
    // pixel matches.
    // The search stops at the first offset whose sampling decodes; the exact 2x origin is within
    // a code block (12 x 16 screen pixels) of it. Pick the origin where the most pixels match.
    let matches = |ox: usize, oy: usize, step: usize| {
        (0..244)
            .step_by(step)
            .flat_map(|y| (0..324).step_by(step).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                let (sx, sy) = (ox + 2 * x, oy + 2 * y);
                sx < shot.w
                    && sy < shot.h
                    && shot.rgb[(sy * shot.w + sx) * 3].abs_diff(pixels[y * 324 + x]) <= 8
            })
            .count()
    };
    let (bx, by) = (x0.saturating_sub(12)..x0 + 12)
        .flat_map(|x| (y0.saturating_sub(16)..y0 + 16).map(move |y| (x, y)))
        .max_by_key(|&(x, y)| matches(x, y, 5))
        .unwrap();
    let best = matches(bx, by, 1);
    assert!(
        best * 100 >= 99 * pixels.len(),
        "only {best} of {} pixels match",
        pixels.len()
    );
    if jpeg {
        // The browser's decoding of the file against the receiver's, pixel for pixel.
        let mut hist = [0usize; 256];
        for y in 0..244 {
            for x in 0..324 {
                let (sx, sy) = (bx + 2 * x, by + 2 * y);
                let got = shot.rgb[(sy * shot.w + sx) * 3];
                hist[got.abs_diff(pixels[y * 324 + x]) as usize] += 1;
            }
        }
        let worst = hist.iter().rposition(|&n| n > 0).unwrap_or(0);
        eprintln!(
            "{name}: JPEG decoded by the browser vs the receiver: {} of {} pixels equal, {} off by 1, {} by 2, {} by 3, worst {worst}",
            hist[0],
            pixels.len(),
            hist[1],
            hist[2],
            hist[3]
        );
        assert!(
            worst <= JPEG_DECODERS_DIFFER_BY as usize,
            "{name}: a pixel differs by {worst} from the receiver's decoding: {:?}",
            &hist[..=worst]
        );
        assert!(
            hist[0] * 100 >= 95 * pixels.len(),
            "{name}: only {} pixels equal the receiver's decoding",
            hist[0]
        );
    }
    drop(v);
    std::thread::sleep(Duration::from_millis(10));
}

/// A ground station's grid: four drones, each frame stamped and labelled with its drone's name.
/// `jpeg`: each frame is the drone's JPEG file (quality 90), which the grid sends as is (`GTJ1`);
/// the pixels returned are then the receiver's decoding of it.
fn grid_state(jpeg: bool) -> (Arc<ViewerState>, Vec<(String, Vec<u8>)>) {
    use gapstream::receiver::bus::Status;
    let state = ViewerState::grid(false);
    let mut drones = Vec::new();
    for i in 0..4u32 {
        let name = format!("drone-{:02}", i + 1);
        let mut px = vec![0u8; 324 * 244];
        let stamp = Stamp {
            frame: 100 + 37 * i,
            capture_ns: 5_000_000_000 + i as u64,
        };
        testpattern::render(&mut px, 324, 244, stamp).unwrap();
        gapstream::images::draw_label(&mut px, 324, 244, name.to_uppercase().as_bytes());
        let mut f = test_frame(stamp.frame as u64, 324, 244, px.clone());
        if jpeg {
            use gapstream::codec::{self, Codec, HostCoder};
            use gapstream_drone::{FrameCoder, FrameFormat, PixelFormat};
            let mut file = Vec::new();
            let coded = HostCoder::new(Codec::Jpeg, 90)
                .code(FrameFormat::HM01B0, &px, &mut file)
                .unwrap();
            assert_eq!(coded, Some(PixelFormat::Jpeg));
            px = codec::decode(PixelFormat::Jpeg, 324, 244, &file)
                .unwrap()
                .unwrap();
            f = test_frame(stamp.frame as u64, 324, 244, px.clone());
            f.header.pixel_format = PixelFormat::Jpeg.code();
            f.coded = Some(Arc::from(file));
        }
        f.source = Arc::from(name.as_str());
        state.publish_frame(Arc::new(f));
        if jpeg {
            let (_, m) = state.tile_message(&name, false).unwrap();
            assert_eq!(&m[..4], b"GTJ1", "the page gets the file");
        }
        state.update_tile(&Status {
            source: name.clone(),
            connection: "streaming".into(),
            suite: "chacha20poly1305 / x25519".into(),
            ..Status::default()
        });
        drones.push((name, px));
    }
    (state, drones)
}

/// Where `want` (`w × h` grey) sits in the screenshot, pixel for pixel (within 8 levels).
fn find_exact(shot: &Shot, want: &[u8], w: usize, h: usize) -> Option<(usize, usize)> {
    let grey = |x: usize, y: usize| shot.rgb[(y * shot.w + x) * 3];
    let probes: Vec<(usize, usize)> = (0..40).map(|k| ((k * 37) % w, (k * 53) % h)).collect();
    for y0 in 0..=shot.h.saturating_sub(h) {
        for x0 in 0..=shot.w.saturating_sub(w) {
            if probes
                .iter()
                .any(|&(x, y)| grey(x0 + x, y0 + y).abs_diff(want[y * w + x]) > 8)
            {
                continue;
            }
            let ok = (0..h)
                .flat_map(|y| (0..w).map(move |x| (x, y)))
                .filter(|&(x, y)| grey(x0 + x, y0 + y).abs_diff(want[y * w + x]) <= 8)
                .count();
            if ok * 100 >= 99 * w * h {
                return Some((x0, y0));
            }
        }
    }
    None
}

/// The grid page in `browser`: every drone's tile at half size (with `jpeg`, drawn from the JPEG
/// file the page decoded and scaled itself), and one drone full size.
fn grid_shows_every_drone(name: &str, browser: fn(&str, &Path, &Path), jpeg: bool) {
    let (state, drones) = grid_state(jpeg);
    let v = Viewer::start("127.0.0.1:0", state.clone()).unwrap();
    let d = tempfile::tempdir().unwrap();
    let shot_path = d.path().join("grid.png");
    browser(&v.url(), &shot_path, &d.path().join("profile"));
    let keep =
        std::env::var_os("GAPSTREAM_KEEP_GRID_SCREENSHOT").filter(|_| name == "chromium" && !jpeg);
    if let Some(k) = &keep {
        std::fs::copy(&shot_path, k).unwrap();
    }
    let shot = load_rgb(&shot_path);
    assert_eq!(state.png_served(), 0, "{name}: the page requested a PNG");
    let mut at = Vec::new();
    for (drone, px) in &drones {
        let (hw, hh, half) = gapstream::viewer::half_size(px, 324, 244, 1);
        let p = find_exact(&shot, &half, hw, hh)
            .unwrap_or_else(|| panic!("{name}: {drone}'s tile is not in the screenshot"));
        at.push(p);
    }
    eprintln!("{name}: tiles at {at:?}");
    // Four different places, in name order along the row.
    assert!(
        at.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 == w[1].1),
        "{at:?}"
    );

    // One drone full size: the page opened with ?focus=drone-03 shows only its frame, at 2x,
    // and its stamp decodes from the screenshot.
    let focus_path = d.path().join("focus.png");
    browser(
        &format!("{}?focus=drone-03", v.url()),
        &focus_path,
        &d.path().join("profile-focus"),
    );
    let shot = load_rgb(&focus_path);
    let want = &drones[2].1;
    let mut crop = vec![0u8; 324 * 244];
    let grey = |x: usize, y: usize| shot.rgb[(y * shot.w + x) * 3];
    let mut found = None;
    'search: for y0 in 0..shot.h.saturating_sub(488) {
        for x0 in 0..shot.w.saturating_sub(648).min(200) {
            if grey(x0 + 2 * 11, y0 + 2 * 8).abs_diff(want[8 * 324 + 11]) > 40 {
                continue;
            }
            for y in 0..244 {
                for x in 0..324 {
                    crop[y * 324 + x] = grey(x0 + 2 * x, y0 + 2 * y);
                }
            }
            if let Some(s) = testpattern::decode(&crop, 324, 244) {
                found = Some(s);
                break 'search;
            }
        }
    }
    let s = found.unwrap_or_else(|| panic!("{name}: no full-size frame in the focused page"));
    assert_eq!(
        s.frame,
        100 + 37 * 2,
        "{name}: the focused page shows another drone"
    );
    drop(v);
}

#[test]
fn headless_chromium_shows_the_ground_stations_grid_and_one_drone_full_size() {
    grid_shows_every_drone("chromium", run_chromium, false);
}

#[test]
fn headless_chromium_shows_a_grid_of_jpeg_files() {
    grid_shows_every_drone("chromium", run_chromium, true);
}

#[test]
fn headless_firefox_shows_a_grid_of_jpeg_files() {
    grid_shows_every_drone("firefox", run_firefox, true);
}

#[test]
fn headless_firefox_shows_the_ground_stations_grid_and_one_drone_full_size() {
    grid_shows_every_drone("firefox", run_firefox, false);
}
