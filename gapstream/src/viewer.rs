//! Live web viewer on localhost: one HTML page that gets every verified frame and the stats pushed
//! over a WebSocket (`/ws`: binary frame messages, JSON stats text messages), draws the frame on a
//! canvas scaled to the window and charts fps and latency. `/stats.json` and `/frame.png` (the
//! latest frame, one request = one picture) stay for scripts and `curl`; the page never polls them.
//!
//! The server is axum on a small tokio runtime owned by the [`Viewer`]: every connection is a task,
//! not a thread, and at most [`MAX_PAGES`] pages are pushed to at once (a further `/ws` upgrade is
//! answered `503`). A slow page is sent the latest frame when it is ready for one; frames in
//! between are skipped for that page only.
//!
//! Frame message (binary, little-endian): `b"GSF1"`, sequence u64, width u16, height u16, channels
//! u8 (1 grey, 3 RGB after RGGB demosaicing), 3 zero bytes, then `width*height*channels` pixels.
//!
//! A JPEG frame goes to the page as the drone coded it, the file that verified (JPEG
//! pass-through): `b"GSJ1"`, sequence u64, width u16, height u16, 4 zero bytes, then the JPEG file;
//! the page decodes it with the browser's own decoder (`createImageBitmap`). The receiver still
//! decodes every JPEG frame (a payload that does not decode is a malformed frame, and the other
//! outputs take the samples), but the viewer neither copies the samples nor sends them: the
//! WebSocket carries the coded bytes (the demo's synthetic pattern at quality 75: 21,017 bytes a
//! frame instead of 79,056; `scripts/viewer_cpu.sh` measures the CPU). JPEG-LS and raw frames go as
//! `GSF1` (browsers have no JPEG-LS decoder). [`ViewerState::set_jpeg_passthrough`] turns it off
//! (`--viewer-pixels`: the page then shows the receiver's decoded samples).
//!
//! A ground station's viewer ([`ViewerState::grid`]) serves a grid page instead: a live tile per
//! drone with its state, fps, loss and latency, and one drone at full size on a click. Its tile
//! messages: `b"GST1"`, sequence u64, width u16, height u16, channels u8, name length u8, 2 zero
//! bytes, the drone's name, the pixels. Tiles are sent at half size (2×2 averages), the drone
//! shown full size at full size; the stats of every drone go as one JSON text message
//! (`{"tiles":[...]}`). Each page gets each tile's newest frame when it is ready for it (at most
//! 20 rounds a second), so a page never holds a backlog of any drone. A JPEG frame goes to the
//! grid as its verified file, like `GSJ1` above: `b"GTJ1"` and the same header (the frame's own
//! width and height, channels 0), the name, then the JPEG file, the same message for a tile and
//! for the full-size view; the page decodes it with `createImageBitmap` and draws it at the
//! tile's half size or at full size (`set_jpeg_passthrough(false)`: `GST1` samples).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::images;

const PAGE: &str = include_str!("viewer.html");
const GRID_PAGE: &str = include_str!("viewer_grid.html");

use crate::metrics::Counters;
use crate::receiver::Frame;
pub use crate::receiver::bus::Status as Stats;
use crate::receiver::bus::{Consumer, Policy, Status};

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

/// The stats message the page gets (one JSON object), from the receiver's status.
pub fn status_json(s: &Status) -> String {
    let c = &s.counters;
    let r = &s.row;
    format!(
        concat!(
            "{{\"source\":{},\"connection\":{},\"suite\":{},\"transport\":{},\"key_epoch\":{},\"seq\":{},",
            "\"fps\":{},\"goodput_mbps\":{},\"latency_p50_ms\":{},\"latency_p95_ms\":{},",
            "\"image_latency_ms\":{},\"frames\":{},\"lost\":{},\"tag_failures\":{},\"replays\":{},",
            "\"handshakes\":{},\"rekeys\":{},\"fec_on\":{},\"fec_recovered\":{},",
            "\"fec_unrecoverable_blocks\":{},\"fec_redundancy_pct\":{},\"drone_state\":{},\"last_error\":{}}}"
        ),
        json_str(&s.source),
        json_str(&s.connection),
        json_str(&s.suite),
        json_str(&s.transport),
        c.key_epoch,
        s.seq
            .map(|s| s.to_string())
            .unwrap_or_else(|| "null".into()),
        json_num(Some(r.fps)),
        json_num(Some(r.goodput_mbps)),
        json_num(r.latency.map(|p| p.p50)),
        json_num(r.latency.map(|p| p.p95)),
        json_num(s.image_latency_ms),
        c.frames,
        c.lost,
        c.tag_failures,
        c.replays,
        c.handshakes,
        c.rekeys,
        c.fec.on,
        c.fec.recovered,
        c.fec.unrecoverable_blocks,
        json_num(Some(c.fec.redundancy_pct)),
        s.state
            .as_deref()
            .map(|t| json_str(t.strip_prefix("state ").unwrap_or(t)))
            .unwrap_or_else(|| "null".into()),
        s.diagnosis
            .as_deref()
            .or(s.last_error.as_deref())
            .map(json_str)
            .unwrap_or_else(|| "null".into()),
    )
}

