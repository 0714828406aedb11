//! `make gvsoc-bench`: one ELF that runs a list of benchmark configurations on the GAP8 model.
//!
//! The host runner (`cargo xtask gvsoc-bench`) writes the list into [`GVSOC_BENCH_CONFIG`] (a
//! symbol in L2, found through the ELF's symbol table) together with the digest each run's output
//! must have, computed on the host with RustCrypto. Without a patched list the ELF runs a default
//! (PULP ChaCha20, 128 KiB, 1 and 8 cores) checked against build.rs's digest.
//!
//! Per run, on the FC: fill the payload (in L2, between two guard areas), make one warm-up call of
//! the same configuration over at most 2 KiB (so the cluster's instruction cache holds the call's
//! code, as in a streaming loop; the JPEG-LS runs: the frame's first `2 × bands` lines with the
//! frame's own plan, after its estimate; flag [`BENCH_FLAG_COLD`] skips it), refill, make the measured
//! call, check the output digest, both guards and the cluster stacks' high-water marks (stack
//! paint; a stack used to within 256 bytes of its end fails the run), print one line:
//!
//! `bench i=<n> kernel=<k> variant=<v> mode=<dma|fixed|nodma> cores=<n> buffer=<b> bytes=<n>
//! coded=<n> bands=<n> est_fc_cycles=<c> est_fc_instructions=<i> cycles=<c> instructions=<i>
//! active=<a> rounds=<r> stack0=<used>/<size> stack=<used>/<size> fcstack=<used>/<size>
//! digest=<hex> ok` (or `FAIL <why>`; `stack` is the most used of cores 1–7, both so far;
//! `coded`, `bands` and the JPEG-LS plan estimate's FC cycles and instructions are 0 for the
//! other kernels)
//!
//! Measured on cluster core 0 around the engine's cluster job (the offloaded function: cipher
//! set-up, DMA, fork, rounds): `cycles` are elapsed cluster clock cycles (cluster timer),
//! `instructions` core 0's PULP performance counter, `active` core 0's PULP cycle counter, which
//! does not count the cycles the core sleeps in barriers (so it is not a measure of time).
#![cfg_attr(target_arch = "riscv32", no_std, no_main)]

/// Layout sensitivity: `GVSOC_HOT_PAD=<bytes>` at build time puts that many bytes between the hot
/// code (`.text.hot.*`) and the rest of the program, which moves every other function's
/// instruction-cache sets relative to the hot code. The cluster's shared instruction cache picks victims at random, so a
/// figure moves by a percent or two with the layout; measuring a change over several pads tells
/// a real gain from a lucky layout. Empty (the default) in every measured build.
#[cfg(target_arch = "riscv32")]
mod layout {
    const fn parse(v: Option<&str>) -> usize {
        let Some(s) = v else { return 0 };
        let (b, mut i, mut r) = (s.as_bytes(), 0, 0);
        while i < b.len() {
            r = r * 10 + (b[i] - b'0') as usize;
            i += 1;
        }
        r
    }
    const HOT_PAD: usize = parse(option_env!("GVSOC_HOT_PAD"));
    core::arch::global_asm!(
        ".pushsection .text.pad,\"ax\",@progbits",
        ".skip {pad}",
        ".popsection",
        pad = const HOT_PAD,
    );
}

#[cfg(target_arch = "riscv32")]
#[path = "../jpegls_bench.rs"]
mod jpegls_bench;

#[cfg(target_arch = "riscv32")]
mod app {
    use gap_rust_cipher_s::aes::Aes128CtrCore;
    use gap_rust_cipher_s::chacha::{ChaCha20Core, Portable, Rv32Asm};
    #[cfg(feature = "pulp")]
    use gap_rust_cipher_s::engine::{Aes128CtrBlocks, ChaCha20Blocks};
    use gap_rust_sdk::bare::{BareCluster, BareL2};
    use gap_rust_sdk::{Buf, bare_println};
    use gap_rust_wrapper::{Blocks, CipherFactory, Config, Engine, Error, KeyIv, Rounds};
    use gvsoc::*;

