// Shared by the GAP8 programs and build.rs (which computes the expected digests on the host):
// the test payload, key and nonce, and the digest.

/// The payload of the engine check: 128 KiB.
pub const CHECK_BYTES: usize = 128 * 1024;
/// Key of the engine check.
pub const CHECK_KEY: [u8; 32] = [
    0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8a, 0x8b, 0x8c, 0x8d, 0x8e, 0x8f,
    0x90, 0x91, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0x9b, 0x9c, 0x9d, 0x9e, 0x9f,
];
/// Nonce of the engine check.
pub const CHECK_NONCE: [u8; 12] = [0, 0, 0, 0x4a, 0, 0, 0, 0, 0x31, 0x41, 0x59, 0x26];
/// Keystream byte offset of the engine check (block counter 1, as RFC 8439's AEAD payload).
pub const CHECK_OFFSET: u64 = 64;

/// Byte `i` of the test payload.
pub fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i as u8)
}

/// FNV-1a (64-bit) over the little-endian 32-bit words of `data` (then its tail bytes).
pub fn digest(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        h ^= u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    for &b in words.remainder() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
