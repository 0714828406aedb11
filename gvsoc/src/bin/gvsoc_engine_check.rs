//! `make gvsoc-check`: the cluster engine on the GAP8 model over 128 KiB in L2, 1, 2, 4 and 8
//! cores, for each ChaCha20 kernel built in. The output digest is compared with the one build.rs
//! computed on the host with RustCrypto; cycles are the elapsed cluster-timer cycles of the
//! engine's cluster job (no warm-up call: `make gvsoc-bench` measures warm). One line per run:
//! `gvsoc kernel=<name> cores=<n> bytes=<n> cycles=<n> cpb=<x.xx> ok` (or `FAIL`).
#![cfg_attr(target_arch = "riscv32", no_std, no_main)]

#[cfg(target_arch = "riscv32")]
mod app {
    use gap_rust_sdk::bare::{BareCluster, BareL2};
    use gap_rust_sdk::{Buf, bare_println};
    use gap_rust_wrapper::{Blocks, CipherFactory, Config, Engine, KeyIv};
    use gvsoc::*;

    /// L1 buffer of the engine (three are allocated); `GVSOC_BUFFER` at build time overrides.
    const BUFFER: usize = parse(option_env!("GVSOC_BUFFER"), 8 * 1024);
    /// `Config::dma_lead`; `GVSOC_LEAD` at build time overrides the engine's default.
    const LEAD: usize = parse(option_env!("GVSOC_LEAD"), Config::new(1, 1).dma_lead);

    const fn parse(v: Option<&str>, default: usize) -> usize {
        let Some(v) = v else { return default };
        let b = v.as_bytes();
        let mut i = 0;
        let mut n = 0;
        while i < b.len() {
            n = n * 10 + (b[i] - b'0') as usize;
            i += 1;
        }
        n
    }

    fn run<F: CipherFactory>(
        cl: &BareCluster,
        eng: &mut Engine<'_, BareCluster>,
        data: &mut [u8],
        name: &str,
        cores: usize,
        factory: &F,
    ) -> bool {
        for (i, b) in data.iter_mut().enumerate() {
            *b = pattern(i);
        }
        let ran = eng
            .set_cores(cores)
            .and_then(|_| eng.apply(factory, CHECK_OFFSET, data));
        let stats = cl.last_run();
        let ok = ran.is_ok() && digest(data) == CHACHA20_DIGEST;
        let cpb100 = stats.cycles as u64 * 100 / data.len() as u64;
        bare_println!(
            "gvsoc kernel={} cores={} bytes={} cycles={} cpb={}.{:02} {}",
            name,
            cores,
            data.len(),
            stats.cycles,
            cpb100 / 100,
            cpb100 % 100,
            if ok { "ok" } else { "FAIL" }
        );
        if let Err(e) = ran {
            bare_println!("gvsoc engine error: {e}");
        }
        ok
    }

    fn main() -> u32 {
        let Some(cl) = BareCluster::take() else {
            bare_println!("gvsoc FAIL: the cluster did not boot");
            return 1;
        };
        let Ok(mut data) = Buf::zeroed(&BareL2, CHECK_BYTES, 8) else {
            bare_println!("gvsoc FAIL: no L2 for the payload");
            return 2;
        };
        let mut eng = match Engine::new(&cl, Config::new(1, BUFFER).with_dma_lead(LEAD)) {
            Ok(e) => e,
            Err(e) => {
                bare_println!("gvsoc FAIL: engine: {e}");
                return 3;
            }
        };
        // The check must notice an engine that leaves the payload alone.
        if PLAIN_DIGEST == CHACHA20_DIGEST {
            return 4;
        }
        let mut all = true;
        for cores in [1, 2, 4, 8] {
            use gap_rust_cipher_s::chacha::{ChaCha20Core, Rv32Asm};
            // PULP ChaCha20 through the worker `ClusterEngine` uses (linked next to the kernel).
            #[cfg(feature = "pulp")]
            {
                let f = gap_rust_cipher_s::engine::ChaCha20Blocks::new(&CHECK_KEY, &CHECK_NONCE);
                all &= run(&cl, &mut eng, &mut data, "chacha20-pulp", cores, &f);
            }
            let f = Blocks::<ChaCha20Core<Rv32Asm>>::new(&CHECK_KEY, &CHECK_NONCE);
            all &= run(&cl, &mut eng, &mut data, "chacha20-rv32", cores, &f);
            // RustCrypto's cipher through the generic `StreamCipher + StreamCipherSeek` path.
            let f = KeyIv::<chacha20::ChaCha20>::new(&CHECK_KEY, &CHECK_NONCE);
            all &= run(&cl, &mut eng, &mut data, "chacha20-rustcrypto", cores, &f);
        }
        for core in 0..8 {
            let (used, size) = gap_rust_sdk::bare::stack_used(core);
            bare_println!("gvsoc stack core={core} used={used} size={size}");
        }
        if all { 0 } else { 5 }
    }

    gap_rust_sdk::bare_main!(main);
}

#[cfg(not(target_arch = "riscv32"))]
fn main() {
    eprintln!(
        "a GAP8 program: build with --target riscv32imc-unknown-none-elf and run on GVSOC (make gvsoc-check)"
    );
}