    const _: () = assert!(core::mem::size_of::<RunSpec>() == 32);
    const _: () = assert!(core::mem::size_of::<BenchConfig>() == BENCH_CONFIG_BYTES);

    /// The run list (patched by the host runner; see the module docs).
    #[unsafe(no_mangle)]
    #[used]
    pub static GVSOC_BENCH_CONFIG: BenchConfig = BenchConfig {
        magic: BENCH_MAGIC,
        version: BENCH_VERSION,
        count: 0,
        flags: 0,
        runs: [RunSpec {
            kernel: 0,
            mode: 0,
            cores: 0,
            buffer: 0,
            bytes: 0,
            offset: 0,
            digest_lo: 0,
            digest_hi: 0,
        }; BENCH_MAX_RUNS],
    };

    fn config_word(i: usize) -> u32 {
        let base = (&raw const GVSOC_BENCH_CONFIG).cast::<u32>();
        // SAFETY: `i` indexes a word of the config static (callers stay below its size); a
        // volatile read, because the runner changes the bytes after compilation.
        unsafe { core::ptr::read_volatile(base.add(i)) }
    }

    fn spec(i: usize) -> RunSpec {
        let w = |k: usize| config_word(4 + 8 * i + k);
        RunSpec {
            kernel: w(0),
            mode: w(1),
            cores: w(2),
            buffer: w(3),
            bytes: w(4),
            offset: w(5),
            digest_lo: w(6),
            digest_hi: w(7),
        }
    }

    /// Without a patched list: PULP ChaCha20 over 128 KiB on 1 and 8 cores (build.rs's digest).
    fn default_spec(i: usize) -> RunSpec {
        RunSpec {
            kernel: 2,
            mode: 0,
            cores: if i == 0 { 1 } else { 8 },
            buffer: 8192,
            bytes: CHECK_BYTES as u32,
            offset: CHECK_OFFSET as u32,
            digest_lo: CHACHA20_DIGEST as u32,
            digest_hi: (CHACHA20_DIGEST >> 32) as u32,
        }
    }

    /// Warm-up calls cover at most this many bytes.
    const WARM_BYTES: usize = 2048;

    struct Outcome {
        cycles: u32,
        active: u32,
        instructions: u32,
        /// The AEAD runs' tag.
        tag: Option<[u8; 16]>,
        /// The codec runs' output length (their output is not `bytes` long).
        coded: Option<usize>,
        /// The JPEG-LS runs' band count (chosen by `gapstream_jpegls::BandChooser`).
        bands: Option<usize>,
        /// The JPEG-LS runs' plan estimate on the FC: cycles, instructions.
        estimate: Option<(u32, u32)>,
    }

    fn call<F: CipherFactory>(
        eng: &mut Engine<'_, BareCluster>,
        f: &F,
        mode: u32,
        offset: u64,
        data: &mut [u8],
    ) -> Result<(), Error> {
        if mode == 2 {
            eng.apply_direct(f, offset, data)
        } else {
            eng.apply(f, offset, data)
        }
    }

    fn measure<F: CipherFactory>(
        cl: &BareCluster,
        eng: &mut Engine<'_, BareCluster>,
        f: &F,
        s: &RunSpec,
        region: &mut [u8],
        warm: bool,
    ) -> Result<Outcome, Error> {
        let len = s.bytes as usize;
        let offset = s.offset as u64;
        let payload = &mut region[BENCH_GUARD..BENCH_GUARD + len];
        if warm {
            call(eng, f, s.mode, offset, &mut payload[..len.min(WARM_BYTES)])?;
        }
        fill(region, len);
        let payload = &mut region[BENCH_GUARD..BENCH_GUARD + len];
        call(eng, f, s.mode, offset, payload)?;
        let st = cl.last_run();
        Ok(Outcome {
            cycles: st.cycles,
            active: st.active_cycles,
            instructions: st.instructions,
            tag: None,
            coded: None,
            bands: None,
            estimate: None,
        })
    }

