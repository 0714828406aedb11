//! The frame on the cluster: one band per core, streamed L2 → L1 → L2 by each core's own DMA
//! commands, then joined into one file.
//!
//! ```text
//! FC:      encoder.encode(spec, pixels (L2), out (L2))    tables, header, slots made when they change
//! core 0:    tables -> L1 (DMA, only when the quality changed); header -> out[..h] (DMA);
//!            fork one core per band
//! core i:      code_band: strips of its MCU rows through its L1 area (below), bytes to its slot
//! core 0:    join: band i's bytes moved down to follow band i-1 (DMA through L1), EOI
//! ```
//!
//! Each core's L1 area ([`Config::area`]) holds two strip buffers (8 pixel rows × up to
//! `strip_blocks` blocks) and two output chunks. One step is one DMA scope, like the cipher
//! engine's per-core pipelines: the previous full chunk is written back to the core's slot of
//! `out` and, when a strip starts, the next strip is fetched (one command per pixel row, or one
//! for the whole strip when it is a full-width MCU row), while the core codes the current strip
//! into the current chunk until the strip ends or the chunk cannot take another block; the scope
//! waits for both transfers, and the buffers rotate. The first fetch and the last write-backs
//! are the only transfers nothing overlaps.
//!
//! Slots: band `i` is written to `out[start_i .. start_i + cap_i]` ([`Layout::slot`]): its
//! worst case when `out` holds every band's worst case ([`Layout::max_len`]), otherwise a share
//! of `out` proportional to its MCU rows. A band whose bytes exceed its slot fails the frame
//! with [`Error::OutputFull`], even when the whole file would have fitted: give `out` at least
//! the frame's pixel count plus the header for camera frames (a band then fails only when it
//! codes to more bytes than it has pixels), or [`Layout::max_len`] for a guarantee.
//!
//! The join moves bands `1..n` down to follow band 0 (which is already in place) through L1 on
//! core 0 with the DMA, in order, each in pieces no larger than the L1 areas: a band's target
//! never overlaps a later band's slot, and a piece is read completely before it is written.
use gap_rust_sdk::dma::{Scope, Transfer};
use gap_rust_sdk::{Buf, Cluster, Controller, Dma, DmaError, DmaRaw, MAX_CORES, RawAlloc, Team};

use crate::band::{
    CoderState, code_blocks_reserved, end_interval, interval_end, replicate_edges, strips,
};
use crate::entropy::{MAX_BLOCK_BYTES, MAX_FLUSH_BYTES, Out};
use crate::fdct::{Kernel, Work};
use crate::layout::{DRI_LEN, HEADER_LEN, Layout};
use crate::tables::{TABLES_BYTES, Tables};
use crate::{Error, FrameSpec};

impl From<DmaError> for Error {
    fn from(e: DmaError) -> Self {
        Error::Dma(e)
    }
}

// Every core keeps at most two DMA commands in flight, a strip's fetch (one 2-D command, or the
// rows one at a time) and a chunk's write-back, so 8 cores stay within mchan's 16 transfer ids
// for the whole cluster; more can deadlock it (docs/jpeg.md, "The cluster pipeline").
const _: () = assert!(2 * MAX_CORES <= gap_rust_sdk::dma::CLUSTER_DMA_IDS);

/// The smallest output chunk: one block at its worst plus an interval's end always fit an
/// empty chunk, so every step makes progress.
pub const MIN_CHUNK: usize = MAX_BLOCK_BYTES + MAX_FLUSH_BYTES + 8;

/// What a [`ClusterEncoder`] is made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Cores (1..=8): the most bands a frame can have.
    pub cores: usize,
    /// Blocks of a strip at most (8 pixel rows × `8 strip_blocks` pixels per L1 strip buffer).
    pub strip_blocks: usize,
    /// Bytes of each of the two output chunks per core (at least [`MIN_CHUNK`], a multiple of 4).
    pub chunk: usize,
}