/// Pages pushed to at once; one more `/ws` upgrade is refused with `503 Service Unavailable`.
pub const MAX_PAGES: usize = 8;

/// How long `/gate/TOKEN` holds its answer waiting for the page to show its first frame.
const GATE_WAIT: Duration = Duration::from_secs(5);

/// A frame's encoding (PNG or WebSocket message), tagged with its sequence number.
type Encoded = Mutex<Option<(u64, Bytes)>>;

/// A chart point: when, fps, latency p50, latency p95.
type Sample = (Instant, f64, Option<f64>, Option<f64>);

/// Shared between the receiver (publishes) and the server's tasks (push and serve).
pub struct ViewerState {
    bayer: bool,
    /// A ground station's grid of drones (else one stream).
    grid: bool,
    /// JPEG frames go to the page as their file (`GSJ1`), not as decoded samples.
    jpeg_passthrough: AtomicBool,
    /// The grid's tiles by drone name, and a counter bumped with every new tile frame.
    tiles: Mutex<std::collections::BTreeMap<String, Tile>>,
    tiles_changed: watch::Sender<u64>,
    /// The latest frame; every page's task waits on it.
    frame: watch::Sender<Option<Arc<Frame>>>,
    png: Encoded,
    message: Encoded,
    stats: Mutex<Stats>,
    /// Frame messages sent to pages, `/frame.png` answers served (the browser tests check that
    /// the page never polls).
    pushed: AtomicU64,
    png_served: AtomicU64,
    /// Pages waiting for their first frame: token -> shown (see the page's load gate).
    gates: Mutex<HashMap<String, Arc<AtomicBool>>>,
    slots: Arc<Semaphore>,
    /// fps, latency p50 and p95 every 0.5 s over the last minute, for a page's chart when it opens.
    history: Mutex<VecDeque<Sample>>,
}

impl ViewerState {
    /// `bayer`: demosaic frames as RGGB before showing them.
    pub fn new(bayer: bool) -> Arc<Self> {
        Self::make(bayer, false)
    }

    /// A ground station's viewer: the grid page, a tile per drone.
    pub fn grid(bayer: bool) -> Arc<Self> {
        Self::make(bayer, true)
    }