    /// ChaCha20-Poly1305 sealing of the payload with [`BENCH_AAD`]: `rustcrypto` runs the crate
    /// on cluster core 0 (one cluster job, no fork), `pulp` the engine's fused pass (one-time key,
    /// lanes, AAD, length block and tag all in the cluster job).
    fn measure_aead(
        cl: &BareCluster,
        eng: &mut Engine<'_, BareCluster>,
        s: &RunSpec,
        region: &mut [u8],
        warm: bool,
        rustcrypto: bool,
    ) -> Result<Outcome, Error> {
        use gap_rust_sdk::Cluster;
        let len = s.bytes as usize;
        let (key, nonce) = (&CHACHA_KEY.0, &CHACHA_NONCE.0);
        let seal =
            |eng: &mut Engine<'_, BareCluster>, data: &mut [u8]| -> Result<[u8; 16], Error> {
                if rustcrypto {
                    use chacha20poly1305::aead::{AeadInOut, KeyInit};
                    let r = chacha20poly1305::ChaCha20Poly1305::new(key.into());
                    cl.run(|_| {
                        r.encrypt_inout_detached(nonce.into(), &BENCH_AAD, data.into())
                            .map(|t| t.into())
                    })
                    .map_err(Error::Cluster)?
                    .map_err(|_| Error::CounterOverflow)
                } else {
                    #[cfg(feature = "pulp")]
                    {
                        use gap_rust_cipher_s::aead::{Pass, seal};
                        let pass = if s.mode == 2 { Pass::Direct } else { Pass::Dma };
                        seal(eng, pass, key, nonce, &BENCH_AAD, data)
                    }
                    #[cfg(not(feature = "pulp"))]
                    {
                        let _ = (eng, data);
                        Err(Error::Config)
                    }
                }
            };
        let payload = &mut region[BENCH_GUARD..BENCH_GUARD + len];
        if warm {
            seal(eng, &mut payload[..len.min(WARM_BYTES)])?;
        }
        fill(region, len);
        let payload = &mut region[BENCH_GUARD..BENCH_GUARD + len];
        let tag = seal(eng, payload)?;
        let st = cl.last_run();
        Ok(Outcome {
            cycles: st.cycles,
            active: st.active_cycles,
            instructions: st.instructions,
            tag: Some(tag),
            coded: None,
            bands: None,
            estimate: None,
        })
    }

    /// AES-128-GCM sealing of the payload with [`BENCH_AAD`]: `rustcrypto` runs the `aes-gcm`
    /// crate on cluster core 0 (one cluster job, no fork), `pulp` the engine's fused pass (`H`,
    /// `E_K(J0)` and the AAD's GHASH on core 0 before the fork, each core's GHASH lane over its
    /// ciphertext chunks in L1, length block and tag on core 0 after it: all in the cluster job).
    fn measure_gcm(
        cl: &BareCluster,
        eng: &mut Engine<'_, BareCluster>,
        s: &RunSpec,
        region: &mut [u8],
        warm: bool,
        rustcrypto: bool,
    ) -> Result<Outcome, Error> {
        use gap_rust_sdk::Cluster;
        let len = s.bytes as usize;
        let key = &AES_KEY.0;
        let nonce: &[u8; 12] = GCM_NONCE.0.first_chunk().ok_or(Error::Config)?;
        let seal =
            |eng: &mut Engine<'_, BareCluster>, data: &mut [u8]| -> Result<[u8; 16], Error> {
                if rustcrypto {
                    use aes_gcm::aead::{AeadInOut, KeyInit};
                    let r = aes_gcm::Aes128Gcm::new(key.into());
                    cl.run(|_| {
                        r.encrypt_inout_detached(nonce.into(), &BENCH_AAD, data.into())
                            .map(|t| t.into())
                    })
                    .map_err(Error::Cluster)?
                    .map_err(|_| Error::CounterOverflow)
                } else {
                    #[cfg(feature = "pulp")]
                    {
                        use gap_rust_cipher_s::aead::Pass;
                        let pass = if s.mode == 2 { Pass::Direct } else { Pass::Dma };
                        gap_rust_cipher_s::ghash::gcm::seal(eng, pass, key, nonce, &BENCH_AAD, data)
                    }
                    #[cfg(not(feature = "pulp"))]
                    {
                        let _ = (eng, data);
                        Err(Error::Config)
                    }
                }
            };
        let payload = &mut region[BENCH_GUARD..BENCH_GUARD + len];
        if warm {
            seal(eng, &mut payload[..len.min(WARM_BYTES)])?;
        }
        fill(region, len);
        let payload = &mut region[BENCH_GUARD..BENCH_GUARD + len];
        let tag = seal(eng, payload)?;
        let st = cl.last_run();
        Ok(Outcome {
            cycles: st.cycles,
            active: st.active_cycles,
            instructions: st.instructions,
            tag: Some(tag),
            coded: None,
            bands: None,
            estimate: None,
        })
    }

    /// Guards, payload pattern, guards.
    fn fill(region: &mut [u8], len: usize) {
        for (i, b) in region.iter_mut().enumerate() {
            *b = guard_byte(i);
        }
        for (i, b) in region[BENCH_GUARD..BENCH_GUARD + len]
            .iter_mut()
            .enumerate()
        {
            *b = pattern(i);
        }
    }

    fn guard_byte(i: usize) -> u8 {
        0xA5 ^ (i as u8).wrapping_mul(7)
    }

    /// Keys and IVs word-aligned in L2 (as a session's key material would be): the per-message
    /// set-up reads them a word at a time then.
    #[repr(C, align(4))]
    struct Aligned<const N: usize>([u8; N]);
    static CHACHA_KEY: Aligned<32> = Aligned(CHECK_KEY);
    static CHACHA_NONCE: Aligned<12> = Aligned(CHECK_NONCE);
    static AES_KEY: Aligned<16> = Aligned(BENCH_AES_KEY);
    static AES_IV: Aligned<16> = Aligned(BENCH_AES_IV);
    static GCM_NONCE: Aligned<16> = Aligned(bench_gcm_j0());

    fn run_one(
        cl: &BareCluster,
        eng: &mut Engine<'_, BareCluster>,
        s: &RunSpec,
        region: &mut [u8],
        warm: bool,
    ) -> Result<Outcome, Error> {
        let (ck, cn) = (&CHACHA_KEY.0[..], &CHACHA_NONCE.0[..]);
        let (ak, ai) = (&AES_KEY.0[..], &AES_IV.0[..]);
        use gap_rust_cipher_s::aes;
        match s.kernel {
            0 => measure(
                cl,
                eng,
                &Blocks::<ChaCha20Core<Portable>>::new(ck, cn),
                s,
                region,
                warm,
            ),
            1 => measure(
                cl,
                eng,
                &Blocks::<ChaCha20Core<Rv32Asm>>::new(ck, cn),
                s,
                region,
                warm,
            ),
            // The PULP kernels through the workers `ClusterEngine` uses (linked next to them).
            #[cfg(feature = "pulp")]
            2 => measure(cl, eng, &ChaCha20Blocks::new(ck, cn), s, region, warm),
            3 => measure(
                cl,
                eng,
                &KeyIv::<chacha20::ChaCha20>::new(ck, cn),
                s,
                region,
                warm,
            ),
            #[cfg(feature = "pulp")]
            4 => {
                let f = KeyIv::<gap_rust_cipher_s::ChaCha20Pulp>::new(ck, cn);
                measure(cl, eng, &f, s, region, warm)
            }
            5 => measure(
                cl,
                eng,
                &Blocks::<Aes128CtrCore<aes::Portable>>::new(ak, ai),
                s,
                region,
                warm,
            ),
            6 => measure(
                cl,
                eng,
                &Blocks::<Aes128CtrCore<aes::Rv32>>::new(ak, ai),
                s,
                region,
                warm,
            ),
            #[cfg(feature = "pulp")]
            7 => measure(cl, eng, &Aes128CtrBlocks::new(ak, ai), s, region, warm),
            8 => {
                let f = KeyIv::<ctr::Ctr128BE<::aes::Aes128>>::new(ak, ai);
                measure(cl, eng, &f, s, region, warm)
            }
            9 => measure_aead(cl, eng, s, region, warm, false),
            10 if s.cores == 1 => measure_aead(cl, eng, s, region, warm, true),
            11 => measure_gcm(cl, eng, s, region, warm, false),
            12 if s.cores == 1 => measure_gcm(cl, eng, s, region, warm, true),
            _ => Err(Error::Config),
        }
    }

    /// Bytes a cluster stack must keep unused (see the stack check after each run).
    const STACK_MARGIN: usize = 256;

    fn main() -> u32 {
        let Some(cl) = BareCluster::take() else {
            bare_println!("bench FAIL: the cluster did not boot");
            return 1;
        };
        let Ok(mut region) = Buf::zeroed(&BareL2, BENCH_MAX_BYTES + 2 * BENCH_GUARD, 8) else {
            bare_println!("bench FAIL: no L2 for the payload");
            return 2;
        };
        let patched = config_word(0) == BENCH_MAGIC && config_word(1) == BENCH_VERSION;
        let count = if patched {
            (config_word(2) as usize).min(BENCH_MAX_RUNS)
        } else {
            0
        };
        let (count, get): (usize, fn(usize) -> RunSpec) = if count == 0 {
            (2, default_spec)
        } else {
            (count, spec)
        };
        let warm = config_word(3) & BENCH_FLAG_COLD == 0;
        let mut failed = 0u32;
        let mut engine: Option<(u32, Engine<'_, BareCluster>)> = None;
        for i in 0..count {
            let s = get(i);
            let (kernel, variant) = BENCH_KERNELS
                .get(s.kernel as usize)
                .copied()
                .unwrap_or(("?", "?"));
            let mode = BENCH_MODES.get(s.mode as usize).copied().unwrap_or("?");
            let bad = s.bytes as usize > BENCH_MAX_BYTES
                || !(1..=8).contains(&s.cores)
                || s.buffer == 0
                || s.mode as usize >= BENCH_MODES.len();
            let rounds = match s.mode {
                1 => Rounds::Fixed,
                _ => Rounds::Auto,
            };
            // One engine (three L1 buffers) per buffer size; rebuilt when the size changes.
            if engine.as_ref().is_none_or(|(b, _)| *b != s.buffer) && !bad {
                engine = None;
                match Engine::new(&cl, Config::new(1, s.buffer as usize)) {
                    Ok(e) => engine = Some((s.buffer, e)),
                    Err(e) => bare_println!("bench i={i} engine: {e}"),
                }
            }
            let jls = is_jpegls_kernel(s.kernel as usize);
            if jls {
                // The codec takes its own L1: the engine's buffers go.
                engine = None;
            }
            let result = match (&mut engine, bad) {
                _ if jls && !bad => {
                    fill(&mut region, BENCH_MAX_BYTES);
                    let out = &mut region[BENCH_GUARD..BENCH_GUARD + BENCH_MAX_BYTES];
                    crate::jpegls_bench::run(&cl, variant == "pulp", s.cores as usize, out, warm)
                        .map(|m| Outcome {
                            cycles: m.job.cycles,
                            active: m.job.active_cycles,
                            instructions: m.job.instructions,
                            tag: None,
                            coded: Some(m.coded),
                            bands: Some(m.bands),
                            estimate: Some((m.estimate_cycles, m.estimate_instructions)),
                        })
                        .map_err(|_| Error::Config)
                }
                (Some((_, eng)), false) => eng.set_cores(s.cores as usize).and_then(|_| {
                    eng.set_rounds(rounds);
                    run_one(&cl, eng, &s, &mut region, warm)
                }),
                _ => Err(Error::Config),
            };
            let coded = result.as_ref().ok().and_then(|o| o.coded);
            let bands = result.as_ref().ok().and_then(|o| o.bands);
            let (est_c, est_i) = result
                .as_ref()
                .ok()
                .and_then(|o| o.estimate)
                .unwrap_or((0, 0));
            let len = coded.unwrap_or(s.bytes as usize);
            let guard_len = if jls { BENCH_MAX_BYTES } else { len };
            let ct = &region[BENCH_GUARD..BENCH_GUARD + len];
            let d = match &result {
                Ok(Outcome { tag: Some(t), .. }) => aead_digest(ct, t),
                _ => digest(ct),
            };
            let want = (s.digest_hi as u64) << 32 | s.digest_lo as u64;
            let guards_ok = (0..BENCH_GUARD)
                .chain(BENCH_GUARD + guard_len..region.len())
                .all(|j| region[j] == guard_byte(j));
            // Cluster stacks: high-water marks so far (stack paint), core 0 and the most used of
            // cores 1..7. A stack used to within STACK_MARGIN of its end fails the run: past its
            // end a core writes into its neighbour's stack, and the model may hang instead of
            // reporting anything.
            let (s0, z0) = gap_rust_sdk::bare::stack_used(0);
            let (s1, z1) = (1..8)
                .map(gap_rust_sdk::bare::stack_used)
                .fold((0, 0), |(m, _), (u, z)| (m.max(u), z));
            let stacks_ok = s0 + STACK_MARGIN <= z0 && s1 + STACK_MARGIN <= z1;
            // The FC's stack lies right above the program's statics: near its end, the run's
            // state may already be corrupt, whatever it returned.
            let (sf, zf) = gap_rust_sdk::bare::fc_stack_used();
            let verdict = match &result {
                _ if sf + STACK_MARGIN > zf => "FAIL fc-stack-near-overflow",
                Err(_) => "FAIL engine-error",
                Ok(_) if !guards_ok => "FAIL guard-overwritten",
                Ok(_) if d != want => "FAIL digest",
                Ok(_) if !stacks_ok => "FAIL stack-near-overflow",
                Ok(_) => "ok",
            };
            if verdict != "ok" {
                failed += 1;
            }
            let (c, n, a) = match &result {
                Ok(o) => (o.cycles, o.instructions, o.active),
                Err(_) => (0, 0, 0),
            };
            let rounds = match (s.mode, &engine) {
                (2, _) => 1,
                (_, Some((_, eng))) => eng.config().round_count(len),
                _ => 0,
            };
            bare_println!(
                "bench i={i} kernel={kernel} variant={variant} mode={mode} cores={} buffer={} bytes={} coded={} bands={} est_fc_cycles={est_c} est_fc_instructions={est_i} cycles={c} instructions={n} active={a} rounds={rounds} stack0={s0}/{z0} stack={s1}/{z1} fcstack={sf}/{zf} digest={d:016x} {verdict}",
                s.cores,
                s.buffer,
                s.bytes,
                coded.unwrap_or(0),
                bands.unwrap_or(0)
            );
            if let Err(e) = result {
                bare_println!("bench i={i} error: {e}");
            }
        }
        bare_println!("bench done runs={count} failed={failed}");
        if failed == 0 { 0 } else { 5 }
    }

    gap_rust_sdk::bare_main!(main);
}

#[cfg(not(target_arch = "riscv32"))]
fn main() {
    eprintln!(
        "a GAP8 program: build with --target riscv32imc-unknown-none-elf and run on GVSOC (make gvsoc-bench)"
    );
}