impl Config {
    /// `cores` cores, strips of up to 21 blocks (168 pixels: a 324-pixel row in two strips),
    /// chunks of 768 bytes: 4,224 bytes of L1 per core, plus the tables once. (Strips of 12
    /// blocks, 3 KiB per core, cost 1.4 % more cycles on 8 cores: more strip steps.)
    pub const fn new(cores: usize) -> Config {
        Config {
            cores,
            strip_blocks: 21,
            chunk: 768,
        }
    }

    /// L1 bytes of one core's area: two strips and two chunks.
    pub const fn area(&self) -> usize {
        2 * 64 * self.strip_blocks + 2 * self.chunk
    }

    /// L1 bytes the encoder allocates: the tables and every core's area.
    pub const fn l1_bytes(&self) -> usize {
        TABLES_AREA + self.cores * self.area()
    }

    fn check(&self, max_cores: usize) -> Result<(), Error> {
        if self.cores == 0 || self.cores > max_cores.min(MAX_CORES) {
            return Err(Error::Bands);
        }
        if self.strip_blocks == 0 || self.chunk < MIN_CHUNK || self.chunk % 4 != 0 {
            return Err(Error::Config);
        }
        Ok(())
    }
}

/// L1 bytes kept for the tables (their size rounded up to 8).
const TABLES_AREA: usize = TABLES_BYTES.div_ceil(8) * 8;

/// Room for the longest header (with DRI).
const HEADER_MAX: usize = HEADER_LEN + DRI_LEN;

/// Baseline JPEG on the cluster: L1 buffers allocated once, no allocation per frame.
pub struct ClusterEncoder<'c, C: Cluster> {
    cl: &'c C,
    cfg: Config,
    /// The tables' L1 copy, then every core's area.
    l1: Buf<'c, C::L1>,
    /// The tables of the last quality (L2), and whether L1 holds them.
    tables: Tables,
    loaded: bool,
    /// The header of the last spec.
    header: [u8; HEADER_MAX],
    header_of: Option<FrameSpec>,
}

impl<'c, C: Cluster> ClusterEncoder<'c, C> {
    /// Allocates the L1 buffers ([`Config::l1_bytes`]).
    pub fn new(cl: &'c C, cfg: Config) -> Result<Self, Error> {
        cfg.check(cl.max_cores())?;
        let l1 = cl
            .l1()
            .alloc_zeroed(cfg.l1_bytes(), 8)
            .map_err(Error::Alloc)?;
        Ok(ClusterEncoder {
            cl,
            cfg,
            l1,
            tables: Tables::new(75),
            loaded: false,
            header: [0; HEADER_MAX],
            header_of: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// Codes a frame (`pixels`: `width × height` bytes in L2) on `spec.bands` cores into `out`;
    /// returns the file's length. The file is byte-identical to [`crate::encode`]'s.
    ///
    /// On the FC before the cluster job (not in the job's cycles): argument checks, and when the
    /// spec changed since the last frame the tables and the header (a few thousand
    /// instructions); the slot plan of `out` (a few dozen).
    pub fn encode<K: Kernel>(
        &mut self,
        spec: &FrameSpec,
        pixels: &[u8],
        out: &mut [u8],
    ) -> Result<usize, Error> {
        let layout = spec.layout()?;
        if spec.bands as usize > self.cfg.cores {
            return Err(Error::Bands);
        }
        if pixels.len() != spec.width as usize * spec.height as usize {
            return Err(Error::Size);
        }
        let hl = layout.header_len();
        if out.len() < hl + 2 {
            return Err(Error::OutputFull);
        }
        if self.tables.quality != spec.quality as u32 {
            self.tables = Tables::new(spec.quality);
            self.loaded = false;
        }
        if self.header_of != Some(*spec) {
            let mut o = Out::new(&mut self.header);
            layout.write_header(&self.tables, &mut o);
            self.header_of = Some(*spec);
        }
        let mut slots = [(0usize, 0usize); MAX_CORES];
        for (i, s) in slots.iter_mut().enumerate().take(layout.bands as usize) {
            *s = layout.slot(i as u32, out.len());
        }
        let job = Job {
            layout: &layout,
            tables: &self.tables,
            load: !self.loaded,
            header: &self.header[..hl],
            slots: &slots,
            cfg: &self.cfg,
        };
        let l1 = &mut *self.l1;
        let r = self
            .cl
            .run(|ctrl| job.run::<K, _>(ctrl, pixels, out, l1))
            .map_err(Error::Cluster)?;
        // The L1 tables are current once a job has run (it loads them first).
        self.loaded = true;
        r
    }
}

/// One frame's cluster job, prepared on the FC.
struct Job<'a> {
    layout: &'a Layout,
    /// The tables in L2, copied to L1 when `load`.
    tables: &'a Tables,
    load: bool,
    header: &'a [u8],
    slots: &'a [(usize, usize); MAX_CORES],
    cfg: &'a Config,
}

/// What every core of a frame's fork reads.
struct Ctx<'a> {
    layout: &'a Layout,
    t: &'a Tables,
    pixels: &'a [u8],
    cfg: &'a Config,
}

/// Core `i`'s share of a fork: its DMA, its L1 area, its slot of `out`, its result (the band's
/// length).
struct LaneSlot<'a, D: DmaRaw> {
    dma: Option<Dma<D>>,
    area: &'a mut [u8],
    slot: &'a mut [u8],
    result: Result<usize, Error>,
}

