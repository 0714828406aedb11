//! The host side of `rv32_qemu`'s `jpegls_check` (run by `make qemu-test`): the same pictures
//! (the same xorshift64* generator and seed), coded by the host build; the combined digest printed
//! here is the one the rv32 program must reproduce (pinned in `rv32_qemu/src/bin/jpegls_check.rs`
//! and checked here too, so that the two cannot drift apart).
use gapstream_jpegls::{Layout, Plan, encode_to_vec};

struct Rng(u64);
impl Rng {
    fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32
    }
}

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[test]
fn rv32_program_pins_the_host_streams() {
    let mut rng = Rng(0x0151_e5ed);
    let mut total = 0u64;
    for (w, h, layout, bands) in [
        (1, 1, Layout::Grey, 1),
        (37, 23, Layout::Grey, 3),
        (324, 40, Layout::Grey, 8),
        (64, 48, Layout::BayerRggb, 2),
    ] {
        for kind in 0..3u32 {
            let px: Vec<u8> = (0..w * h)
                .map(|i| {
                    let (x, y) = (i % w, i / w);
                    match kind {
                        0 => rng.next_u32() as u8,
                        1 => ((x * 2 + y * 3) as u32 + rng.next_u32() % 5) as u8,
                        _ => {
                            if (x / 8 + y / 6) % 2 == 0 {
                                40
                            } else {
                                200
                            }
                        }
                    }
                })
                .collect();
            let code = encode_to_vec(&Plan::new(w, h, layout, bands).unwrap(), &px).unwrap();
            total = total.wrapping_mul(31).wrapping_add(fnv(&code));
        }
    }
    println!("combined digest {total:016x}");
    let src = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../rv32_qemu/src/bin/jpegls_check.rs"),
    )
    .unwrap();
    assert!(
        src.contains(&format!(
            "const EXPECTED: u64 = 0x{:04x}_{:04x}_{:04x}_{:04x};",
            total >> 48,
            (total >> 32) & 0xffff,
            (total >> 16) & 0xffff,
            total & 0xffff
        )),
        "rv32_qemu/src/bin/jpegls_check.rs must pin {total:#018x}"
    );
}
