//! Live web viewer on localhost: one HTML page, `/frame.png` (the latest verified frame; RGGB
//! mosaics are demosaiced when asked), `/stats.json` (fps, latency, loss, tag failures, suite, key
//! epoch). Plain HTTP/1.1 through `tiny_http`; the page uses only `<img>` reloads and `fetch`, so it
//! works in any current Chromium or Firefox.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use crate::images;

const PAGE: &str = include_str!("viewer.html");

/// The latest frame the receiver verified.
#[derive(Clone)]
pub struct Frame {
    pub seq: u64,
    pub width: usize,
    pub height: usize,
    pub pixels: Arc<Vec<u8>>,
}

/// Everything the page shows, as the receiver last published it.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    pub connection: String,
    pub suite: String,
    pub transport: String,
    pub key_epoch: u64,
    pub seq: Option<u64>,
    pub fps: f64,
    pub goodput_mbps: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub image_latency_ms: Option<f64>,
    pub frames: u64,
    pub lost: u64,
    pub tag_failures: u64,
    pub replays: u64,
    pub handshakes: u64,
    pub rekeys: u64,
    pub last_error: Option<String>,
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v:.3}"),
        _ => "null".into(),
    }
}

impl Stats {
    pub fn to_json(&self) -> String {
        format!(
            concat!(
                "{{\"connection\":{},\"suite\":{},\"transport\":{},\"key_epoch\":{},\"seq\":{},",
                "\"fps\":{},\"goodput_mbps\":{},\"latency_p50_ms\":{},\"latency_p95_ms\":{},",
                "\"image_latency_ms\":{},\"frames\":{},\"lost\":{},\"tag_failures\":{},\"replays\":{},",
                "\"handshakes\":{},\"rekeys\":{},\"last_error\":{}}}"
            ),
            json_str(&self.connection),
            json_str(&self.suite),
            json_str(&self.transport),
            self.key_epoch,
            self.seq
                .map(|s| s.to_string())
                .unwrap_or_else(|| "null".into()),
            json_num(Some(self.fps)),
            json_num(Some(self.goodput_mbps)),
            json_num(self.latency_p50_ms),
            json_num(self.latency_p95_ms),
            json_num(self.image_latency_ms),
            self.frames,
            self.lost,
            self.tag_failures,
            self.replays,
            self.handshakes,
            self.rekeys,
            self.last_error
                .as_deref()
                .map(json_str)
                .unwrap_or_else(|| "null".into()),
        )
    }
}

/// A frame's PNG, tagged with its sequence number.
type EncodedPng = (u64, Arc<Vec<u8>>);

/// Shared between the receiver (publishes) and the HTTP threads (serve).
pub struct ViewerState {
    bayer: bool,
    /// The latest frame and the PNG encoded for it (by sequence number).
    frame: Mutex<(Option<Frame>, Option<EncodedPng>)>,
    new_frame: Condvar,
    stats: Mutex<Stats>,
}

impl ViewerState {
    /// `bayer`: demosaic frames as RGGB before showing them.
    pub fn new(bayer: bool) -> Arc<Self> {
        Arc::new(ViewerState {
            bayer,
            frame: Mutex::new((None, None)),
            new_frame: Condvar::new(),
            stats: Mutex::new(Stats {
                connection: "starting".into(),
                ..Default::default()
            }),
        })
    }

    pub fn publish_frame(&self, f: Frame) {
        let mut g = self.frame.lock().unwrap_or_else(|e| e.into_inner());
        g.0 = Some(f);
        self.new_frame.notify_all();
    }