impl Job<'_> {
    /// On core 0: tables and header, the fork, the join.
    fn run<K: Kernel, Ctl: Controller>(
        &self,
        ctrl: &mut Ctl,
        pixels: &[u8],
        out: &mut [u8],
        l1: &mut [u8],
    ) -> Result<usize, Error> {
        let layout = self.layout;
        let hl = self.header.len();
        let n = layout.bands as usize;
        let mut dma = ctrl.dma();
        let (tbuf, areas) = l1.split_at_mut(TABLES_AREA);
        if self.load {
            let (src, dst) = (self.tables.as_bytes(), &mut tbuf[..TABLES_BYTES]);
            dma.scope(|s| s.copy_in(src, dst).map(|_| ()))?;
        }
        let t = Tables::from_bytes(tbuf).ok_or(Error::Config)?;
        // The header through core 0's area into `out`.
        {
            let stage = &mut areas[..hl];
            let src = self.header;
            dma.scope(|s| s.copy_in(src, stage).map(|_| ()))?;
            let (stage, head) = (&areas[..hl], &mut out[..hl]);
            dma.scope(|s| s.copy_out(stage, head).map(|_| ()))?;
        }
        let ctx = Ctx {
            layout,
            t,
            pixels,
            cfg: self.cfg,
        };
        let mut slots: [Option<LaneSlot<'_, Ctl::DmaRaw>>; MAX_CORES] = Default::default();
        {
            let mut areas = areas.chunks_mut(self.cfg.area());
            let mut rest = &mut out[hl..];
            let mut at = hl;
            for (s, &(start, cap)) in slots.iter_mut().zip(self.slots.iter()).take(n) {
                let (_, tail) = core::mem::take(&mut rest).split_at_mut(start - at);
                let (slot, tail) = tail.split_at_mut(cap);
                rest = tail;
                at = start + cap;
                *s = Some(LaneSlot {
                    dma: Some(ctrl.dma()),
                    area: areas.next().ok_or(Error::Config)?,
                    slot,
                    result: Ok(0),
                });
            }
            ctrl.fork_each(n, &ctx, &mut slots[..n], |team, ctx, lane| {
                if let Some(lane) = lane {
                    lane.result = match lane.dma.take() {
                        Some(mut dma) => code_band::<K, _>(
                            &mut dma,
                            ctx.layout,
                            ctx.t,
                            team.core_id() as u32,
                            ctx.pixels,
                            lane.area,
                            ctx.cfg,
                            lane.slot,
                        ),
                        None => Err(Error::Config),
                    };
                }
            })
            .map_err(Error::Fork)?;
        }
        let mut lens = [0usize; MAX_CORES];
        for (len, s) in lens.iter_mut().zip(slots.iter()).take(n) {
            *len = match s {
                Some(s) => s.result?,
                None => return Err(Error::Config),
            };
        }
        drop(slots);
        // Join: band 0 starts right after the header; the others move down.
        let mut end = hl + lens[0];
        for (&len, &(start, _)) in lens.iter().zip(self.slots.iter()).take(n).skip(1) {
            dma_move(&mut dma, out, areas, start, end, len)?;
            end += len;
        }
        out.get_mut(end..end + 2)
            .ok_or(Error::OutputFull)?
            .copy_from_slice(&[0xff, 0xd9]);
        Ok(end + 2)
    }
}

