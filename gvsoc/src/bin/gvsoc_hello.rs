//! Hello from all 8 cluster cores of the GAP8 model, plus a barrier, DMA and allocator smoke test.
#![cfg_attr(target_arch = "riscv32", no_std, no_main)]

#[cfg(target_arch = "riscv32")]
mod app {
    use gap_rust_sdk::bare::{BareCluster, BareL2};
    use gap_rust_sdk::{Buf, Cluster, Controller, Team, bare_println};

    fn main() -> u32 {
        bare_println!("hello: FC up, powering the cluster");
        let Some(cl) = BareCluster::take() else {
            bare_println!("hello: FAIL cluster did not boot");
            return 1;
        };
        let (Ok(mut l1), Ok(src), Ok(mut dst)) = (
            Buf::zeroed(cl.l1(), 4096, 8),
            Buf::zeroed(&BareL2, 4096, 8),
            Buf::zeroed(&BareL2, 4096, 8),
        ) else {
            bare_println!("hello: FAIL allocation");
            return 2;
        };
        let mut src = src;
        for (i, b) in src.iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let r = cl.run(|ctrl| {
            let mut ids = [usize::MAX; 8];
            let f = ctrl.fork_each(8, &(), &mut ids, |team, _, slot| {
                bare_println!(
                    "hello from cluster core {} of {}",
                    team.core_id(),
                    team.cores()
                );
                *slot = team.core_id();
                team.barrier();
            });
            let mut dma = ctrl.dma();
            let d = dma
                .copy_in(&src, &mut l1)
                .and_then(|_| dma.copy_out(&l1, &mut dst));
            (f, ids, d)
        });
        let Ok((fork, ids, dma)) = r else {
            bare_println!("hello: FAIL offload");
            return 3;
        };
        let ids_ok = ids.iter().enumerate().all(|(i, &c)| c == i);
        let dma_ok = dma.is_ok() && src[..] == dst[..];
        let stats = cl.last_run();
        bare_println!(
            "hello: fork {:?}, cores {}, DMA L2->L1->L2 4 KiB {}, offload {} cycles",
            fork,
            if ids_ok { "0..8 ok" } else { "WRONG" },
            if dma_ok { "ok" } else { "WRONG" },
            stats.cycles
        );
        if fork.is_ok() && ids_ok && dma_ok {
            0
        } else {
            4
        }
    }

    gap_rust_sdk::bare_main!(main);
}

#[cfg(not(target_arch = "riscv32"))]
fn main() {
    eprintln!(
        "a GAP8 program: build with --target riscv32imc-unknown-none-elf and run on GVSOC (make gvsoc-check)"
    );
}