    fn make(bayer: bool, grid: bool) -> Arc<Self> {
        Arc::new(ViewerState {
            bayer,
            grid,
            jpeg_passthrough: AtomicBool::new(true),
            tiles: Mutex::new(Default::default()),
            tiles_changed: watch::Sender::new(0),
            frame: watch::Sender::new(None),
            png: Mutex::new(None),
            message: Mutex::new(None),
            stats: Mutex::new(Stats {
                connection: "starting".into(),
                ..Default::default()
            }),
            pushed: AtomicU64::new(0),
            png_served: AtomicU64::new(0),
            gates: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(MAX_PAGES)),
            history: Mutex::new(VecDeque::new()),
        })
    }

    pub fn publish_frame(&self, f: Arc<Frame>) {
        if self.grid {
            self.tiles
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(f.source.to_string())
                .or_default()
                .frame = Some(f.clone());
            self.tiles_changed.send_modify(|n| *n += 1);
        }
        self.frame.send_replace(Some(f));
    }

    /// A drone's status for its tile (grid).
    pub fn update_tile(&self, s: &Status) {
        self.tiles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(s.source.clone())
            .or_default()
            .stats = Some(s.clone());
    }

    /// The grid's stats message: every drone's status as the single page's JSON, by name.
    pub fn tiles_json(&self) -> String {
        let t = self.tiles.lock().unwrap_or_else(|e| e.into_inner());
        let v: Vec<String> = t
            .iter()
            .map(|(name, tile)| match &tile.stats {
                Some(s) => status_json(s),
                None => status_json(&Status {
                    source: name.clone(),
                    connection: "starting".into(),
                    ..Status::default()
                }),
            })
            .collect();
        format!("{{\"tiles\":[{}]}}", v.join(","))
    }

    /// The tile message of `name`'s newest frame, half size (`full`: full size), with the frame's
    /// sequence number; None before its first frame.
    pub fn tile_message(&self, name: &str, full: bool) -> Option<(u64, Bytes)> {
        let f = {
            let t = self.tiles.lock().unwrap_or_else(|e| e.into_inner());
            t.get(name)?.frame.clone()?
        };
        let key = (f.seq(), full);
        if let Some(t) = self
            .tiles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            && let Some((k, b)) = t.cache.iter().find(|(k, _)| *k == key)
        {
            return Some((k.0, b.clone()));
        }
        let name_b = &name.as_bytes()[..name.len().min(255)];
        let tile = |magic: &[u8; 4], w: usize, h: usize, ch: u8, body: &[u8]| {
            let mut m = Vec::with_capacity(20 + name_b.len() + body.len());
            m.extend_from_slice(magic);
            m.extend_from_slice(&f.seq().to_le_bytes());
            m.extend_from_slice(&(w as u16).to_le_bytes());
            m.extend_from_slice(&(h as u16).to_le_bytes());
            m.extend_from_slice(&[ch, name_b.len() as u8, 0, 0]);
            m.extend_from_slice(name_b);
            m.extend_from_slice(body);
            Bytes::from(m)
        };
        let jpeg = self.passthrough_jpeg(&f);
        let both = jpeg.is_some();
        let b = if let Some(jpeg) = jpeg {
            // The verified file as is, for the tile and the full-size view alike (the page
            // scales it); the frame's own size.
            tile(b"GTJ1", f.width(), f.height(), 0, jpeg)
        } else {
            let (ch, px) = self.shown(&f);
            let (w, h, px) = if full {
                (f.width(), f.height(), px)
            } else {
                half_size(&px, f.width(), f.height(), ch)
            };
            tile(b"GST1", w, h, ch as u8, &px)
        };
        if let Some(t) = self
            .tiles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(name)
        {
            // The newest half- and full-size encodings of the tile's newest frame; a JPEG file
            // serves both, so it is built once.
            t.cache
                .retain(|(k, _)| k.0 == key.0 && k.1 != full && !both);
            t.cache.push((key, b.clone()));
            if both {
                t.cache.push(((key.0, !full), b.clone()));
            }
        }
        Some((f.seq(), b))
    }

    /// The names of the tiles, in order.
    pub fn tile_names(&self) -> Vec<String> {
        self.tiles
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    pub fn update_stats(&self, update: impl FnOnce(&mut Stats)) {
        update(&mut self.stats.lock().unwrap_or_else(|e| e.into_inner()));
    }

    pub fn stats(&self) -> Stats {
        self.stats.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Frame messages pushed to pages so far.
    pub fn frames_pushed(&self) -> u64 {
        self.pushed.load(Ordering::Relaxed)
    }

    /// `/frame.png` requests answered so far.
    pub fn png_served(&self) -> u64 {
        self.png_served.load(Ordering::Relaxed)
    }

    /// Pages being pushed to now.
    pub fn pages(&self) -> usize {
        MAX_PAGES - self.slots.available_permits()
    }

    /// Samples the stats into the chart's history (every 0.5 s, one minute kept).
    fn sample(&self) {
        let s = self.stats();
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let p = s.row.latency;
        h.push_back((now, s.row.fps, p.map(|p| p.p50), p.map(|p| p.p95)));
        while h
            .front()
            .is_some_and(|p| now.duration_since(p.0) > Duration::from_secs(60))
        {
            h.pop_front();
        }
    }

    /// `{"history":[[age_s,fps,p50,p95],...]}`, oldest first.
    fn history_json(&self) -> String {
        let h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let rows: Vec<String> = h
            .iter()
            .map(|(t, fps, p50, p95)| {
                format!(
                    "[{:.2},{},{},{}]",
                    now.duration_since(*t).as_secs_f64(),
                    json_num(Some(*fps)),
                    json_num(*p50),
                    json_num(*p95)
                )
            })
            .collect();
        format!("{{\"history\":[{}]}}", rows.join(","))
    }

    fn latest(&self) -> Option<Arc<Frame>> {
        self.frame.borrow().clone()
    }

    /// The frame's pixels as shown: grey, or RGB after demosaicing an RGGB mosaic.
    fn shown(&self, f: &Frame) -> (usize, Vec<u8>) {
        let (w, h) = (f.width(), f.height());
        if (self.bayer || f.is_bayer()) && w >= 2 && h >= 2 {
            (3, images::demosaic_rggb(&f.pixels, w, h))
        } else {
            (1, f.pixels.to_vec())
        }
    }

    /// Encodes `f` once per frame (the cache holds the latest encoding).
    fn cached(
        &self,
        cache: &Encoded,
        f: &Frame,
        encode: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Option<Bytes> {
        if let Some((seq, b)) = &*cache.lock().unwrap_or_else(|e| e.into_inner())
            && *seq == f.seq()
        {
            return Some(b.clone());
        }
        let b = Bytes::from(encode()?);
        *cache.lock().unwrap_or_else(|e| e.into_inner()) = Some((f.seq(), b.clone()));
        Some(b)
    }

    /// The latest frame as PNG, waiting up to `wait` for the first one.
    pub fn frame_png(&self, wait: Duration) -> Option<(u64, Bytes)> {
        let t0 = Instant::now();
        let f = loop {
            if let Some(f) = self.latest() {
                break f;
            }
            if t0.elapsed() >= wait {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let png = self.cached(&self.png, &f, || {
            let (ch, px) = self.shown(&f);
            images::encode_png(f.width(), f.height(), ch, &px).ok()
        })?;
        Some((f.seq(), png))
    }

    /// Whether JPEG frames go to the page as their file (the default) or as the receiver's decoded
    /// samples, like every other frame.
    pub fn set_jpeg_passthrough(&self, on: bool) {
        self.jpeg_passthrough.store(on, Ordering::Relaxed);
    }

    /// The verified JPEG file of `f` when the page is to get it as is: a JPEG frame shown as
    /// decoded (not demosaiced), with pass-through on.
    fn passthrough_jpeg<'a>(&self, f: &'a Frame) -> Option<&'a [u8]> {
        if !self.jpeg_passthrough.load(Ordering::Relaxed)
            || self.bayer
            || f.format() != Ok(gapstream_drone::PixelFormat::Jpeg)
        {
            return None;
        }
        f.coded.as_deref()
    }

    /// The WebSocket message of frame `f` (see the module docs).
    pub fn frame_message(&self, f: &Frame) -> Option<Bytes> {
        self.cached(&self.message, f, || {
            if let Some(jpeg) = self.passthrough_jpeg(f) {
                let mut m = Vec::with_capacity(20 + jpeg.len());
                m.extend_from_slice(b"GSJ1");
                m.extend_from_slice(&f.seq().to_le_bytes());
                m.extend_from_slice(&f.header.width.to_le_bytes());
                m.extend_from_slice(&f.header.height.to_le_bytes());
                m.extend_from_slice(&[0; 4]);
                m.extend_from_slice(jpeg);
                return Some(m);
            }
            let (ch, px) = self.shown(f);
            let mut m = Vec::with_capacity(20 + px.len());
            m.extend_from_slice(b"GSF1");
            m.extend_from_slice(&f.seq().to_le_bytes());
            m.extend_from_slice(&f.header.width.to_le_bytes());
            m.extend_from_slice(&f.header.height.to_le_bytes());
            m.extend_from_slice(&[ch as u8, 0, 0, 0]);
            m.extend_from_slice(&px);
            Some(m)
        })
    }

    fn gate(&self, token: &str) -> Option<Arc<AtomicBool>> {
        let mut g = self.gates.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = g.get(token) {
            return Some(f.clone());
        }
        // Bounded like the pages: tokens of pages that never came are dropped.
        if g.len() >= 4 * MAX_PAGES || token.is_empty() || token.len() > 64 {
            return None;
        }
        Some(g.entry(token.to_owned()).or_default().clone())
    }

    fn forget_gate(&self, token: &str) {
        self.gates
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(token);
    }
}

/// A grid tile: a drone's newest frame and status, and the frame's encodings.
#[derive(Default)]
struct Tile {
    frame: Option<Arc<Frame>>,
    stats: Option<Status>,
    cache: Vec<((u64, bool), Bytes)>,
}

/// `px` (`ch` bytes a pixel, `w × h`) at half size: each 2×2 block averaged (an odd last row or
/// column dropped). Returns the new width, height and pixels.
pub fn half_size(px: &[u8], w: usize, h: usize, ch: usize) -> (usize, usize, Vec<u8>) {
    let (hw, hh) = (w / 2, h / 2);
    let mut out = vec![0u8; hw * hh * ch];
    for y in 0..hh {
        for x in 0..hw {
            for c in 0..ch {
                let at = |dx: usize, dy: usize| px[((2 * y + dy) * w + 2 * x + dx) * ch + c] as u32;
                out[(y * hw + x) * ch + c] =
                    ((at(0, 0) + at(1, 0) + at(0, 1) + at(1, 1) + 2) / 4) as u8;
            }
        }
    }
    (hw, hh, out)
}

/// The viewer as an output on the receiver's bus: the newest frame wins (a page shows the
/// present; frames it had no time for are skipped, not queued), the status as it comes.
pub struct ViewerOutput(pub Arc<ViewerState>);

impl Consumer for ViewerOutput {
    fn name(&self) -> String {
        "viewer".into()
    }
    fn policy(&self) -> Policy {
        Policy::Latest
    }
    fn frame(&mut self, f: &Arc<Frame>, _: &Counters) -> Result<(), String> {
        // The bus's own Arc: shared, not copied.
        self.0.publish_frame(f.clone());
        Ok(())
    }
    fn status(&mut self, s: &Status) -> Result<(), String> {
        if self.0.grid {
            self.0.update_tile(s);
        }
        self.0.update_stats(|x| *x = s.clone());
        Ok(())
    }
}

/// A running viewer server on its own small tokio runtime; dropped = stopped.
pub struct Viewer {
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    addr: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot serve the viewer on {addr}: {why}")]
pub struct ViewerError {
    pub addr: String,
    pub why: String,
}

impl Viewer {
    /// Serves on `addr` (port 0 picks a free port).
    pub fn start(addr: &str, state: Arc<ViewerState>) -> Result<Self, ViewerError> {
        let err = |why: String| ViewerError {
            addr: addr.into(),
            why,
        };
        let listener = std::net::TcpListener::bind(addr).map_err(|e| err(e.to_string()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| err(e.to_string()))?;
        let local = listener.local_addr().map_err(|e| err(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("gapstream-viewer")
            .enable_all()
            .build()
            .map_err(|e| err(e.to_string()))?;
        let listener = {
            let _g = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(|e| err(e.to_string()))?
        };
        let app = Router::new()
            .route("/", get(page))
            .route("/index.html", get(page))
            .route("/ws", get(ws))
            .route("/gate/{token}", get(gate))
            .route("/stats.json", get(stats_json))
            .route("/frame.png", get(frame_png))
            .fallback(|| async { (StatusCode::NOT_FOUND, "not found") })
            .layer(axum::middleware::map_response(no_store))
            .with_state(state.clone());
        let state_for_history = state;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let st = state_for_history;
        runtime.spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(500));
            loop {
                every.tick().await;
                st.sample();
            }
        });
        runtime.spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Viewer {
            runtime: Some(runtime),
            shutdown: Some(tx),
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
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

async fn no_store(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn page(State(st): State<Arc<ViewerState>>) -> Response {
    let page = if st.grid { GRID_PAGE } else { PAGE };
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

async fn stats_json(State(st): State<Arc<ViewerState>>) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        status_json(&st.stats()),
    )
        .into_response()
}

async fn frame_png(State(st): State<Arc<ViewerState>>) -> Response {
    let t0 = Instant::now();
    while st.latest().is_none() && t0.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match st.frame_png(Duration::ZERO) {
        Some((seq, png)) => {
            st.png_served.fetch_add(1, Ordering::Relaxed);
            (
                [
                    (header::CONTENT_TYPE, "image/png".to_owned()),
                    (
                        header::HeaderName::from_static("x-frame-seq"),
                        seq.to_string(),
                    ),
                ],
                png,
            )
                .into_response()
        }
        None => (StatusCode::SERVICE_UNAVAILABLE, "no frame yet").into_response(),
    }
}

/// `?gate=TOKEN` of a query string.
fn gate_token(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|kv| kv.strip_prefix("gate="))
        .map(str::to_owned)
}

/// The page's load gate: an image the page requests while it loads, answered once the page's
/// WebSocket reports its first frame drawn (or after [`GATE_WAIT`]). The page's `load` event thus
/// fires with a frame on screen, which is what headless browsers' `--screenshot` waits for.
async fn gate(
    State(st): State<Arc<ViewerState>>,
    axum::extract::Path(token): axum::extract::Path<String>,
) -> Response {
    if let Some(shown) = st.gate(&token) {
        let t0 = Instant::now();
        while !shown.load(Ordering::Relaxed) && t0.elapsed() < GATE_WAIT {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        st.forget_gate(&token);
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn ws(State(st): State<Arc<ViewerState>>, uri: Uri, up: WebSocketUpgrade) -> Response {
    match st.slots.clone().try_acquire_owned() {
        Ok(permit) => {
            let token = gate_token(&uri);
            if st.grid {
                up.on_upgrade(move |sock| push_grid(sock, st, permit, token))
            } else {
                up.on_upgrade(move |sock| push(sock, st, permit, token))
            }
        }
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the viewer already pushes to {MAX_PAGES} pages; close one"),
        )
            .into_response(),
    }
}

/// One page: the latest frame whenever there is a new one, the stats when they changed (at most
/// every 250 ms); the page's `shown SEQ` messages open its load gate.
async fn push(
    mut sock: WebSocket,
    st: Arc<ViewerState>,
    _permit: OwnedSemaphorePermit,
    token: Option<String>,
) {
    let mut frames = st.frame.subscribe();
    frames.mark_changed();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_stats = String::new();
    if sock
        .send(Message::Text(st.history_json().into()))
        .await
        .is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            r = frames.changed() => {
                if r.is_err() {
                    break;
                }
                let f = frames.borrow_and_update().clone();
                if let Some(m) = f.as_ref().and_then(|f| st.frame_message(f)) {
                    if sock.send(Message::Binary(m)).await.is_err() {
                        break;
                    }
                    st.pushed.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ = tick.tick() => {
                let j = status_json(&st.stats());
                if j != last_stats {
                    if sock.send(Message::Text(j.clone().into())).await.is_err() {
                        break;
                    }
                    last_stats = j;
                }
            }
            m = sock.recv() => match m {
                Some(Ok(Message::Text(t))) if t.starts_with("shown ") => {
                    if let Some(g) = token.as_deref().and_then(|t| st.gate(t)) {
                        g.store(true, Ordering::Relaxed);
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    if let Some(t) = token.as_deref() {
        st.forget_gate(t);
    }
}

/// Rounds of grid frames sent to one page at most this often.
const GRID_ROUND: Duration = Duration::from_millis(50);

/// One grid page: each tile's newest frame (half size; the focused drone's full size) whenever
/// there are new ones and the page took the previous round, every drone's stats when they changed
/// (at most every 250 ms). The page says `focus NAME` (one drone full size), `focus` (the grid)
/// and `shown SEQ` (its load gate).
async fn push_grid(
    mut sock: WebSocket,
    st: Arc<ViewerState>,
    _permit: OwnedSemaphorePermit,
    token: Option<String>,
) {
    let mut changed = st.tiles_changed.subscribe();
    changed.mark_changed();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut last_stats = String::new();
    let mut sent: HashMap<String, (u64, bool)> = HashMap::new();
    let mut focus: Option<String> = None;
    loop {
        tokio::select! {
            r = changed.changed() => {
                if r.is_err() {
                    break;
                }
                changed.borrow_and_update();
                let names = match &focus {
                    Some(f) => vec![f.clone()],
                    None => st.tile_names(),
                };
                let mut failed = false;
                for n in names {
                    let full = focus.is_some();
                    let Some((seq, m)) = st.tile_message(&n, full) else { continue };
                    if sent.get(&n) == Some(&(seq, full)) {
                        continue;
                    }
                    if sock.send(Message::Binary(m)).await.is_err() {
                        failed = true;
                        break;
                    }
                    st.pushed.fetch_add(1, Ordering::Relaxed);
                    sent.insert(n, (seq, full));
                }
                if failed {
                    break;
                }
                tokio::time::sleep(GRID_ROUND).await;
            }
            _ = tick.tick() => {
                let j = st.tiles_json();
                if j != last_stats {
                    if sock.send(Message::Text(j.clone().into())).await.is_err() {
                        break;
                    }
                    last_stats = j;
                }
            }
            m = sock.recv() => match m {
                Some(Ok(Message::Text(t))) if t.starts_with("shown ") => {
                    if let Some(g) = token.as_deref().and_then(|t| st.gate(t)) {
                        g.store(true, Ordering::Relaxed);
                    }
                }
                Some(Ok(Message::Text(t))) if t.starts_with("focus") => {
                    let name = t.trim_start_matches("focus").trim();
                    focus = (!name.is_empty()).then(|| name.to_string());
                    sent.clear();
                    changed.mark_changed();
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    if let Some(t) = token.as_deref() {
        st.forget_gate(t);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::receiver::frame::test_frame;
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
        let page = String::from_utf8_lossy(&body);
        assert!(page.contains("/ws"), "the page opens the WebSocket");
        assert!(
            !page.contains("frame.png") && !page.contains("stats.json"),
            "the page polls nothing"
        );
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
        state.publish_frame(Arc::new(test_frame(
            5,
            3,
            2,
            vec![0, 50, 100, 150, 200, 250],
        )));
        let (h, body) = get(v.addr(), "/frame.png");
        assert!(
            h.contains("image/png") && h.to_ascii_lowercase().contains("x-frame-seq: 5"),
            "{h}"
        );
        assert_eq!(state.png_served(), 1);
        let g = images::parse_png(&body).unwrap();
        assert_eq!(g.pixels, vec![0, 50, 100, 150, 200, 250]);
        assert!(get(v.addr(), "/nope").0.contains("404"));
    }

    type Ws = tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>>;

    fn ws_connect(addr: SocketAddr) -> Result<Ws, tungstenite::Error> {
        tungstenite::connect(format!("ws://{addr}/ws")).map(|(ws, _)| ws)
    }

    /// The next frame message: (seq, width, height, channels, pixels).
    fn next_frame(ws: &mut Ws) -> (u64, usize, usize, u8, Vec<u8>) {
        loop {
            if let tungstenite::Message::Binary(b) = ws.read().unwrap() {
                assert_eq!(&b[..4], b"GSF1");
                let seq = u64::from_le_bytes(b[4..12].try_into().unwrap());
                let w = u16::from_le_bytes([b[12], b[13]]) as usize;
                let h = u16::from_le_bytes([b[14], b[15]]) as usize;
                return (seq, w, h, b[16], b[20..].to_vec());
            }
        }
    }

    #[test]
    fn frames_and_stats_are_pushed() {
        let state = ViewerState::new(false);
        let v = Viewer::start("127.0.0.1:0", state.clone()).unwrap();
        let px: Vec<u8> = (0..12).map(|i| i * 20).collect();
        state.publish_frame(Arc::new(test_frame(7, 4, 3, px.clone())));
        state.update_stats(|s| s.row.fps = 29.5);
        let mut ws = ws_connect(v.addr()).unwrap();
        // The current frame at once, then each new one, without the page asking.
        assert_eq!(next_frame(&mut ws), (7, 4, 3, 1, px.clone()));
        let stats = loop {
            if let tungstenite::Message::Text(t) = ws.read().unwrap()
                && !t.starts_with("{\"history\"")
            {
                break t.to_string();
            }
        };
        assert!(stats.contains("\"fps\":29.500"), "{stats}");
        for seq in 8..12u64 {
            state.publish_frame(Arc::new(test_frame(
                seq,
                4,
                3,
                px.iter().map(|p| p + seq as u8).collect(),
            )));
            let (s, _, _, _, got) = next_frame(&mut ws);
            assert_eq!(s, seq);
            assert_eq!(got, px.iter().map(|p| p + seq as u8).collect::<Vec<_>>());
        }
        // (counted once the send returned, which may be just after the page got it)
        let t0 = std::time::Instant::now();
        while state.frames_pushed() < 5 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(state.frames_pushed(), 5);
        assert_eq!(state.png_served(), 0);
    }

    #[test]
    fn pages_beyond_the_bound_are_refused() {
        let state = ViewerState::new(false);
        let v = Viewer::start("127.0.0.1:0", state.clone()).unwrap();
        let mut open: Vec<Ws> = (0..MAX_PAGES)
            .map(|_| ws_connect(v.addr()).unwrap())
            .collect();
        for _ in 0..3 {
            match ws_connect(v.addr()) {
                Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 503),
                Err(e) => panic!("expected 503, got {e}"),
                Ok(_) => panic!("page {} of {MAX_PAGES} was accepted", MAX_PAGES + 1),
            }
        }
        assert_eq!(state.pages(), MAX_PAGES);
        // The page still serves while full, and a closed page frees its place.
        assert!(get(v.addr(), "/").0.starts_with("HTTP/1.1 200"));
        let mut gone = open.pop().unwrap();
        gone.close(None).unwrap();
        while gone.read().is_ok() {}
        let t0 = std::time::Instant::now();
        while state.pages() == MAX_PAGES && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        open.push(ws_connect(v.addr()).expect("a place was freed"));
        assert_eq!(state.pages(), MAX_PAGES);
    }

    #[test]
    fn bayer_frames_are_served_in_colour() {
        let state = ViewerState::new(true);
        let f = Arc::new(test_frame(1, 4, 4, vec![200; 16]));
        state.publish_frame(f.clone());
        let (_, png) = state.frame_png(Duration::ZERO).unwrap();
        let mut dec =
            png::Decoder::new(std::io::BufReader::new(std::io::Cursor::new(png.to_vec())));
        dec.set_transformations(png::Transformations::normalize_to_color8());
        let r = dec.read_info().unwrap();
        assert_eq!(r.info().color_type, png::ColorType::Rgb);
        let m = state.frame_message(&f).unwrap();
        assert_eq!((m[16], m.len()), (3, 20 + 16 * 3));
    }

    /// A frame of `format` coded by the drone's host coder, as the receiver delivers it: the
    /// decoded samples and the coded file.
    fn coded_frame(seq: u64, codec: crate::codec::Codec) -> Frame {
        use gapstream_drone::{FrameCoder, FrameFormat};
        let px: Vec<u8> = (0..40 * 24).map(|i| (i * 7 % 251) as u8).collect();
        let fmt = FrameFormat {
            width: 40,
            height: 24,
            pixel: gapstream_drone::PixelFormat::Grey8,
        };
        let mut coded = Vec::new();
        let format = crate::codec::HostCoder::new(codec, 75)
            .code(fmt, &px, &mut coded)
            .unwrap()
            .unwrap();
        let decoded = crate::codec::decode(format, 40, 24, &coded)
            .unwrap()
            .unwrap();
        let mut f = test_frame(seq, 40, 24, decoded);
        f.header.pixel_format = format.code();
        f.coded = Some(Arc::from(coded));
        f
    }

    #[test]
    fn jpeg_frames_go_to_the_page_as_their_file() {
        use crate::codec::Codec;
        let state = ViewerState::new(false);
        let f = coded_frame(7, Codec::Jpeg);
        let m = state.frame_message(&f).unwrap();
        assert_eq!(&m[..4], b"GSJ1");
        assert_eq!(u64::from_le_bytes(m[4..12].try_into().unwrap()), 7);
        assert_eq!(
            (&m[12..14], &m[14..16], &m[16..20]),
            (
                &40u16.to_le_bytes()[..],
                &24u16.to_le_bytes()[..],
                &[0u8; 4][..]
            )
        );
        assert_eq!(
            &m[20..],
            f.coded.as_deref().unwrap(),
            "the verified file, as is"
        );
        // Turned off: the decoded samples, like every other frame.
        state.set_jpeg_passthrough(false);
        let f = coded_frame(8, Codec::Jpeg);
        let m = state.frame_message(&f).unwrap();
        assert_eq!((&m[..4], m[16], &m[20..]), (&b"GSF1"[..], 1, &f.pixels[..]));
        // JPEG-LS (no browser decodes it) and a demosaicing viewer: samples.
        let state = ViewerState::new(false);
        let f = coded_frame(9, Codec::Jpegls);
        let m = state.frame_message(&f).unwrap();
        assert_eq!((&m[..4], &m[20..]), (&b"GSF1"[..], &f.pixels[..]));
        let state = ViewerState::new(true);
        let m = state.frame_message(&coded_frame(10, Codec::Jpeg)).unwrap();
        assert_eq!((&m[..4], m[16]), (&b"GSF1"[..], 3));
    }

    /// A ground station's grid takes JPEG frames as their verified file too: the tile and the
    /// full-size view get the same `GTJ1` message, the file that decodes to the receiver's
    /// samples; turned off, half-size samples as for any frame; JPEG-LS frames
    /// go as samples.
    #[test]
    fn a_grids_jpeg_tiles_are_their_file() {
        use crate::codec::Codec;
        let named = |seq, codec| {
            let mut f = coded_frame(seq, codec);
            f.source = Arc::from("drone-07");
            Arc::new(f)
        };
        let state = ViewerState::grid(false);
        let f = named(7, Codec::Jpeg);
        state.publish_frame(f.clone());
        let file = f.coded.as_deref().unwrap();
        let mut built = Vec::new();
        for full in [false, true] {
            let (seq, m) = state.tile_message("drone-07", full).unwrap();
            built.push(m.as_ptr());
            assert_eq!(seq, 7);
            assert_eq!(&m[..4], b"GTJ1");
            assert_eq!(u64::from_le_bytes(m[4..12].try_into().unwrap()), 7);
            assert_eq!(
                (&m[12..14], &m[14..16], &m[16..20]),
                (
                    &40u16.to_le_bytes()[..],
                    &24u16.to_le_bytes()[..],
                    &[0u8, 8, 0, 0][..]
                )
            );
            assert_eq!(&m[20..28], b"drone-07");
            assert_eq!(&m[28..], file, "the verified file, as is");
            let mut d = jpeg_decoder::Decoder::new(&m[28..]);
            assert_eq!(d.decode().unwrap(), &f.pixels[..]);
        }
        assert_eq!(built[0], built[1], "one message built for both sizes");
        // Turned off: the decoded samples at half size (full size when focused).
        state.set_jpeg_passthrough(false);
        let f = named(8, Codec::Jpeg);
        state.publish_frame(f.clone());
        let (_, m) = state.tile_message("drone-07", false).unwrap();
        let (w, h, half) = half_size(&f.pixels, 40, 24, 1);
        assert_eq!((&m[..4], w, h), (&b"GST1"[..], 20, 12));
        assert_eq!((m[16], &m[28..]), (1, &half[..]));
        let (_, m) = state.tile_message("drone-07", true).unwrap();
        assert_eq!((&m[..4], &m[28..]), (&b"GST1"[..], &f.pixels[..]));
        // JPEG-LS: samples.
        let state = ViewerState::grid(false);
        let f = named(9, Codec::Jpegls);
        state.publish_frame(f.clone());
        let (_, m) = state.tile_message("drone-07", true).unwrap();
        assert_eq!((&m[..4], &m[28..]), (&b"GST1"[..], &f.pixels[..]));
    }
}