/// Moves `out[from..from + len]` to `out[to..to + len]` (`to <= from`) through `stage` (L1),
/// forward, one piece read completely before it is written.
fn dma_move<D: DmaRaw>(
    dma: &mut Dma<D>,
    out: &mut [u8],
    stage: &mut [u8],
    from: usize,
    to: usize,
    len: usize,
) -> Result<(), Error> {
    if from == to || len == 0 {
        return Ok(());
    }
    if to > from || stage.is_empty() {
        return Err(Error::Config);
    }
    let mut done = 0;
    while done < len {
        let k = (len - done).min(stage.len());
        let (src, buf) = (&out[from + done..from + done + k], &mut stage[..k]);
        dma.scope(|s| s.copy_in(src, buf).map(|_| ()))?;
        let (buf, dst) = (&stage[..k], &mut out[to + done..to + done + k]);
        dma.scope(|s| s.copy_out(buf, dst).map(|_| ()))?;
        done += k;
    }
    Ok(())
}

/// Fetching a strip `(row, x0, nb)` of the frame into `dst` (8 rows `stride` bytes apart): the
/// rows inside the frame, the pixels inside it. One 2-D command when the strip's rows fill its
/// stride and the backend has 2-D transfers; otherwise one command per row with at most one in
/// flight: mchan has 16 transfer counters for the 8 cores, and a core that finds none stalls
/// until one is freed, which only a waiting core does (with 9 commands per core, 4 cores
/// deadlocked on the GAP8 model). [`Fetch::step`] waits for the row in flight and starts the
/// next; the lanes call it between blocks, so the rows arrive while the core codes.
struct Fetch<'s, 'env, 'd, R: DmaRaw, const N: usize> {
    s: &'s Scope<'s, 'env, R, N>,
    pixels: &'s [u8],
    rows: core::iter::Take<core::slice::ChunksMut<'d, u8>>,
    whole: Option<&'d mut [u8]>,
    /// The whole strip as one 2-D tile (line length, L2 stride).
    tile: Option<(usize, usize)>,
    /// L2 offset of the next row, bytes per row, the frame's row pitch.
    at: usize,
    cols: usize,
    pitch: usize,
    inflight: Option<Transfer<'s, 'env, R, N>>,
    error: Option<DmaError>,
}

impl<'s, 'env: 's, 'd: 's, R: DmaRaw, const N: usize> Fetch<'s, 'env, 'd, R, N> {
    fn new(
        s: &'s Scope<'s, 'env, R, N>,
        layout: &Layout,
        pixels: &'s [u8],
        (row, x0, nb): (u32, usize, usize),
        dst: &'d mut [u8],
        stride: usize,
        two_d: bool,
    ) -> Self {
        let (w, h) = (layout.width as usize, layout.height as usize);
        let top = 8 * row as usize;
        let rows = (h - top).min(8);
        let left = 8 * x0;
        let cols = (w - left).min(8 * nb);
        let tile = two_d && cols == stride;
        let one = !tile && cols == w && stride == w;
        let (whole, rest): (Option<&'d mut [u8]>, &'d mut [u8]) = if tile || one {
            (Some(&mut dst[..rows * cols]), &mut [])
        } else {
            (None, dst)
        };
        Fetch {
            s,
            pixels,
            rows: rest.chunks_mut(stride.max(1)).take(rows),
            whole,
            tile: tile.then_some((cols, w)),
            at: top * w + left,
            cols: if tile {
                (rows - 1) * w + cols
            } else if one {
                rows * w
            } else {
                cols
            },
            pitch: w,
            inflight: None,
            error: None,
        }
    }