    pub fn update_stats(&self, update: impl FnOnce(&mut Stats)) {
        update(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The latest frame as PNG (encoded once per frame), waiting up to `wait` for the first one.
    pub fn frame_png(&self, wait: Duration) -> Option<(u64, Arc<Vec<u8>>)> {
        let g = self.frame.lock().unwrap_or_else(|e| e.into_inner());
        let (g, _) = self
            .new_frame
            .wait_timeout_while(g, wait, |g| g.0.is_none())
            .unwrap_or_else(|e| e.into_inner());
        let f = g.0.clone()?;
        if let Some((seq, png)) = &g.1
            && *seq == f.seq
        {
            return Some((*seq, png.clone()));
        }
        drop(g);
        let png = if self.bayer && f.width >= 2 && f.height >= 2 {
            images::encode_png(
                f.width,
                f.height,
                3,
                &images::demosaic_rggb(&f.pixels, f.width, f.height),
            )
        } else {
            images::encode_png(f.width, f.height, 1, &f.pixels)
        };
        let png = Arc::new(png.ok()?);
        let mut g = self.frame.lock().unwrap_or_else(|e| e.into_inner());
        g.1 = Some((f.seq, png.clone()));
        Some((f.seq, png))
    }
}

/// A running viewer server; dropped = stopped.
pub struct Viewer {
    server: Arc<tiny_http::Server>,
    threads: Vec<thread::JoinHandle<()>>,
    addr: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot serve the viewer on {addr}: {why}")]
pub struct ViewerError {
    pub addr: String,
    pub why: String,
}

impl Viewer {
    /// Serves on `addr` (port 0 picks a free port) with a few worker threads.
    pub fn start(addr: &str, state: Arc<ViewerState>) -> Result<Self, ViewerError> {
        let server = tiny_http::Server::http(addr).map_err(|e| ViewerError {
            addr: addr.into(),
            why: e.to_string(),
        })?;
        let local = server.server_addr().to_ip().ok_or_else(|| ViewerError {
            addr: addr.into(),
            why: "not an IP socket".into(),
        })?;
        let server = Arc::new(server);
        let threads = (0..4)
            .map(|_| {
                let (server, state) = (server.clone(), state.clone());
                thread::spawn(move || {
                    while let Ok(req) = server.recv() {
                        handle(req, &state);
                    }
                })
            })
            .collect();
        Ok(Viewer {
            server,
            threads,
            addr: local,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        for _ in 0..self.threads.len() {
            self.server.unblock();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn header(k: &str, v: &str) -> tiny_http::Header {
    tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("static header is valid")
}

fn handle(req: tiny_http::Request, state: &ViewerState) {
    let path = req.url().split('?').next().unwrap_or("/").to_owned();
    let no_store = header("Cache-Control", "no-store");
    let resp = match path.as_str() {
        "/" | "/index.html" => tiny_http::Response::from_data(PAGE.as_bytes().to_vec())
            .with_header(header("Content-Type", "text/html; charset=utf-8")),
        "/stats.json" => tiny_http::Response::from_data(state.stats().to_json().into_bytes())
            .with_header(header("Content-Type", "application/json")),
        "/frame.png" => match state.frame_png(Duration::from_secs(3)) {
            Some((seq, png)) => tiny_http::Response::from_data(png.as_ref().clone())
                .with_header(header("Content-Type", "image/png"))
                .with_header(header("X-Frame-Seq", &seq.to_string())),
            None => tiny_http::Response::from_data(b"no frame yet".to_vec()).with_status_code(503),
        },
        _ => tiny_http::Response::from_data(b"not found".to_vec()).with_status_code(404),
    };
    let _ = req.respond(resp.with_header(no_store));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(addr: SocketAddr, path: &str) -> (String, Vec<u8>) {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        (
            String::from_utf8_lossy(&buf[..split]).into_owned(),
            buf[split + 4..].to_vec(),
        )
    }

    #[test]
    fn serves_page_stats_and_frames() {
        let state = ViewerState::new(false);
        let v = Viewer::start("127.0.0.1:0", state.clone()).unwrap();
        let (h, body) = get(v.addr(), "/");
        assert!(h.starts_with("HTTP/1.1 200"), "{h}");
        assert!(String::from_utf8_lossy(&body).contains("/stats.json"));
        state.update_stats(|s| {
            s.suite = "chacha20-poly1305".into();
            s.last_error = Some("say \"hi\"".into());
        });
        let (_, body) = get(v.addr(), "/stats.json");
        let j = String::from_utf8(body).unwrap();
        assert!(
            j.contains("\"suite\":\"chacha20-poly1305\"") && j.contains("say \\\"hi\\\""),
            "{j}"
        );
        state.publish_frame(Frame {
            seq: 5,
            width: 3,
            height: 2,
            pixels: Arc::new(vec![0, 50, 100, 150, 200, 250]),
        });
        let (h, body) = get(v.addr(), "/frame.png?n=1");
        assert!(
            h.contains("image/png") && h.to_ascii_lowercase().contains("x-frame-seq: 5"),
            "{h}"
        );
        let g = images::parse_png(&body).unwrap();
        assert_eq!(g.pixels, vec![0, 50, 100, 150, 200, 250]);
        assert!(get(v.addr(), "/nope").0.contains("404"));
    }

    #[test]
    fn bayer_frames_are_served_in_colour() {
        let state = ViewerState::new(true);
        state.publish_frame(Frame {
            seq: 1,
            width: 4,
            height: 4,
            pixels: Arc::new(vec![200; 16]),
        });
        let (_, png) = state.frame_png(Duration::ZERO).unwrap();
        let mut dec = png::Decoder::new(std::io::BufReader::new(std::io::Cursor::new(
            png.as_ref().clone(),
        )));
        dec.set_transformations(png::Transformations::normalize_to_color8());
        let r = dec.read_info().unwrap();
        assert_eq!(r.info().color_type, png::ColorType::Rgb);
    }
}