    /// Waits for the transfer in flight (if any) and starts the next (if any); false when done.
    fn step(&mut self) -> bool {
        if let Some(t) = self.inflight.take() {
            t.wait();
        }
        if self.error.is_some() {
            return false;
        }
        let (src, dst) = match self.whole.take() {
            Some(d) => {
                let src = &self.pixels[self.at..self.at + self.cols];
                if let Some((line, pitch)) = self.tile {
                    match self.s.copy_in_2d(src, pitch, line, d) {
                        Ok(t) => self.inflight = Some(t),
                        Err(e) => self.error = Some(e),
                    }
                    return true;
                }
                (src, d)
            }
            None => match self.rows.next() {
                Some(d) => {
                    let src = &self.pixels[self.at..self.at + self.cols];
                    self.at += self.pitch;
                    (src, &mut d[..self.cols])
                }
                None => return false,
            },
        };
        match self.s.copy_in(src, dst) {
            Ok(t) => self.inflight = Some(t),
            Err(e) => self.error = Some(e),
        }
        true
    }

    /// Fetches the rest and waits for it.
    fn finish(&mut self) -> Result<(), DmaError> {
        while self.step() {}
        self.error.map_or(Ok(()), Err)
    }
}

/// What a step ended with.
enum Step {
    /// The strip (and its interval end, if any) is coded.
    StripDone,
    /// The current chunk cannot take the next block at its worst.
    ChunkFull,
}

/// One core's band: band `band` of `pixels` (L2) coded through `area` (L1, [`Config::area`]
/// bytes) with `dma`, its bytes (restart marker after it included, unless it is the last band)
/// written to `slot` (L2); returns how many. The per-core step of [`ClusterEncoder`], usable from
/// any fork that gives a core its DMA, area and slot ([`Layout::slot`] cuts an output buffer
/// into slots, [`crate::join`] joins bands written anywhere).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
#[cfg_attr(
    target_arch = "riscv32",
    unsafe(link_section = ".text.hot.4.jpeg.1.band")
)]
pub fn code_band<K: Kernel, R: DmaRaw>(
    dma: &mut Dma<R>,
    layout: &Layout,
    t: &Tables,
    band: u32,
    pixels: &[u8],
    area: &mut [u8],
    cfg: &Config,
    slot: &mut [u8],
) -> Result<usize, Error> {
    if band >= layout.bands || area.len() < cfg.area() || cfg.chunk < MIN_CHUNK {
        return Err(Error::Config);
    }
    let b = layout.band(band);
    let (count, per) = strips(layout.mcus_x, cfg.strip_blocks);
    let sbytes = 64 * per;
    let (sbuf, cbuf) = area.split_at_mut(2 * sbytes);
    let (s_a, s_b) = sbuf.split_at_mut(sbytes);
    let (c_a, c_b) = cbuf.split_at_mut(cfg.chunk);
    let (c_b, _) = c_b.split_at_mut(cfg.chunk);
    // [current, next] strips; [current, to commit] chunks.
    let mut strip: [&mut [u8]; 2] = [s_a, s_b];
    let mut chunk: [&mut [u8]; 2] = [c_a, c_b];
    let (w, h) = (layout.width as usize, layout.height as usize);
    let mcus_x = layout.mcus_x as usize;
    let total = b.rows as usize * count;
    // Strip g: its MCU row, first block and blocks; its rows are packed (stride 8 nb).
    let geom = |g: usize| {
        let x0 = (g % count) * per;
        (b.first_row + (g / count) as u32, x0, per.min(mcus_x - x0))
    };
    let two_d = dma.raw().has_2d();
    let mut written = 0usize;
    let mut pending = 0usize;
    let mut fill = 0usize;
    let mut g = 0usize;
    let mut pos = 0usize;
    let mut st = CoderState::default();
    let mut work = Work::default();
    {
        let first = &mut *strip[0];
        let gm = geom(0);
        dma.scope(|s| Fetch::new(s, layout, pixels, gm, first, 8 * gm.2, two_d).finish())?;
    }
    loop {
        let (row, x0, nb) = geom(g);
        let stride = 8 * nb;
        let fetch_next = pos == 0 && g + 1 < total;
        let commit = pending;
        if written + commit > slot.len() {
            return Err(Error::OutputFull);
        }
        let [cur, next] = &mut strip;
        let [out_c, back] = &mut chunk;
        let (cur, next, out_c, back) = (&mut **cur, &mut **next, &mut **out_c, &**back);
        let dst = &mut slot[written..written + commit];
        let (st_r, pos_r, fill_r, work_r) = (&mut st, &mut pos, &mut fill, &mut work);
        let step = dma.scope(|s| -> Result<Step, Error> {
            if commit > 0 {
                s.copy_out(&back[..commit], dst)?;
            }
            let mut fetch = fetch_next.then(|| {
                let gn = geom(g + 1);
                Fetch::new(s, layout, pixels, gn, next, 8 * gn.2, two_d)
            });
            if *pos_r == 0 {
                let top = 8 * row as usize;
                replicate_edges(cur, stride, nb, (h - top).min(8), (w - 8 * x0).min(8 * nb));
            }
            let mut o = Out {
                buf: out_c,
                pos: *fill_r,
                full: false,
            };
            // Move the fetch on between blocks until it is all issued (a tile: one command).
            let mut busy = fetch.is_some();
            *pos_r =
                code_blocks_reserved::<K>(cur, stride, *pos_r, nb, t, st_r, &mut o, work_r, || {
                    if busy {
                        busy = fetch.as_mut().is_some_and(|f| f.step());
                    }
                    busy
                });
            if let Some(f) = fetch.as_mut() {
                f.finish()?;
            }
            let done = *pos_r == nb;
            if done && x0 + nb == mcus_x {
                let (ends, scan_end) = interval_end(layout, row);
                // Fits: the reserve kept room for it after the strip's last block.
                if ends && !end_interval(row / layout.interval_rows, scan_end, st_r, &mut o) {
                    return Err(Error::Config);
                }
            }
            *fill_r = o.pos;
            Ok(if done {
                Step::StripDone
            } else {
                Step::ChunkFull
            })
        })?;
        written += commit;
        pending = 0;
        match step {
            Step::ChunkFull => {
                // An empty chunk always takes a block, unless the kernel refused the strip
                // (`Kernel::code_run`): stop instead of stepping forever.
                if fill == 0 {
                    return Err(Error::Config);
                }
                chunk.swap(0, 1);
                pending = fill;
                fill = 0;
            }
            Step::StripDone => {
                strip.swap(0, 1);
                g += 1;
                pos = 0;
                if g == total {
                    break;
                }
            }
        }
    }
    if written + pending + fill > slot.len() {
        return Err(Error::OutputFull);
    }
    let (d1, rest) = slot[written..].split_at_mut(pending);
    let d2 = &mut rest[..fill];
    let (b1, b0) = (&chunk[1][..pending], &chunk[0][..fill]);
    dma.scope(|s| -> Result<(), DmaError> {
        s.copy_out(b1, d1)?;
        s.copy_out(b0, d2)?;
        Ok(())
    })?;
    Ok(written + pending + fill)
}
